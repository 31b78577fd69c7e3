"""``--diagnoser llm:MODEL``: a model reads the stats diagnoser's claims and sampled
trajectories and names the failure axis with its reason (a forced ``explain`` call).

The stats claims (axis, episode, step, quote) stay in the diagnosis as the evidence the
model's answer is checked against; a malformed answer after the retries falls back to
the stats diagnosis and says so. Endpoint: ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .diagnose import StatsDiagnoser
from .episodes import render, sample


class LLMDiagnoser:
    name = "llm"

    def __init__(self, arg: str | None = None, **options: Any) -> None:
        from .designers.llm import LLMDesigner

        self.stats = StatsDiagnoser()
        self.llm = LLMDesigner(arg, **options)

    def __call__(self, trajs: Sequence[Any], stats: dict[str, Any] | None = None, *, bridge: str | None = None,
                 registry: Any = None, kinds: dict[str, str] | None = None) -> dict[str, Any]:
        from .designers.llm import EXPLAIN, Malformed

        base = self.stats(trajs, stats, bridge=bridge, registry=registry, kinds=kinds)
        claims = base.get("claims", [])[:12]
        shown = "\n\n".join(render(t) for t in sample(list(trajs))) or "(none)"
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You diagnose why a policy fails an environment. Axes: S0 (start "
             "state), A (actions), O (observations), T (transitions), R (reward), task_understanding. "
             "Name the axis the evidence supports and say why, citing episodes and steps."},
            {"role": "user", "content": f"Bridge {bridge!r}. Statistics: {json.dumps(base.get('evidence', {}))}\n"
             f"Claims per failed episode (axis, evidence): {json.dumps(claims)}\n\nTrajectories:\n{shown}"}]
        try:
            why = self.llm._call(messages, EXPLAIN, self.llm._check_explain)
        except Malformed as exc:
            return {**base, "summary": base["summary"] + f" (the model's diagnosis was malformed: {exc})"}
        return {**base, "failure_axis": why["failure_axis"], "summary": why["rationale"],
                "model": self.llm.model, "stats_axis": base["failure_axis"]}

    def close(self) -> None:
        self.llm.close()
