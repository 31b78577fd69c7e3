"""The episode runner: one (env spec, task, seed, policy) → one ``Trajectory``.

Every executor runs this same function. Nothing escapes it: any exception from the
bridge, a component, the policy or the recording itself (``BaseException`` included:
``SystemExit``, ``KeyboardInterrupt`` raised by plugin code, ``GeneratorExit``) becomes the
trajectory's ``error_class`` (``policy_error``, ``env_error``, ``infra_error``,
``timeout``) with its message, type and traceback, and the verifier's verdict is taken
whenever the env is still sound (also after the policy failed). Unparseable policy output
is an invalid step (the policy is told, the episode goes on). The per-episode time limit
is a ``SIGALRM`` timer where the runner owns the main thread (it interrupts a blocked LLM
call or a runaway bridge), and a check between steps elsewhere; a real Ctrl-C on the main
thread still stops the run. Code that disables, ignores or blocks the timer does not
escape it: a watchdog thread raises the deadline into the episode's thread when the
timer failed to, again and again, and when even that cannot stop it (the code swallows
every exception, or sits in one C call) hands a ``timeout`` trajectory to the caller's
``abandon`` (the inline executor records it and ends the process). C code that holds the
GIL stops the watchdog too: then faulthandler's timer ends the process (exit status 1,
every thread's stack on stderr) without a row.

Verdict and reward come from the base bridges (``taps.BaseTap``), never through the
wrapper chain; when a component made the stack report something else, the trajectory
records both.
"""

from __future__ import annotations

import ctypes
import faulthandler
import gc
import json
import math
import numbers
import os
import re
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import attrs

from .. import errors
from ..types import Action, EnvResponse, EvaluationResult, Observation, ToolSpec, thaw
from .policy import ENDPOINT_MARK, PolicyStep
from .taps import BaseTap
from .trajectory import (
    EpisodeRequest,
    ModelTurn,
    StepRecord,
    Trajectory,
    finite,
    jsonable,
    trajectory_to_json,
)
from .trajectory import read_back as turn_read_back
from .warm import Warm

MAX_TEXT = 8 * 1024 * 1024  # characters of one observation or one policy output a trajectory keeps
MAX_TRACEBACK = 20_000


class _Deadline(BaseException):
    """Raised at the episode deadline; a BaseException so that ``except Exception`` in
    bridges, policies and the contract sandbox cannot swallow it."""


class _Overrun(_Deadline):
    """Raised into the episode's thread by the watchdog: the episode ran past its limit
    and the ``SIGALRM`` timer did not stop it (the code running disabled, ignored or
    blocked it)."""

    def __str__(self) -> str:
        return "the episode ran past its time limit and its timer did not stop it; the watchdog did"


#: CPython's "raise this in that thread", bound once here so that code running later in
#: the process cannot swap what the watchdog calls through ``ctypes``.
_SET_ASYNC_EXC = ctypes.pythonapi.PyThreadState_SetAsyncExc
#: After the deadline the timer has this long to stop the episode before the watchdog acts;
#: then it raises every ``WATCHDOG_REPEAT_S`` and gives up after ``WATCHDOG_GIVE_UP_S``.
WATCHDOG_GRACE_S = 1.0
WATCHDOG_REPEAT_S = 0.2
WATCHDOG_GIVE_UP_S = 5.0
#: C code that holds the GIL (a catastrophic regex, a C extension's loop) stops the
#: watchdog's thread too; faulthandler's own C thread then ends the process this long
#: after the give-up point (only where the caller handles a stuck episode: ``on_stuck``).
WATCHDOG_HARD_S = 10.0


