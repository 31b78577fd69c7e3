"""Curriculum: adapt a bridge's tunable parameters between episodes (``envh_adaptive.curriculum``).

At each reset the layer records the finished episode's verdict (the base verifiers', read
through ``evaluate``), lets the ``Curriculum`` decide at window boundaries, then starts the
next episode on a task the bridge makes for the current parameter values — or, for an
``anchor`` fraction of episodes, on the task it was asked for (the base distribution);
those are logged but join no window, since they say nothing about the current values.
Parameters never change mid-episode. Every episode and decision is appended to the audit
log (JSONL) and shown in ``info["envh"]``; the log is also how a resumed run restores the
curriculum. The layer's randomness comes from its own ``seed``, never from the env's.

An evaluation run must not adapt its task set: the kind is registered ``training_only`` (the
runner refuses a spec holding it unless the run trains), and the layer refuses to build
unless the spec says ``training: true``.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
from envh import ActionableEnv, BuildContext, EnvHarness, LayerSpec, ResetResult, TaskRef, errors

from ..coach import Coach
from ..curriculum import Curriculum, ParamBounds, plan_params

_COMMON = {"window", "floor", "ceiling", "breaker"}
POLICY_OPTIONS = {"threshold": frozenset(_COMMON | {"early", "grace"}),
                  "coach": frozenset(_COMMON | {"code", "time_limit_ms"})}


@attrs.frozen(kw_only=True)
class CurriculumSpec(LayerSpec):
    """``params``: name → ``{range: [lo, hi], init, step}`` (1–5 of the bridge's tunable
    parameters); ``policy``: ``{type: threshold, window, floor, ceiling, breaker, early, grace}`` or
    ``{type: coach, code, time_limit_ms, window, floor, ceiling, breaker}`` (``envh_adaptive.coach``);
    ``anchor``: fraction of episodes on the requested task; ``adaptive: false`` freezes
    parameters at their safe defaults; ``audit``: JSONL path; ``training`` must be true."""

    kind: Literal["curriculum"] = "curriculum"
    params: dict[str, dict[str, Any]]
    policy: dict[str, Any] = attrs.field(factory=lambda: {"type": "threshold"})
    anchor: float = attrs.field(default=0.1, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)])
    adaptive: bool = True
    training: bool = False
    audit: str | None = None
    seed: int = 0


class CurriculumLayer(EnvHarness):
    """Chooses each episode's task from the curriculum; passes steps through untouched."""

    kind = "curriculum"

    def __init__(self, inner: ActionableEnv, spec: CurriculumSpec, *, layer_id: str | None = None) -> None:
        super().__init__(inner, layer_id=layer_id)
        bridge = inner.unwrapped
        declared_raw: dict[str, dict[str, Any]] = getattr(bridge, "tunable_parameters", dict)()
        if not declared_raw:
            raise errors.SpecError(f"Bridge {getattr(bridge, 'name', type(bridge).__name__)!r} declares no tunable "
                                   "parameters, so a curriculum cannot adapt it.")
        declared = {name: ParamBounds(name=name, **raw) for name, raw in declared_raw.items()}
        policy = dict(spec.policy)
        kind = policy.pop("type", "threshold")
        if kind not in POLICY_OPTIONS:
            raise errors.UnknownNameError("curriculum policy type", str(kind), list(POLICY_OPTIONS))
        unknown = set(policy) - POLICY_OPTIONS[kind]
        if unknown:
            raise errors.SpecError(f"Unknown curriculum policy options {sorted(unknown)} for type {kind!r}; "
                                   f"choose from {', '.join(sorted(POLICY_OPTIONS[kind]))}")
        self.spec = spec
        plans = plan_params(declared, spec.params)
        code, limit_ms = policy.pop("code", None), policy.pop("time_limit_ms", 250.0)
        self.curriculum = Curriculum(plans, adaptive=spec.adaptive, **policy)
        self.audit = Path(spec.audit) if spec.audit else None
        self.current: dict[str, Any] | None = None  # the episode in progress: params, task, anchored
        if kind == "coach":
            if type(code) is not str:
                raise errors.SpecError("A coach curriculum policy needs 'code': source defining coach(stats)")
            if type(limit_ms) not in (int, float):
                raise errors.SpecError(f"Coach time_limit_ms must be a number, got {limit_ms!r}")
            self.curriculum.coach = Coach(code, time_limit=limit_ms / 1000)  # checked and loaded in the jail
        self._audit_file: Any = None
        try:
            if self.audit is not None:
                self._audit_file = _open_audit(self.audit)
                self._resume()
        except BaseException:
            self._release()
            raise

    # -- audit ------------------------------------------------------------------------
    def _log(self, record: dict[str, Any]) -> None:
        f = self._audit_file
        if f is None:
            return
        try:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        except OSError as exc:
            raise errors.EnvError(f"Cannot append to the curriculum audit log {self.audit}: {exc}") from exc

    def _release(self) -> None:
        f, self._audit_file = self._audit_file, None
        if f is not None:
            f.close()  # and its lock with it
        if self.curriculum.coach is not None:
            self.curriculum.coach.close()

    def _resume(self) -> None:
        assert self.audit is not None and self._audit_file is not None
        records = []
        try:
            text = self.audit.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise errors.StateError(f"{self.audit} is not UTF-8 text ({exc.reason} at byte {exc.start}); the audit "
                                    "log is damaged") from None
        if text and not text.endswith("\n"):  # a line torn by a kill: drop it, that episode is played again
            keep = text.rfind("\n") + 1
            self._audit_file.truncate(len(text[:keep].encode("utf-8")))
            text = text[:keep]
        lines = text.splitlines()
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                raise errors.StateError(f"{self.audit}:{n} is not JSON; the audit log is damaged") from None
        for decision in self.curriculum.replay(records):  # due, but the kill came first
            self._log({"type": "decision", **decision})

    # -- episode boundary -------------------------------------------------------------
    def _finish_episode(self) -> None:
        if self.current is None:
            return
        done, self.current = self.current, None
        try:
            success = bool(self.inner.evaluate().success)
        except errors.EnvhError:
            success = False
        self._log({"type": "episode", "episode": self.curriculum.episodes + 1, "success": success, **done})
        if done.get("anchored"):  # a base-distribution task says nothing about the current values
            self.curriculum.skip_episode()
            return
        decision = self.curriculum.end_episode(success)
        if decision is not None:
            self._log({"type": "decision", **decision})

    def reset(self, *, task: TaskRef | None = None, seed: int | None = None,
              options: Any = None) -> ResetResult:
        self._finish_episode()
        index = self.curriculum.episodes
        rng = random.Random(f"{self.spec.seed}:{index}")  # the curriculum's own randomness
        params = self.curriculum.begin_episode()  # the kill switch, read at every boundary
        anchored = rng.random() < self.spec.anchor
        chosen = task if anchored else self.inner.unwrapped.task_for(params, rng)  # type: ignore[attr-defined]
        result = super().reset(task=chosen, seed=seed, options=options)
        self.current = {"params": params, "anchored": anchored, "task": None if chosen is None else str(chosen)}
        info = dict(result.info)
        effects = list(info.get("envh", ()))
        if effects:
            effects[-1] = {**effects[-1], "params": params, "anchored": anchored,
                           "task": self.current["task"]}
        info["envh"] = effects
        info["curriculum"] = {"params": params, "anchored": anchored, "episode": index + 1}
        return ResetResult(observation=result.observation, info=info)

    def close(self) -> None:
        try:
            self._finish_episode()
        finally:
            try:
                self._release()
            finally:
                super().close()

    def layer_state(self) -> Any:
        return {"curriculum": self.curriculum.state(), "current": self.current}

    def from_state(self, state: Mapping[str, Any]) -> Any:
        self._restorable(state.get("data") if isinstance(state, Mapping) else None)  # before the inner env moves
        return super().from_state(state)

    def load_layer_state(self, data: Any) -> None:
        self.curriculum.load(self._restorable(data))
        self.current = data.get("current")

    def _restorable(self, data: Any) -> Mapping[str, Any]:
        saved = data.get("curriculum") if isinstance(data, Mapping) else None
        if not isinstance(saved, Mapping):
            raise errors.StateError("Saved curriculum layer state has no 'curriculum' object")
        if self.audit is not None and saved.get("episodes") != self.curriculum.episodes:
            raise errors.StateError(  # the log is append-only: a second 'episode 4' makes the run unresumable
                f"Restoring a curriculum state of episode {saved.get('episodes')!r} would rewind or skip the "
                f"append-only audit log {self.audit}, which is at episode {self.curriculum.episodes}. Restore "
                "within the episode it was saved in, or into a curriculum without an audit log.")
        current = data.get("current")
        params = current.get("params") if isinstance(current, Mapping) else None
        plans = self.curriculum.plans
        if current is not None and not (isinstance(params, Mapping) and set(params) == set(plans) and all(
                type(v) is int and plans[n].low <= v <= plans[n].high for n, v in params.items())):
            raise errors.StateError(f"Saved curriculum episode {current!r} does not run with values of the plan")
        return saved


def _open_audit(path: Path) -> Any:
    """The audit log opened for appending and locked for this layer's life: a second live
    curriculum on the same log (another pool worker, another run) would interleave two
    streams of episodes that no replay could reproduce."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the layer's life
    except OSError as exc:
        raise errors.StateError(
            f"Cannot open the curriculum audit log {path} for appending: {exc}. Under envh run's user isolation "
            "workers run as an unprivileged user: give them a writable directory or use --isolation namespace.") from exc
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise errors.StateError(
            f"The curriculum audit log {path} is in use by another live curriculum (another worker or run). A "
            "curriculum adapts one stream of episodes: run it in one worker (--workers 1), or give each its "
            "own audit path.") from None
    return f


def build(spec: CurriculumSpec, inner: ActionableEnv, ctx: BuildContext) -> CurriculumLayer:
    if not spec.training:
        raise errors.CurriculumEvaluationError(
            "A curriculum layer adapts the task distribution, so it must not stand between a policy and a "
            "fixed evaluation set. For a training run set `training: true` on the layer; evaluate on a spec "
            "without it.")
    return CurriculumLayer(inner, spec, layer_id=spec.id or f"{ctx.index}:curriculum")
