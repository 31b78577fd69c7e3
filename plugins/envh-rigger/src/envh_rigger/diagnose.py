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


AXES = ("S0", "A", "O", "T", "R", "task_understanding")
DEFAULT_KINDS = {"invalid_action": "A", "unknown_tool": "A", "invalid_arguments": "A", "invalid_output": "A",
                 "blocked": "A", "tool_error": "T", "episode_over": "task_understanding"}


def _quote(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def claims(trajs: Sequence[Trajectory], kinds: dict[str, str]) -> list[dict[str, Any]]:
    """One claim per failed episode: its axis and the evidence (episode, step, quote).

    The first step the env answered with an error is classified by the bridge's error
    taxonomy (``Bridge.error_kinds``; kinds it does not list count as action errors);
    a failure without one ended by the policy's own stop is task understanding, one that
    ran out of steps is the start state's distance from the goal (S0).
    """
    out = []
    for t in trajs:
        if t.success:
            continue
        ev: dict[str, Any] = {"episode": t.key, "seed": t.seed}
        first = next((s for s in t.steps if s.error or s.proposed is None or s.blocked), None)
        if t.error_class:
            axis, claim = "task_understanding", f"the episode ended in an error ({t.error_class})"
            ev.update(step=len(t.steps), quote=_quote(t.error or ""))
        elif first is not None:
            kind = ("blocked" if first.blocked else "invalid_output" if first.proposed is None
                    else str((first.error or {}).get("type", "tool_error")))
            axis = kinds.get(kind, "A")
            claim = f"step {first.index}: the env refused the action ({kind})"
            ev.update(step=first.index, kind=kind, quote=_quote(first.observation.text))
        elif t.stop == "terminated":
            axis, claim = "task_understanding", "stopped without reaching the goal"
            last = t.steps[-1] if t.steps else None
            ev.update(step=last.index if last else 0, quote=_quote(last.observation.text if last else ""))
        else:
            axis, claim = "S0", f"ran out of steps ({t.stop}) without reaching the goal"
            last = t.steps[-1] if t.steps else None
            ev.update(step=last.index if last else 0, quote=_quote(last.observation.text if last else ""))
        out.append({"axis": axis, "claim": claim, "evidence": ev})
    return out


class StatsDiagnoser:
    """``--diagnoser stats``: the counting rules above, plus one claim per failed episode
    with its evidence, classified by the bridge's error kinds. Called by the loop through
    ``envh_diagnosers`` as ``diagnoser(trajs, stats, bridge=..., registry=..., kinds=...)``."""

    name = "stats"

    def __init__(self, arg: str | None = None, **options: Any) -> None:
        self.arg = arg

    def __call__(self, trajs: Sequence[Trajectory], stats: dict[str, Any] | None = None, *,
                 bridge: str | None = None, registry: Any = None,
                 kinds: dict[str, str] | None = None) -> dict[str, Any]:
        out = diagnose(trajs, stats)
        found = claims(trajs, {**DEFAULT_KINDS, **(kinds or {})})
        out["claims"] = found
        if found:
            counts: dict[str, int] = {}
            for c in found:
                counts[c["axis"]] = counts.get(c["axis"], 0) + 1
            out["axis_counts"] = counts
            top = max(counts, key=lambda a: counts[a])
            if out["failure_axis"] not in counts or counts[top] > counts[out["failure_axis"]]:
                out["summary"] += f" Evidence points to {top} ({counts[top]} of {len(found)} failures)."
                out["failure_axis"] = top
        return out