class _Watchdog:
    """Stops an episode whose ``SIGALRM`` timer was disabled (``signal.alarm(0)``,
    ``SIG_IGN``, ``pthread_sigmask``): past the deadline plus a grace period it raises
    ``_Overrun`` in the episode's thread, repeatedly, and after ``WATCHDOG_GIVE_UP_S``
    calls ``on_stuck`` (when given) instead.

    It raises only while that thread runs inside ``region`` (the code object of the
    guarded call, e.g. ``_Episode.play``), so the runner's own bookkeeping after the
    episode never receives a raise meant for the episode; ``stop`` ends the watch and
    drops a raise not yet delivered."""

    def __init__(self, timeout_s: float, on_stuck: Callable[[], None] | None, region: Any = None) -> None:
        self.ident = threading.get_ident()
        self.deadline = time.monotonic() + timeout_s
        self.on_stuck = on_stuck
        self.region = region
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.raised = 0
        self.hard = on_stuck is not None
        if self.hard:  # process-wide, like the SIGALRM timer this runner already owns while it plays
            try:
                faulthandler.dump_traceback_later(timeout_s + WATCHDOG_GRACE_S + WATCHDOG_GIVE_UP_S + WATCHDOG_HARD_S,
                                                  exit=True, file=sys.__stderr__ or sys.stderr)
            except (AttributeError, OSError, RuntimeError, ValueError):  # no stderr with a descriptor
                self.hard = False
        self.thread = threading.Thread(target=self._watch, name="envh-episode-watchdog", daemon=True)
        self.thread.start()

    def _raise(self, exc: Any) -> None:
        _SET_ASYNC_EXC(ctypes.c_ulong(self.ident), exc)

    def _in_region(self) -> bool:
        frame = sys._current_frames().get(self.ident)
        while frame is not None:
            if self.region is None or frame.f_code is self.region:
                return True
            frame = frame.f_back
        return False

    def _watch(self) -> None:
        if self.stopped.wait(max(0.0, self.deadline - time.monotonic()) + WATCHDOG_GRACE_S):
            return
        give_up = time.monotonic() + WATCHDOG_GIVE_UP_S
        while True:
            with self.lock:
                if self.stopped.is_set():
                    return
                if self._in_region():
                    self._raise(ctypes.py_object(_Overrun))
                    self.raised += 1
            if self.stopped.wait(WATCHDOG_REPEAT_S):
                return
            if self.on_stuck is not None and time.monotonic() > give_up:
                with self.lock:
                    if self.stopped.is_set() or not self._in_region():
                        continue  # the episode is ending after all
                    self.stopped.set()
                    self._raise(ctypes.c_void_p(0))  # nothing more for the thread we give up on
                self.on_stuck()  # the hard stop stays armed: recording it must not hang either
                return

    def stop(self) -> None:
        with self.lock:
            if not self.stopped.is_set():
                self.stopped.set()
                if self.raised:
                    self._raise(ctypes.c_void_p(0))  # a raise not yet delivered is dropped
            if self.hard:
                self.hard = False
                faulthandler.cancel_dump_traceback_later()


class _NoWatch:
    def stop(self) -> None:
        pass


_interrupts = [0]  # real SIGINTs seen on the main thread while an episode ran


def _stop(watch: _Watchdog | _NoWatch) -> None:
    """Stop ``watch``; a raise it made just before, delivered in here, is absorbed (it
    raises only inside its region, which this thread has left, so no second one comes)."""
    try:
        watch.stop()
    except _Overrun:
        watch.stop()


def _in_finalizer(frame: Any) -> bool:
    """Whether ``frame`` runs inside a garbage-collector callback or a ``__del__``: Python
    drops an exception raised there ("Exception ignored in ..."), so a deadline must not
    be spent on it."""
    callbacks = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        if frame.f_code in callbacks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


