"""What the loop reads from trajectories: batch statistics and compact renderings.

Statistics feed targets and diagnoses; renderings (actions written as tool calls,
observations trimmed) feed the designers' prompts.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from envh.rollout import Trajectory

from .stats import mean_interval, wilson


def steps_of(t: Trajectory) -> int:
    """Decisions the policy made (replayed stage actions are not counted)."""
    return len(t.steps)


def candidate_acted(t: Trajectory, layer_ids: set[str]) -> bool:
    """Whether any of ``layer_ids`` blocked, rewrote, overrode or masked in ``t``."""
    for step in t.steps:
        for e in step.effects:
            if e.get("layer") in layer_ids and (e.get("action") in ("blocked", "rewritten")
                                                or e.get("transition") or e.get("observation")):
                return True
    return False


def summarize(trajs: Sequence[Trajectory]) -> dict[str, Any]:
    """Success rate (Wilson 95 % interval), mean steps (t 95 % interval), how episodes ended,
    error types."""
    n = len(trajs)
    wins = sum(t.success for t in trajs)
    steps = [steps_of(t) for t in trajs]
    errors: Counter[str] = Counter()
    blocked = invalid = rewritten = rewritten_wins = 0
    for t in trajs:
        changed = 0
        for s in t.steps:
            if s.error:
                errors[str(s.error.get("type", "error"))] += 1
            blocked += s.blocked is not None
            invalid += s.proposed is None
            changed += any(e.get("action") == "rewritten" for e in s.effects)
        rewritten += changed
        rewritten_wins += bool(t.success and changed)
    win_steps = [steps_of(t) for t in trajs if t.success]
    usage: Counter[str] = Counter()
    for t in trajs:
        usage.update(t.usage)
    return {
        "n": n, "successes": wins, "success_rate": wins / n if n else 0.0,
        "interval": list(wilson(wins, n)),
        "steps_interval": list(mean_interval(steps)) if n > 1 else [None, None],
        "mean_steps": sum(steps) / n if n else 0.0,
        "mean_steps_success": sum(win_steps) / len(win_steps) if win_steps else None,
        "stops": dict(Counter(t.stop for t in trajs)),
        "error_classes": dict(Counter(t.error_class for t in trajs if t.error_class)),
        "step_errors": dict(errors), "blocked_steps": blocked, "invalid_steps": invalid,
        # actions a layer replaced (guide, auto-stop): a win with one was partly played by the harness
        "rewritten_steps": rewritten, "wins_with_rewrites": rewritten_wins,
        "policy_tokens": sum(usage.values()),
    }


def render_action(tool: str, args: dict[str, Any]) -> str:
    inner = ", ".join(f"{k}={json.dumps(v)}" for k, v in args.items())
    return f"{tool}({inner})"


def render(t: Trajectory, *, max_steps: int = 12, obs_chars: int = 240) -> str:
    """One trajectory as text: start observation, then action → observation lines."""
    def trim(text: str) -> str:
        text = " ".join(text.split())
        return text if len(text) <= obs_chars else text[: obs_chars - 3] + "..."

    verdict = "SUCCESS" if t.success else f"FAILURE ({t.stop}{', ' + t.error_class if t.error_class else ''})"
    lines = [f"[{verdict}, {steps_of(t)} steps, seed {t.seed}]"]
    if t.initial_observation is not None:
        lines.append(f"start: {trim(t.initial_observation.text)}")
    shown = t.steps if len(t.steps) <= max_steps else (*t.steps[: max_steps // 2], None,
                                                       *t.steps[-max_steps // 2:])
    for s in shown:
        if s is None:
            lines.append(f"... {len(t.steps) - max_steps} steps omitted ...")
            continue
        if s.proposed is None:
            act = f"<invalid output: {s.invalid}>"
        else:
            act = render_action(s.proposed.tool, dict(s.proposed.args))
            if s.blocked is not None:
                act += f" [BLOCKED: {s.blocked}]"
        lines.append(f"{s.index}. {act} -> {trim(s.observation.text)}")
    if t.error:
        lines.append(f"error: {trim(t.error)}")
    return "\n".join(lines)


def sample(trajs: Sequence[Trajectory], *, wins: int = 2, losses: int = 2) -> list[Trajectory]:
    """Shortest successes and longest failures first: the pairs that show the difference."""
    good = sorted((t for t in trajs if t.success), key=steps_of)[:wins]
    bad = sorted((t for t in trajs if not t.success), key=steps_of, reverse=True)[:losses]
    return [*good, *bad]
