"""What to induce from: grouping episodes per task into induction cases, the inducer
protocol, and rendering actions through the tools' JSON Schemas.

ReasoningBank's strongest signal is the paired difference: for each task, the shortest
success against the longest failure. A task with only successes (or only failures)
still teaches something, from its shortest success (or longest failure) alone.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

import attrs
from envh import Action, ToolSpec

from .records import EpisodeView, MemoryItem, Provenance, SkillError


@attrs.frozen(kw_only=True)
class InductionCase:
    """One task's evidence: ``method`` is ``contrast``, ``success`` or ``failure``."""

    task: str
    method: str
    success: EpisodeView | None = None
    failure: EpisodeView | None = None

    @property
    def episodes(self) -> tuple[EpisodeView, ...]:
        return tuple(e for e in (self.success, self.failure) if e is not None)

    @property
    def goal(self) -> str:
        return self.episodes[0].goal

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return next((e.tools for e in self.episodes if e.tools), ())

    def provenance(self, inducer: str) -> Provenance:
        first = self.episodes[0]
        return Provenance(source=first.source, method=self.method, inducer=inducer, task=self.task,
                          spec_id=first.spec_id, trajectories=tuple(e.trajectory_id for e in self.episodes))


@runtime_checkable
class Inducer(Protocol):
    """Writes memory items for one case. ``name`` goes into each item's provenance."""

    @property
    def name(self) -> str: ...

    def induce(self, case: InductionCase) -> list[MemoryItem]:
        """Zero or more items; never raises for bad evidence (an empty list instead)."""


def cases_from(episodes: Iterable[EpisodeView]) -> list[InductionCase]:
    """Group episodes by task (and env source) into cases, in first-seen order.

    Shortest success = fewest steps (ties: first seen); longest failure = most steps.
    """
    groups: dict[tuple[str, str], list[EpisodeView]] = defaultdict(list)
    for ep in episodes:
        groups[(ep.source, ep.task)].append(ep)
    cases = []
    for (_, task), eps in groups.items():
        wins = [e for e in eps if e.success]
        losses = [e for e in eps if not e.success]
        win = min(wins, key=lambda e: len(e.steps)) if wins else None
        loss = max(losses, key=lambda e: len(e.steps)) if losses else None
        method = "contrast" if win and loss else "success" if win else "failure"
        cases.append(InductionCase(task=task, method=method, success=win, failure=loss))
    return cases


def induce_all(episodes: Iterable[EpisodeView], inducer: Inducer) -> list[MemoryItem]:
    """Every case's items, in case order (not yet deduplicated)."""
    return [item for case in cases_from(episodes) for item in inducer.induce(case)]


def _fmt_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)


def render_action(action: Action | None) -> str:
    """``combine(i=0, j=1, op="mul")``: an action as a call, args in the tool's order."""
    if action is None:
        return "<unparsable output>"
    return f"{action.tool}({', '.join(f'{k}={_fmt_value(v)}' for k, v in action.args.items())})"


_WORD = re.compile(r"[A-Za-z_][A-Za-z_-]*")


def abstract_action(action: Action | None, tools: dict[str, ToolSpec]) -> str:
    """The task-independent shape of an action, decided by the tool's JSON Schema.

    Categorical arguments (``enum``, booleans) are kept: they name a choice that
    transfers across tasks (``combine(op="mul")``). Free text keeps its leading verb
    (``do(command="open …")``). Numbers and ids are dropped: they only make sense in
    one task's state.
    """
    if action is None:
        return "<unparsable output>"
    props = tools[action.tool].parameters.get("properties", {}) if action.tool in tools else {}
    kept = []
    for key, value in action.args.items():
        schema = props.get(key, {}) if isinstance(props, dict) else {}
        if "enum" in schema or isinstance(value, bool):
            kept.append(f"{key}={_fmt_value(value)}")
        elif isinstance(value, str) and (word := _WORD.search(value)):
            kept.append(f'{key}="{word.group(0).lower()} …"')
    return f"{action.tool}({', '.join(kept)})"


def tool_index(tools: Iterable[ToolSpec]) -> dict[str, ToolSpec]:
    return {t.name: t for t in tools}


def goal_summary(goal: str, limit: int = 160) -> str:
    """The first non-empty line(s) of a goal, cut at ``limit`` characters."""
    text = " ".join(line.strip() for line in goal.splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def make_inducer(spec: str = "rule", **options: Any) -> Inducer:
    """``rule`` (offline, from the records alone) or ``llm:MODEL`` (OpenAI-compatible)."""
    kind, _, arg = spec.partition(":")
    if kind == "rule" and not arg:
        from .rule import RuleInducer

        return RuleInducer(**{k: v for k, v in options.items() if k in ("max_plan_steps",)})
    if kind == "llm" and arg:
        from .llm import LLMInducer

        return LLMInducer(arg, **{k: v for k, v in options.items()
                                  if k in ("base_url", "api_key_env", "max_retries", "temperature", "json_mode")})
    raise SkillError(f"Unknown inducer {spec!r}. Choose one of: rule, llm:MODEL")