@contextmanager
def _alarm(timeout_s: float | None, on_stuck: Callable[[], None] | None = None,
           region: Any = None) -> Iterator[_Watchdog | _NoWatch]:
    on_main = threading.current_thread() is threading.main_thread()
    if not on_main:
        yield _NoWatch()
        return
    previous_int = signal.getsignal(signal.SIGINT)

    def interrupted(signum: int, frame: Any) -> None:
        """Count a real SIGINT, then hand it to the handler that was there: Python's own
        raises KeyboardInterrupt (a person's, not plugin code's); a host's (an app, a
        launcher) does what it does, often clean up and then raise."""
        _interrupts[0] += 1
        previous_int(signum, frame)  # type: ignore[operator,misc]

    track = callable(previous_int)  # SIG_IGN / SIG_DFL: nothing of Python's runs, nothing to count
    if track:
        signal.signal(signal.SIGINT, interrupted)
    usable = bool(timeout_s) and hasattr(signal, "setitimer")

    def fire(_signum: int, frame: Any) -> None:
        if _in_finalizer(frame):  # raised there, it would be printed and dropped: again in 10 ms
            signal.setitimer(signal.ITIMER_REAL, 0.01)
            return
        raise _Deadline(f"the episode ran past its {timeout_s:g} s limit")

    previous_hook = sys.unraisablehook

    def unraisable(info: Any) -> None:
        """The deadline raised where Python drops exceptions and ``_in_finalizer`` cannot
        tell from the frame (a weakref callback, C-level finalizers): again in 10 ms."""
        if isinstance(info.exc_value, _Deadline):
            signal.setitimer(signal.ITIMER_REAL, 0.01)
            return
        previous_hook(info)

    # SIG_IGN first: a timer signal still pending from an earlier, blocked one is discarded
    previous = signal.signal(signal.SIGALRM, signal.SIG_IGN) if usable else None
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM}) if usable else None
    watch: _Watchdog | _NoWatch = _NoWatch()
    outer, started = (0.0, 0.0), time.monotonic()
    if usable:
        # started with the timer's signal blocked, the watchdog's thread inherits the block:
        # the kernel then hands the signal to this thread, where it interrupts a blocked call
        watch = _Watchdog(float(timeout_s), on_stuck, region)  # type: ignore[arg-type]
        signal.signal(signal.SIGALRM, fire)
        sys.unraisablehook = unraisable
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})  # an earlier episode may have blocked it
        outer = signal.setitimer(signal.ITIMER_REAL, float(timeout_s))  # type: ignore[arg-type]
    try:
        yield watch
    finally:
        _stop(watch)
        if usable:
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.unraisablehook = previous_hook
            signal.signal(signal.SIGALRM, signal.SIG_IGN)  # drops this timer's signal if the code blocked it
            signal.signal(signal.SIGALRM, previous)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # type: ignore[arg-type]
            if outer[0] > 0:  # a timer armed around this one (an outer limit, pytest-timeout) goes on
                signal.setitimer(signal.ITIMER_REAL, max(outer[0] - (time.monotonic() - started), 0.001), outer[1])
        if track:
            signal.signal(signal.SIGINT, previous_int)


def _deadline_message(exc: BaseException, timeout_s: float | None) -> str:
    if isinstance(exc, _Overrun):
        return (f"the episode ran past its {timeout_s or 0:g} s limit with its SIGALRM timer disabled, ignored or "
                "blocked by the code running; the runner's watchdog stopped it")
    return str(exc)


VERDICT_AFTER_DEADLINE_S = 3.0  # under the executors' 5 s grace past the limit


def _endpoint_stall(exc: BaseException, timeout_s: float | None) -> errors.EndpointError | None:
    """The endpoint failure a deadline stands for: it fired inside ``waiting_on`` while one
    request had gone unanswered for at least half the episode's limit; else ``None`` (the
    episode simply ran out of time)."""
    mark = getattr(exc, ENDPOINT_MARK, None)
    if not (isinstance(mark, tuple) and len(mark) == 2 and timeout_s):
        return None
    endpoint, waited = str(mark[0]), float(mark[1])
    if waited < 0.5 * timeout_s:
        return None
    failure = errors.EndpointError(
        f"The endpoint {endpoint} did not answer a request for {waited:.1f} s, until the episode's "
        f"{timeout_s:g} s limit ran out (a hung, paused or overloaded server); the episode can be re-played "
        "(--retry failed)", kind="deadline", endpoint=endpoint)
    failure.__cause__ = exc
    return failure


def classify(exc: BaseException) -> str:
    """The error class of an exception raised by env code (not by the policy)."""
    if isinstance(exc, errors.EpisodeError):
        return exc.error_class
    if isinstance(exc, (MemoryError, OSError)) and not isinstance(exc, errors.EnvhError):
        return "infra_error"
    return "env_error"  # ContractCodeError, ReplayError, SpecError, bridge bugs, SystemExit


