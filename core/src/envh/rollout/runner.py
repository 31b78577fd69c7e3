"""The episode runner: one (env spec, task, seed, policy) → one ``Trajectory``.

Every executor runs this same function. Nothing escapes it: a failure becomes the
trajectory's ``error_class`` (``policy_error``, ``env_error``, ``infra_error``,
``timeout``) with its message, and the verifier's verdict is taken whenever the env is
still sound. Unparseable policy output is an invalid step (the policy is told, the
episode goes on). The per-episode time limit is a ``SIGALRM`` timer where the runner owns
the main thread (it interrupts a blocked LLM call or a runaway bridge), and a check
between steps elsewhere.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from .. import errors
from ..types import Action, Observation
from .policy import PolicyStep
from .trajectory import EpisodeRequest, StepRecord, Trajectory, jsonable
from .warm import Warm


class _Deadline(BaseException):
    """Raised at the episode deadline; a BaseException so that ``except Exception`` in
    bridges, policies and the contract sandbox cannot swallow it."""


@contextmanager
def _alarm(timeout_s: float | None) -> Iterator[None]:
    usable = (timeout_s and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def fire(_signum: int, _frame: Any) -> None:
        raise _Deadline(f"the episode ran past its {timeout_s:g} s limit")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, float(timeout_s))  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def classify(exc: BaseException) -> str:
    """The error class of an exception raised by env code (not by the policy)."""
    if isinstance(exc, errors.EpisodeError):
        return exc.error_class
    if isinstance(exc, (MemoryError, OSError)) and not isinstance(exc, errors.EnvhError):
        return "infra_error"
    return "env_error"  # ContractCodeError, ReplayError, SpecError, bridge bugs


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:4000]


def reached_base(proposed: Action, effects: list[dict[str, Any]]) -> tuple[Action | None, str | None]:
    """The action as it reached the base env, from layer effects (innermost first)."""
    current = proposed
    for effect in reversed(effects):
        if effect.get("action") == "blocked":
            return None, str(effect.get("reason", ""))
        if effect.get("action") == "rewritten" and isinstance(effect.get("sent"), dict):
            sent = effect["sent"]
            current = Action(tool=sent.get("tool", ""), args=dict(sent.get("args") or {}))
    return current, None


def base_observation(seen: Observation, effects: list[dict[str, Any]]) -> Observation | None:
    """The observation before the innermost layer changed it; ``None`` if none did."""
    for effect in effects:
        before = effect.get("observation_before")
        if isinstance(before, dict):
            obs = Observation(text=str(before.get("text", "")), data=dict(before.get("data") or {}))
            return None if obs == seen else obs
    return None


def invalid_observation(reason: str, tools: list[Any]) -> Observation:
    names = ", ".join(t.name for t in tools)
    return Observation(text=f"Error: your output is not a valid action ({reason}). "
                            f"Call exactly one of the tools: {names}.")


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
        self.deadline = time.monotonic() + request.timeout_s if request.timeout_s else None
        self.done = False

    def fail(self, error_class: str, message: str) -> None:
        if self.fields.get("error_class") is None:
            self.fields.update(error_class=error_class, error=message, stop="error")

    def check_time(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _Deadline(f"the episode ran past its {self.req.timeout_s:g} s limit")

    def play(self) -> None:
        req, warm, f = self.req, self.warm, self.fields
        f["versions"] = warm.versions
        try:
            policy = warm.policy(req.policy, req.policy_options)
        except Exception as exc:  # noqa: BLE001 - a policy that cannot be built is a policy error
            return self.fail("policy_error", f"building policy {req.policy!r} failed: {describe(exc)}")
        f["policy_id"] = policy.policy_id
        t0 = time.monotonic()
        try:
            env = warm.env(req.spec_id, req.spec)
            result = env.reset(task=req.task, seed=req.seed)
            tools = env.tools()
        except Exception as exc:  # noqa: BLE001 - build/reset failures end the episode as data
            warm.drop_env(req.spec_id)
            return self.fail(classify(exc), describe(exc))
        f["reset_s"] = time.monotonic() - t0
        obs = result.observation
        f["tools"] = [jsonable(t) for t in tools]
        f["initial_observation"] = obs
        f["reset_effects"] = jsonable(result.info.get("envh", []))
        f["initial_base_observation"] = base_observation(obs, f["reset_effects"])
        try:
            policy.start(task=req.task, tools=tools, observation=obs, seed=req.seed)
        except Exception as exc:  # noqa: BLE001
            warm.drop_policy(req.policy, req.policy_options)
            return self.fail("policy_error", f"policy.start() failed: {describe(exc)}")
        for index in range(req.max_steps):
            self.check_time()
            t0 = time.monotonic()
            try:
                decision = policy.act(obs, tools)
                if not isinstance(decision, PolicyStep):
                    raise errors.PolicyError(f"act() returned {type(decision).__name__}, not PolicyStep")
            except Exception as exc:  # noqa: BLE001 - the endpoint failed after its retries, etc.
                warm.drop_policy(req.policy, req.policy_options)
                return self.fail("policy_error", describe(exc))
            policy_s = time.monotonic() - t0
            common = {"index": index, "raw": jsonable(decision.raw), "usage": dict(decision.usage),
                      "policy_s": policy_s, "turn": decision.turn}
            if decision.action is None:
                obs = invalid_observation(decision.invalid or "unparseable output", tools)
                self.steps.append(StepRecord(
                    **common, invalid=decision.invalid or "unparseable output", observation=obs,
                    error={"type": "invalid_output", "message": decision.invalid or ""}))
                continue
            t0 = time.monotonic()
            try:
                resp = env.step(decision.action)
            except Exception as exc:  # noqa: BLE001 - a broken env ends the episode as data
                warm.drop_env(req.spec_id)
                return self.fail(classify(exc), describe(exc))
            effects = jsonable(resp.info.get("envh", []))
            executed, blocked = reached_base(decision.action, effects)
            error = resp.info.get("error")
            self.steps.append(StepRecord(
                **common, proposed=decision.action, executed=executed, blocked=blocked,
                observation=resp.observation, base_observation=base_observation(resp.observation, effects),
                reward=float(resp.reward), terminated=resp.terminated, truncated=resp.truncated,
                error=jsonable(error) if error else None, effects=effects, env_s=time.monotonic() - t0))
            obs = resp.observation
            if resp.terminated or resp.truncated:
                f["stop"] = "terminated" if resp.terminated else "truncated"
                break
            try:
                tools = env.tools()
            except Exception as exc:  # noqa: BLE001
                warm.drop_env(req.spec_id)
                return self.fail(classify(exc), describe(exc))
        else:
            f["stop"] = "max_steps"
        t0 = time.monotonic()
        try:
            f["verdict"] = env.evaluate()
        except Exception as exc:  # noqa: BLE001
            warm.drop_env(req.spec_id)
            return self.fail(classify(exc), f"evaluate() failed: {describe(exc)}")
        f["evaluate_s"] = time.monotonic() - t0
        self.done = True

    def trajectory(self, t_start: float) -> Trajectory:
        return Trajectory(**self.fields, steps=tuple(self.steps), duration_s=time.monotonic() - t_start)


def run_episode(request: EpisodeRequest, warm: Warm | None = None, *, registry: Any = None) -> Trajectory:
    """Play one episode. With ``warm`` the env and policy stay open for the next episode
    (reset in place); without it both are built from ``registry`` (default: the
    process-wide one) and closed before returning. Never raises for a failure of the
    env, the policy or the time limit."""
    t_start = time.monotonic()
    own = warm is None
    warm = warm or Warm(registry)
    episode = _Episode(request, warm)
    try:
        with _alarm(request.timeout_s):
            episode.play()
    except _Deadline as exc:
        if not episode.done:  # a timer firing after the verdict changes nothing
            warm.drop_env(request.spec_id)
            warm.drop_policy(request.policy, request.policy_options)
            episode.fail("timeout", str(exc))
    finally:
        problems = warm.close() if own else []
    if problems and episode.fields.get("error_class") is None:
        episode.fail("env_error", "; ".join(problems))
    return episode.trajectory(t_start)


def infra_failure(request: EpisodeRequest, message: str, *, final: bool, worker: str = "") -> Trajectory:
    """The trajectory of an attempt that died with its worker (recorded by executors)."""
    return Trajectory(key=request.key, run_id=request.run_id, attempt=request.attempt, final=final,
                      spec_id=request.spec_id, task=request.task, seed=request.seed,
                      policy=request.policy, stop="error", error_class="infra_error",
                      error=message, worker=worker, started_at=time.time())


def next_attempt(request: EpisodeRequest) -> EpisodeRequest:
    return attrs.evolve(request, attempt=request.attempt + 1)
