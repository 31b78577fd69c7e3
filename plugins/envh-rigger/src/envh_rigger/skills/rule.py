"""The offline inducer: memory items from the trajectory records alone, no model.

- Contrast (shortest success vs longest failure): action n-grams (n ≤ 3, in the
  schema-abstracted form of ``abstract_action``) that the success used and the failure
  never did become a "do this" item, with the winning plan spelled out.
- Failures: calls of one tool rejected (invalid, blocked or an env error) two or more
  times for the same reason become an "avoid" item carrying that reason; an identical
  action repeated three or more times becomes a "don't loop" item.
- A single success: its plan, abstracted and concrete.
"""

from __future__ import annotations

import re
from collections import Counter

import attrs
from envh import ToolSpec

from .induce import InductionCase, abstract_action, goal_summary, render_action, tool_index
from .records import EpisodeView, MemoryItem, StepView

MAX_NGRAM = 3
MIN_REJECTIONS = 2
MIN_REPEATS = 3
_DIGITS = re.compile(r"\d+")


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
        # Group rejections by tool and by the env's reason with numbers masked: the lesson
        # is "calls like this fail because ...", whatever the numbers were this time.
        rejected: dict[tuple[str, str], list[StepView]] = {}
        for step in lose.steps:
            if step.rejected:
                tool = step.action.tool if step.action is not None else "<unparsable output>"
                rejected.setdefault((tool, _DIGITS.sub("N", _trim(step.rejected, 120))), []).append(step)
        for (tool, reason), steps in sorted(rejected.items(), key=lambda kv: -len(kv[1])):
            if len(steps) < MIN_REJECTIONS:
                continue
            name = f"{tool}()" if steps[0].action is not None else tool
            items.append(MemoryItem(
                title=f"Avoid invalid {name}: {_trim(reason, 70)}", when_to_use=when,
                content=(f"{len(steps)} {name} call(s) were rejected in a failed episode, e.g. "
                         f"{render_action(steps[0].action)}; the environment said: "
                         f"{_trim(steps[0].rejected or '')!r}. Check the tool's arguments against the "
                         "current state before calling it.")))
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