def describe(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:  # noqa: BLE001 - a hostile __str__ must not escape either
        text = f"{type(exc).__name__}: (its message could not be read)"
    return _SURROGATE.sub("\ufffd", text[:4000])


def format_traceback(exc: BaseException) -> str:
    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except BaseException:  # noqa: BLE001
        text = describe(exc)
    return _SURROGATE.sub("\ufffd", text[-MAX_TRACEBACK:])


def _contained(exc: BaseException, started_interrupts: int) -> None:
    """Re-raise what must stop the run (the deadline, a person's Ctrl-C); contain the rest."""
    if isinstance(exc, _Deadline):
        raise exc
    if isinstance(exc, KeyboardInterrupt) and _interrupts[0] != started_interrupts:
        raise exc


def reached_base(proposed: Action, effects: list[dict[str, Any]]) -> tuple[Action | None, str | None]:
    """The action as it reached the base env, from layer effects (innermost first)."""
    current = proposed
    for effect in reversed(effects):
        if effect.get("action") == "blocked":
            return None, str(effect.get("reason", ""))
        if effect.get("action") == "answered":  # the layer answered it: it never went further in
            return None, f"answered by layer {effect.get('layer')!r}"
        if effect.get("action") == "rewritten" and isinstance(effect.get("sent"), dict):
            sent = effect["sent"]
            current = Action(tool=sent.get("tool", ""), args=dict(sent.get("args") or {}))
    return current, None


def base_observation(seen: Observation, effects: list[dict[str, Any]]) -> Observation | None:
    """The observation before the innermost layer changed it; ``None`` if none did."""
    for effect in effects:
        before = effect.get("observation_before")
        if isinstance(before, dict):
            data = before.get("data")
            obs = Observation(text=str(before.get("text", "")), data=dict(data) if isinstance(data, Mapping) else {})
            return None if obs == seen else obs
    return None


def invalid_observation(reason: str, tools: list[Any]) -> Observation:
    names = ", ".join(t.name for t in tools)
    return Observation(text=f"Error: your output is not a valid action ({reason}). "
                            f"Call exactly one of the tools: {names}.")


def checked_observation(obs: Any, where: str) -> Observation:
    if type(obs) is not Observation:
        raise errors.EnvError(f"{where} returned {type(obs).__name__} as its observation, not an Observation")
    if not isinstance(obs.text, str) or not isinstance(obs.data, Mapping):
        raise errors.EnvError(f"{where} returned an observation whose text is {type(obs.text).__name__} and "
                              f"data {type(obs.data).__name__} (expected str and dict)")
    if len(obs.text) > MAX_TEXT:
        raise errors.EnvError(f"{where} returned an observation of {len(obs.text)} characters, over the "
                              f"{MAX_TEXT} a trajectory records")
    return _encodable(obs)


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, Mapping):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_surrogates(v) for v in value]
    return value


def _encodable(obs: Observation) -> Observation:
    """``obs`` with lone UTF-16 surrogates (text a bridge decoded with ``surrogateescape``,
    say) replaced by U+FFFD: no request body, store or export file can hold them, so the
    policy is shown, and the trajectory records, the replaced text."""
    try:
        obs.text.encode("utf-8")
        json.dumps(thaw(obs.data), ensure_ascii=False, default=repr, allow_nan=False).encode("utf-8")
        return obs
    except UnicodeEncodeError:
        obs = attrs.evolve(obs, text=_SURROGATE.sub("\ufffd", obs.text), data=_without_surrogates(thaw(obs.data)))
        return _encodable(obs)
    except ValueError:  # NaN or an infinity: strict JSON (the store, Parquet, other readers) has none
        return attrs.evolve(obs, data=finite(thaw(obs.data)))


def checked_response(resp: Any) -> EnvResponse:
    """The env's answer, or ``EnvError`` saying what is wrong with it (a bridge bug)."""
    if not isinstance(resp, EnvResponse):
        raise errors.EnvError(f"step() returned {type(resp).__name__}, not an EnvResponse")
    reward = resp.reward
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real) or not math.isfinite(reward):
        raise errors.EnvError(f"step() returned reward={reward!r:.80}; a reward is a finite number")
    for name in ("terminated", "truncated"):
        if not isinstance(getattr(resp, name), bool):
            raise errors.EnvError(f"step() returned {name}={getattr(resp, name)!r:.80}; expected True or False")
    if not isinstance(resp.info, dict):
        raise errors.EnvError(f"step() returned info of type {type(resp.info).__name__}; expected a dict")
    obs = checked_observation(resp.observation, "step()")
    return resp if obs is resp.observation else attrs.evolve(resp, observation=obs)


def checked_tools(tools: Any) -> list[ToolSpec]:
    tools = list(tools)
    for tool in tools:
        if not isinstance(tool, ToolSpec):
            raise errors.EnvError(f"tools() returned {type(tool).__name__} among its tools, not a ToolSpec")
    return [_encodable_tool(t) for t in tools]


def _encodable_tool(tool: ToolSpec) -> ToolSpec:
    """``tool`` with lone surrogates replaced (see ``_encodable``): its schema is sent too."""
    try:
        json.dumps([tool.name, tool.description, thaw(tool.parameters)], ensure_ascii=False,
                   default=repr).encode("utf-8")
        return tool
    except UnicodeEncodeError:
        return attrs.evolve(tool, name=_SURROGATE.sub("\ufffd", tool.name),
                            description=_SURROGATE.sub("\ufffd", tool.description),
                            parameters=_without_surrogates(thaw(tool.parameters)))


