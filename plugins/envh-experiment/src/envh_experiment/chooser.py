"""The curriculum arm's task choice: the curriculum kind's decisions over whole GRPO groups.

The ``curriculum`` component kind chooses a task at every reset, so each rollout of a
GRPO group would face another puzzle and the group's advantages would compare different
tasks. Here the same decision logic (``envh_adaptive.curriculum.Curriculum``: windows, floor and
ceiling, breaker, grace, bounded steps) picks one task per *group*: every rollout of the
group plays it, and each rollout's verdict enters the window. Anchored groups play a
training task (the base distribution) and join no window, as in the kind. A generated
task that is a held-out task is drawn again. Every group and decision is appended to
``curriculum.jsonl``; a resumed run rebuilds the state from it (records at or past the
resumed position are dropped, since those groups are played again).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import envh
from envh import errors
from envh_adaptive.curriculum import Curriculum, ParamBounds, plan_params

REDRAWS = 1000


class GroupCurriculum:
    """A GRPO task chooser (see ``GRPOTrainer``'s ``chooser``) driven by ``Curriculum``."""

    def __init__(self, spec: Any, options: Mapping[str, Any], *, training: Callable[[Any, int], tuple[int, Any]],
                 excluded: Callable[[Any], bool], audit: Path, seed: int) -> None:
        self.env = envh.make(spec)
        bridge = self.env.unwrapped
        declared_raw = getattr(bridge, "tunable_parameters", dict)()
        if not declared_raw or not hasattr(bridge, "task_for"):
            raise errors.SpecError(f"Bridge {getattr(bridge, 'name', '?')!r} declares no tunable parameters: a "
                                   "curriculum arm cannot adapt it")
        declared = {name: ParamBounds(name=name, **raw) for name, raw in declared_raw.items()}
        policy = dict(options.get("policy") or {"type": "threshold"})
        if policy.pop("type", "threshold") != "threshold":
            raise errors.SpecError("A curriculum arm uses the threshold policy (a coach runs per episode)")
        self.curriculum = Curriculum(plan_params(declared, dict(options["params"])), **policy)
        self.anchor = float(options.get("anchor", 0.1))
        self.training, self.excluded, self.seed = training, excluded, seed
        self.audit = audit
        self.pending: dict[int, dict[str, Any]] = {}

    def draw(self, sources: list[Any], position: int) -> tuple[int, Any]:
        rng = random.Random(f"{self.seed}:{position}")
        params = self.curriculum.begin_episode()
        anchored = rng.random() < self.anchor
        k, task = self.training(sources, position)
        if not anchored:
            for _ in range(REDRAWS):
                task = self.env.unwrapped.task_for(params, rng)
                if not self.excluded(task):
                    break
            else:
                raise errors.EnvError(f"The curriculum drew only held-out tasks at {params} ({REDRAWS} draws)")
        self.pending[position] = {"position": position, "params": params, "anchored": anchored, "task": str(task)}
        return k, task

    def record(self, position: int, successes: list[bool]) -> None:
        entry = self.pending.pop(position)
        decisions = self._apply(entry["anchored"], successes)
        self._append({"type": "group", **entry, "successes": [bool(s) for s in successes]})
        for d in decisions:
            self._append({"type": "decision", "position": position, **d})

    def _apply(self, anchored: bool, successes: list[bool]) -> list[dict[str, Any]]:
        out = []
        for s in successes:
            if anchored:
                self.curriculum.skip_episode()
                continue
            decision = self.curriculum.end_episode(bool(s))
            if decision is not None:
                out.append(decision)
        return out

    def rewind(self, position: int) -> None:
        """Rebuild the state of a run resumed at data ``position`` from the audit log."""
        if not self.audit.exists():
            return
        keep = []
        for line in self.audit.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # torn by a kill: that group is played again
                continue
            if row.get("position", 0) >= position:
                continue
            keep.append(line)
            if row.get("type") == "group":
                self.curriculum.begin_episode()
                self._apply(bool(row["anchored"]), list(row["successes"]))
        tmp = self.audit.with_suffix(".tmp")
        tmp.write_text("".join(x + "\n" for x in keep), encoding="utf-8")
        os.replace(tmp, self.audit)

    def _append(self, row: dict[str, Any]) -> None:
        self.audit.parent.mkdir(parents=True, exist_ok=True)
        with self.audit.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")

    def close(self) -> None:
        self.env.close()
