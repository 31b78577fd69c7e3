"""The offline inducer: memory items from the trajectory records alone, no model.

- Contrast (shortest success vs longest failure): action n-grams (n ≤ 3, in the
  schema-abstracted form of ``abstract_action``) that the success used and the failure
  never did become a "do this" item, with the winning plan spelled out.
- Failures: an action rejected (invalid, blocked or an env error) two or more times
  becomes an "avoid" item carrying the reason the env gave; an identical action repeated
  three or more times becomes a "don't loop" item.
- A single success: its plan, abstracted and concrete.
"""

from __future__ import annotations

from collections import Counter

import attrs
from envh import ToolSpec

from .induce import InductionCase, abstract_action, goal_summary, render_action, tool_index
from .records import EpisodeView, MemoryItem

MAX_NGRAM = 3
MIN_REJECTIONS = 2
MIN_REPEATS = 3


def _ngrams(seq: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(seq[i:i + n]) for i in range(len(seq) - n + 1)]


def _arrow(parts: tuple[str, ...] | list[str]) -> str:
    return " → ".join(parts)


def _trim(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@attrs.define
class RuleInducer:
    """Rule-based inducer; ``max_plan_steps`` caps how much of a plan an item quotes."""

    max_plan_steps: int = 12
    name: str = "rule"

    def induce(self, case: InductionCase) -> list[MemoryItem]:
        tools = tool_index(case.tools)
        prov = (case.provenance(self.name),)
        when = f"Tasks like: {goal_summary(case.goal)}"
        items: list[MemoryItem] = []
        if case.success is not None:
            items.extend(self._from_success(case, tools, when))
        if case.failure is not None:
            items.extend(self._pitfalls(case.failure, tools, when))
        return [attrs.evolve(it, provenance=prov) for it in items]

    def _plan(self, ep: EpisodeView) -> list[str]:
        return [render_action(s.action) for s in ep.steps if not s.rejected][: self.max_plan_steps]

    def _from_success(self, case: InductionCase, tools: dict[str, ToolSpec], when: str) -> list[MemoryItem]:
        win = case.success
        assert win is not None
        good = [abstract_action(s.action, tools) for s in win.steps if not s.rejected]
        plan = self._plan(win)
        if not good:
            return []
        plan_text = f"A plan that solved it in {len(win.steps)} step(s): {_arrow(plan)}."
        if case.failure is None:
            return [MemoryItem(
                title=f"A plan that worked: {_arrow(list(dict.fromkeys(good))[:4])}", when_to_use=when,
                content=f"{plan_text} In general terms: {_arrow(good[: self.max_plan_steps])}.")]
        lose = case.failure
        bad = [abstract_action(s.action, tools) for s in lose.steps if not s.rejected]
        bad_grams = {g for n in range(1, MAX_NGRAM + 1) for g in _ngrams(bad, n)}
        # Shortest first: a step the failure never took is the sharpest lesson; when every
        # step also occurs in the failure, the order (a bigram or trigram) made the difference.
        distinct = next((g for n in range(1, MAX_NGRAM + 1) for g in _ngrams(good, n)
                         if g not in bad_grams), None)
        contrast = (f"The failed attempt ({len(lose.steps)} step(s)) never did that; it went "
                    f"{_arrow(bad[:6]) or 'nowhere'}{' …' if len(bad) > 6 else ''}.")
        if distinct:
            return [MemoryItem(
                title=f"Do {_arrow(distinct)}", when_to_use=when,
                content=f"The successful run did {_arrow(distinct)}. {contrast} {plan_text}")]
        return [MemoryItem(
            title=f"Same moves, different arguments: {_arrow(list(dict.fromkeys(good))[:3])}",
            when_to_use=when,
            content=(f"Success and failure used the same kinds of actions; the arguments decided it. "
                     f"{plan_text} The failed run did {_arrow(self._plan(lose)[:6])}."))]

    def _pitfalls(self, lose: EpisodeView, tools: dict[str, ToolSpec], when: str) -> list[MemoryItem]:
        items: list[MemoryItem] = []
        rejected: dict[str, list[str]] = {}
        for step in lose.steps:
            if step.rejected:
                rejected.setdefault(abstract_action(step.action, tools), []).append(step.rejected)
        for shape, reasons in sorted(rejected.items(), key=lambda kv: -len(kv[1])):
            if len(reasons) < MIN_REJECTIONS:
                continue
            reason, _ = Counter(reasons).most_common(1)[0]
            items.append(MemoryItem(
                title=f"Avoid {shape}: it was rejected", when_to_use=when,
                content=(f"{shape} was rejected {len(reasons)} time(s) in a failed episode; the "
                         f"environment said: {_trim(reason)!r}. Read the tool's arguments and the "
                         "current state before retrying it.")))
        repeats = Counter(render_action(s.action) for s in lose.steps if s.action is not None)
        for call, count in repeats.most_common(2):
            if count >= MIN_REPEATS:
                items.append(MemoryItem(
                    title=f"Don't loop on {call}", when_to_use=when,
                    content=(f"A failed episode repeated {call} {count} times without progress. "
                             "When an action did not help, change the plan instead of repeating it.")))
        if not items and not lose.success and lose.steps:
            shapes = [abstract_action(s.action, tools) for s in lose.steps]
            items.append(MemoryItem(
                title=f"An approach that failed: {_arrow(list(dict.fromkeys(shapes))[:3])}", when_to_use=when,
                content=(f"This sequence ended in failure after {len(lose.steps)} step(s): "
                         f"{_arrow(self._plan(lose)[:8]) or _arrow(shapes[:8])}. Try a different "
                         "order or different arguments.")))
        return items