def checked_verdict(verdict: Any, where: str = "evaluate()") -> EvaluationResult:
    if not isinstance(verdict, EvaluationResult):
        raise errors.EnvError(f"{where} returned {type(verdict).__name__}, not an EvaluationResult")
    if not isinstance(verdict.success, bool):
        raise errors.EnvError(f"{where} returned success={verdict.success!r:.80}; expected True or False")
    score = verdict.score
    if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
        raise errors.EnvError(f"{where} returned score={score!r:.80}; a score is a finite number")
    if type(score) not in (int, float):  # numpy and other Real types: stored as plain numbers
        verdict = attrs.evolve(verdict, score=float(score))
    return verdict


def checked_decision(decision: Any) -> PolicyStep:
    """The policy's decision, or ``PolicyError`` saying what is wrong with it."""
    if not isinstance(decision, PolicyStep):
        raise errors.PolicyError(f"act() returned {type(decision).__name__}, not PolicyStep")
    if decision.action is not None and type(decision.action) is not Action:
        raise errors.PolicyError(f"act() returned an action of type {type(decision.action).__name__}, "
                                 "not envh.Action")
    if decision.action is not None and (not isinstance(decision.action.tool, str)
                                        or not isinstance(decision.action.args, Mapping)):
        raise errors.PolicyError("act() returned an Action whose tool is not a str or whose args are not a mapping")
    if decision.action is not None and len(trajectory_json_size(decision.action.args)) > MAX_TEXT:
        raise errors.PolicyError(f"act() returned an action whose arguments exceed the {MAX_TEXT} characters a "
                                 "trajectory records")
    if decision.invalid is not None and not isinstance(decision.invalid, str):
        raise errors.PolicyError(f"act() returned invalid={type(decision.invalid).__name__}; expected a str")
    return decision


def checked_turn(turn: Any, known: set[str]) -> ModelTurn | None:
    """A policy's turn record, or ``PolicyError`` saying what is wrong with it: it must
    read back from the store as written (plain JSON of the declared types) and name only
    messages this episode's records hold, or the run's exports and ``envh show`` fail on
    it. ``known``: the addresses earlier turns stored (updated)."""
    if turn is None:
        return None
    if type(turn) is not ModelTurn:
        raise errors.PolicyError(f"act() returned a turn of type {type(turn).__name__}, not ModelTurn")
    try:
        turn_read_back(turn)
    except BaseException as exc:  # noqa: BLE001 - whatever the record holds, it is the policy's fault
        raise errors.PolicyError(f"act() returned a turn record that does not read back: {describe(exc)}") from exc
    here = known | set(turn.blobs)
    missing = [a for a in [*turn.messages, *([turn.tools] if turn.tools else [])] if a not in here]
    if missing:
        raise errors.PolicyError(f"act() returned a turn naming messages no record holds: {missing[:3]}")
    if any(not isinstance(turn.blobs[a], dict) for a in turn.messages if a in turn.blobs):
        raise errors.PolicyError("act() returned a turn whose messages are not JSON objects")
    known.update(turn.blobs)
    return turn


def clean_usage(usage: Any) -> tuple[dict[str, int], list[str]]:
    """Token counts a policy reported: non-negative integers by name; the rest is dropped
    and named (a malformed ``usage`` is the policy's problem, never the run's)."""
    if not isinstance(usage, dict):
        return {}, [f"usage is {type(usage).__name__}, not a dict"] if usage else []
    out, dropped = {}, []
    for name, n in list(usage.items())[:64]:
        if isinstance(name, str) and len(name) <= 100 and not isinstance(n, bool) and (
                isinstance(n, int) or (isinstance(n, float) and n.is_integer())) and 0 <= n < 2**53:
            out[name] = int(n)
        else:
            dropped.append(f"{str(name)[:40]!r}={type(n).__name__}")
    return out, dropped


def recorded_raw(raw: Any) -> Any:
    """The policy's raw output as plain JSON data, within the size a trajectory keeps."""
    try:
        data = jsonable(thaw(raw))  # frozen args (MappingProxyType) as plain data, not repr strings
        size = len(data) if isinstance(data, str) else len(trajectory_json_size(data))
    except BaseException as exc:  # noqa: BLE001 - a hostile object's repr or model_dump
        return f"<raw output could not be recorded: {describe(exc)}>"
    if size > MAX_TEXT:
        raise errors.PolicyError(f"the policy's raw output is {size} characters, over the {MAX_TEXT} a "
                                 "trajectory records")
    return data


