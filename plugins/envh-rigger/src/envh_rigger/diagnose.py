"""The ``stats`` diagnoser: a failure axis and the slack of the winning runs, from counts.

Axes follow the design: S0 (start state), A (actions), O (observations), T (transitions),
R (reward), task_understanding. The rules are deliberately plain; the LLM designer adds
its own diagnosis through ``explain`` on top of this evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envh.rollout import Trajectory

from .episodes import summarize


def diagnose(trajs: Sequence[Trajectory], stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"failure_axis", "summary", "evidence"}`` for a batch of rollouts."""
    s = stats or summarize(trajs)
    n, sr = s["n"], s["success_rate"]
    total_steps = max(1, sum(len(t.steps) for t in trajs))
    invalid = (s["invalid_steps"] + sum(v for k, v in s["step_errors"].items()
                                        if k in ("invalid_arguments", "unknown_tool", "invalid_action")))
    evidence = {"success_rate": sr, "invalid_share": invalid / total_steps,
                "blocked_share": s["blocked_steps"] / total_steps, "stops": s["stops"],
                "error_classes": s["error_classes"], "mean_steps": s["mean_steps"],
                "mean_steps_success": s["mean_steps_success"]}
    if n == 0:
        return {"failure_axis": "task_understanding", "summary": "no rollouts", "evidence": evidence}
    if sr >= 1.0:
        slack = s["mean_steps_success"]
        return {"failure_axis": "none", "evidence": evidence,
                "summary": f"always succeeds (mean {slack:.1f} steps): add pressure where the "
                           "winning runs have slack"}
    if s["error_classes"] and sum(s["error_classes"].values()) >= n / 2:
        return {"failure_axis": "task_understanding", "evidence": evidence,
                "summary": f"episodes end in errors {s['error_classes']}: the policy or env breaks"}
    if evidence["blocked_share"] > 0.3:
        return {"failure_axis": "A", "evidence": evidence,
                "summary": f"{evidence['blocked_share']:.0%} of actions blocked: a rule is too strict, loosen it"}
    if evidence["invalid_share"] > 0.3:
        return {"failure_axis": "A", "evidence": evidence,
                "summary": f"{evidence['invalid_share']:.0%} of actions invalid: the policy misuses the tools"}
    ended_early = s["stops"].get("terminated", 0)
    if ended_early >= (n - s["successes"]) and sr < 1:
        return {"failure_axis": "task_understanding", "evidence": evidence,
                "summary": f"success {sr:.0%}; failures finish without reaching the goal: the policy "
                           "stops or errs before solving; a closer start state (S0) scaffolds it"}
    return {"failure_axis": "S0", "evidence": evidence,
            "summary": f"success {sr:.0%}; failures run out of steps ({s['stops']}): the goal is too "
                       "far from the start state"}


class StatsDiagnoser:
    """``--diagnoser stats``: the counting rules above, called by the loop through
    ``envh_diagnosers`` as ``diagnoser(trajs, stats, bridge=..., registry=...)``."""

    name = "stats"

    def __init__(self, arg: str | None = None, **options: Any) -> None:
        self.arg = arg

    def __call__(self, trajs: Sequence[Trajectory], stats: dict[str, Any] | None = None, *,
                 bridge: str | None = None, registry: Any = None) -> dict[str, Any]:
        return diagnose(trajs, stats)