def trajectory_json_size(data: Any) -> str:
    import json

    return json.dumps(data, ensure_ascii=False, default=repr)


class _Episode:
    """Mutable builder of one trajectory; ``play`` fills it step by step."""

    def __init__(self, request: EpisodeRequest, warm: Warm) -> None:
        self.req, self.warm = request, warm
        self.fields: dict[str, Any] = {
            "key": request.key, "run_id": request.run_id, "attempt": request.attempt,
            "spec_id": request.spec_id, "task": request.task, "seed": request.seed,
            "policy": request.policy, "worker": f"{socket.gethostname()}:{os.getpid()}",
            "started_at": time.time(), "stop": "error"}
        self.steps: list[StepRecord] = []
        self.addresses: set[str] = set()  # of the messages the turns recorded so far
        self.deadline = time.monotonic() + request.timeout_s if request.timeout_s else None
        self.done = False
        self.env: Any = None
        self.tap: BaseTap | None = None
        self.env_sound = False  # reset succeeded and no env call failed or was interrupted
        self.interrupts = _interrupts[0]

    def fail(self, error_class: str, message: str, exc: BaseException | None = None) -> None:
        if self.fields.get("error_class") is None:
            if error_class in ("policy_error", "env_error") and self.deadline is not None \
                    and time.monotonic() > self.deadline \
                    and not isinstance(exc, errors.EndpointError):  # the deadline turned into another exception
                error_class = "timeout"
                message = f"the episode ran past its {self.req.timeout_s:g} s limit; then {message}"
            self.fields.update(error_class=error_class, error=_SURROGATE.sub("\ufffd", message), stop="error")
            if exc is not None:
                self.fields.update(error_type=type(exc).__name__, error_traceback=format_traceback(exc),
                                   retryable=isinstance(exc, errors.EndpointError))

    def check_time(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _Deadline(f"the episode ran past its {self.req.timeout_s:g} s limit")

    def policy_failed(self, exc: BaseException, what: str) -> None:
        _contained(exc, self.interrupts)
        self.warm.drop_policy(self.req.policy, self.req.policy_options)
        self.fail("policy_error", f"{what}{describe(exc)}", exc)

    def env_failed(self, exc: BaseException, what: str = "") -> None:
        self.env_sound = False
        _contained(exc, self.interrupts)
        self.warm.drop_env(self.req.spec_id, self.req.trust, self.req.data)
        self.fail(classify(exc), f"{what}{describe(exc)}", exc)

    def play(self) -> None:
        req, warm, f = self.req, self.warm, self.fields
        try:
            f["versions"] = warm.versions
            policy = warm.policy(req.policy, req.policy_options)
            f["policy_id"] = str(policy.policy_id)[:500]
        except BaseException as exc:  # noqa: BLE001 - a policy that cannot be built is a policy error
            return self.policy_failed(exc, f"building policy {req.policy!r} failed: ")
        t0 = time.monotonic()
        try:
            self.env = env = warm.env(req.spec_id, req.spec, req.trust, req.data)
            self.tap = warm.tap(req.spec_id, env, req.trust, req.data)
            result = env.reset(task=req.task, seed=req.seed)
            audit = BaseTap.audit(env)
            obs = checked_observation(getattr(result, "observation", None), "reset()")
            tools = checked_tools(env.tools())
            tools_data = [jsonable(t) for t in tools]
            reset_effects = jsonable(result.info.get("envh", []))
        except BaseException as exc:  # noqa: BLE001 - build/reset failures end the episode as data
            return self.env_failed(exc)
        self.env_sound = True
        if audit:
            f["audit"] = audit
        f["reset_s"] = time.monotonic() - t0
        f["tools"] = tools_data
        f["initial_observation"] = obs
        f["reset_effects"] = reset_effects
        f["initial_base_observation"] = base_observation(obs, reset_effects)
        try:
            policy.start(task=req.task, tools=tools, observation=obs, seed=req.seed)
        except BaseException as exc:  # noqa: BLE001
            self.policy_failed(exc, "policy.start() failed: ")
            return self.take_verdict()
        for index in range(req.max_steps):
            self.check_time()
            t0 = time.monotonic()
            try:
                decision = checked_decision(policy.act(obs, tools))
                turn = checked_turn(decision.turn, self.addresses)
                raw = recorded_raw(decision.raw)
                usage, dropped = clean_usage(decision.usage)
                invalid = decision.invalid
            except BaseException as exc:  # noqa: BLE001 - the endpoint failed after its retries, etc.
                self.policy_failed(exc, "")
                return self.take_verdict()
            self.check_time()  # a policy that swallowed the deadline does not get its answer played
            policy_s = time.monotonic() - t0
            common = {"index": index, "raw": raw, "usage": usage, "policy_s": policy_s, "turn": turn}
            if decision.action is None:
                reason = (invalid or "unparseable output")[:2000]
                obs = invalid_observation(reason, tools)
                self.steps.append(StepRecord(
                    **common, invalid=reason, observation=obs,
                    error={"type": "invalid_output", "message": invalid or "",
                           **({"usage_dropped": dropped} if dropped else {})}))
                continue
            t0 = time.monotonic()
            try:
                self.env_sound = False  # until the step returns
                rewards = self.tap.begin_step() if self.tap is not None else None
                resp = checked_response(env.step(decision.action))
                effects = jsonable(resp.info.get("envh", []))
                error = resp.info.get("error")
                reward, outer = float(resp.reward), None
                if rewards is not None and self.tap is not None and self.tap.active:
                    base = BaseTap.base_reward(rewards)
                    if base != reward:
                        reward, outer = base, reward
                executed, blocked = reached_base(decision.action, effects)
                record = StepRecord(
                    **common, proposed=decision.action, executed=executed, blocked=blocked,
                    observation=resp.observation,
                    base_observation=base_observation(resp.observation, effects), reward=reward,
                    outer_reward=outer, terminated=resp.terminated, truncated=resp.truncated,
                    error=jsonable(error) if error else ({"type": "usage", "dropped": dropped} if dropped else None),
                    effects=effects, env_s=time.monotonic() - t0)
            except BaseException as exc:  # noqa: BLE001 - a broken env ends the episode as data
                return self.env_failed(exc)
            self.env_sound = True
            self.steps.append(record)
            self.check_time()  # nor an env step that swallowed it
            obs = resp.observation
            if resp.terminated or resp.truncated:
                f["stop"] = "terminated" if resp.terminated else "truncated"
                break
            try:
                tools = checked_tools(env.tools())
            except BaseException as exc:  # noqa: BLE001
                return self.env_failed(exc)
        else:
            f["stop"] = "max_steps"
        self.take_verdict()

    def take_verdict(self) -> None:
        """The base bridges' verdict, when the env is sound (also after a policy failure)."""
        if not self.env_sound or self.env is None:
            return
        t0 = time.monotonic()
        self.env_sound = False  # until evaluate() returns
        try:
            if self.tap is not None and self.tap.active:
                verdict, outer = self.tap.verdict(self.env, checked_verdict)
            else:
                verdict, outer = checked_verdict(self.env.evaluate()), None
        except BaseException as exc:  # noqa: BLE001
            self.env_failed(exc, "evaluate() failed: ")
            return
        self.env_sound = self.done = True
        self.fields["verdict"] = verdict
        if outer is not None:
            self.fields["outer_verdict"] = outer
        self.fields["evaluate_s"] = time.monotonic() - t0

    def trajectory(self, t_start: float) -> Trajectory:
        return Trajectory(**self.fields, steps=tuple(self.steps), duration_s=time.monotonic() - t_start)


def run_episode(request: EpisodeRequest, warm: Warm | None = None, *, registry: Any = None,
                abandon: Callable[[Trajectory], None] | None = None) -> Trajectory:
    """Play one episode. With ``warm`` the env and policy stay open for the next episode
    (reset in place); without it both are built from ``registry`` (default: the
    process-wide one) and closed before returning. Never raises for a failure of the
    env, the policy, the recording or the time limit (a person's Ctrl-C still stops it).

    ``abandon``: called from the watchdog's thread with the ``timeout`` trajectory when
    an episode on the main thread overran its limit and could not be stopped in-process;
    it is expected to end the process, which faulthandler does ``WATCHDOG_HARD_S`` later
    at the latest (without ``abandon`` the watchdog keeps raising the deadline until the
    episode ends, and nothing ends the process)."""
    t_start = time.monotonic()
    own = warm is None
    warm = warm or Warm(registry)
    episode = _Episode(request, warm)
    problems: list[str] = []

    def stuck() -> None:
        assert abandon is not None
        episode.fail("timeout", f"the episode ran past its {request.timeout_s or 0:g} s limit and could not be "
                                "stopped in this process (its timer was disabled and it did not yield to the "
                                "watchdog); the process was ended")
        abandon(recordable(episode.trajectory(t_start)))

    try:
        with _alarm(request.timeout_s, stuck if abandon is not None else None, _PLAY) as watch:
            try:
                episode.play()
            except _Deadline as exc:
                _stop(watch)
                if not episode.done:  # a timer firing after the verdict changes nothing
                    sound_policy_wait = episode.env_sound
                    warm.drop_policy(request.policy, request.policy_options)
                    failure = _endpoint_stall(exc, request.timeout_s)
                    if failure is not None:  # a hung endpoint: retryable, counted toward the run's stop
                        episode.fail("policy_error", describe(failure), failure)
                    else:
                        episode.fail("timeout", _deadline_message(exc, request.timeout_s), exc)
                    if not sound_policy_wait:
                        warm.drop_env(request.spec_id, request.trust, request.data)
                    elif failure is None:  # the policy overran, the env is sound: its verdict still counts
                        # (within the executors' grace, so a slow evaluate() does not get the worker killed)
                        _verdict_within(episode, VERDICT_AFTER_DEADLINE_S)
    except _Deadline as exc:  # the timer fired in the handler above
        if not episode.done:
            warm.drop_policy(request.policy, request.policy_options)
            episode.fail("timeout", _deadline_message(exc, request.timeout_s), exc)
        warm.drop_env(request.spec_id, request.trust, request.data)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the runner's own bookkeeping failed
        episode.fail("infra_error", f"the runner failed: {describe(exc)}", exc)
    finally:
        if own:
            try:
                problems = warm.close()
            except BaseException as exc:  # noqa: BLE001
                problems = [describe(exc)]
    if _interrupts[0] != episode.interrupts:
        # a person's Ctrl-C whose KeyboardInterrupt code in the episode swallowed (a close
        # that drops every exception, a hostile object's repr, a finalizer): it still stops the run
        raise KeyboardInterrupt
    if problems and episode.fields.get("error_class") is None:
        episode.fail("env_error", "; ".join(problems))
    return recordable(episode.trajectory(t_start))


_PLAY = _Episode.play.__code__  # the watchdog's region: raises land only inside an episode
_VERDICT = _Episode.take_verdict.__code__


def _verdict_within(episode: _Episode, seconds: float) -> None:
    try:
        with _alarm(seconds, region=_VERDICT):
            episode.take_verdict()
    except _Deadline:
        episode.warm.drop_env(episode.req.spec_id, episode.req.trust, episode.req.data)


def recordable(trajectory: Trajectory, failure: BaseException | None = None) -> Trajectory:
    """``trajectory`` if it serialises, else an ``infra_error`` trajectory saying why (a
    value the store cannot write must not take the run down). ``failure``: it is already
    known not to serialise, for this reason."""
    try:
        if failure is not None:
            raise failure
        trajectory_to_json(trajectory).encode("utf-8")  # the store and the exports write UTF-8
        return trajectory
    except BaseException as exc:  # noqa: BLE001
        t = trajectory
        return Trajectory(key=t.key, run_id=t.run_id, attempt=t.attempt, final=t.final, spec_id=t.spec_id,
                          task=t.task, seed=t.seed, policy=t.policy, policy_id=t.policy_id,
                          versions=t.versions, stop="error", error_class="infra_error",
                          error=f"the trajectory could not be recorded: {describe(exc)}",
                          error_type=type(exc).__name__, error_traceback=format_traceback(exc),
                          worker=t.worker, started_at=t.started_at, duration_s=t.duration_s)


def infra_failure(request: EpisodeRequest, message: str, *, final: bool, worker: str = "",
                  detail: str | None = None) -> Trajectory:
    """The trajectory of an attempt that died with its worker (recorded by executors);
    ``detail`` is what the worker last wrote (its traceback, when it had one)."""
    return Trajectory(key=request.key, run_id=request.run_id, attempt=request.attempt, final=final,
                      spec_id=request.spec_id, task=request.task, seed=request.seed,
                      policy=request.policy, stop="error", error_class="infra_error",
                      error=message, worker=worker, started_at=time.time(), retryable=True,
                      error_traceback=detail[-MAX_TRACEBACK:] if detail else None)


def next_attempt(request: EpisodeRequest) -> EpisodeRequest:
    return attrs.evolve(request, attempt=request.attempt + 1)
