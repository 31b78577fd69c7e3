"""OfficeQA's verdict under the other main-branch ``reward.py``: the prose guard.

Two copies of the benchmark's main-branch ``reward.py`` circulate and disagree
(README "Grading fidelity"). ``qa_reward`` ports the one with bracketed numeric lists;
this module ports the other, which differs in three rules:

1. The direct-answer guard counts every number in the prediction (no incidental years
   dropped, no comma segmentation of a bracketed list), and for a purely numeric gold
   answer refuses any prose left after numbers and unit words go (``5 dollars``,
   ``about 5``, ``the answer is 5``); it has no separate markup check (``<b>5</b>`` is
   refused as prose ``b b``).
2. Thousands commas are removed from any ``\\d{1,3}(,\\d{3})+`` run, with no look-around
   (``1.234,567`` reads 1.234567; ``23,820`` inside ``123,820`` is one group either way).
3. ``fuzzy_match_answer`` has no bracketed-list path: a gold list is matched in any order.

Everything else (tag extraction, accounting negatives, currency signs, units, years,
text overlap, the text path) is the same code, shared with ``qa_reward``.
"""

from __future__ import annotations

import re

from . import qa_reward
from .qa_reward import Numbers, Verdict

_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_NUMBER = re.compile(r"-?\d+\.?\d*%?")


def numbers(text: str) -> Numbers:
    """Each number with the lower-cased text within 20 characters of it, read with this
    version's thousands rule."""
    flat = qa_reward._numeric_formatting(qa_reward.normalise_text(text))
    flat = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), flat)
    out = []
    for m in _NUMBER.finditer(flat):
        raw = m.group().rstrip("%")
        if raw in ("", "-"):
            continue
        context = flat[max(0, m.start() - qa_reward.CONTEXT_CHARS): m.end() + qa_reward.CONTEXT_CHARS].lower()
        out.append((float(raw), context))
    return out


def direct_answer(gold: str, predicted: str) -> Verdict:
    """This version's guard: one line, at most 250 characters, exactly the gold answer's
    count of numbers and, for a purely numeric gold answer, no prose."""
    predicted = predicted.strip()
    if not predicted:
        return Verdict(correct=False, rationale="empty answer")
    if len([line for line in predicted.splitlines() if line.strip()]) > 1:
        return Verdict(correct=False, rationale="the answer spans several lines")
    if len(predicted) > qa_reward.MAX_DIRECT_CHARS:
        return Verdict(correct=False, rationale="the answer is too long to be a direct answer")
    if not gold:
        raise ValueError("the gold answer is empty")
    gold_nums, pred_nums = numbers(gold), numbers(predicted)
    if gold_nums:
        if len(pred_nums) != len(gold_nums):
            return Verdict(correct=False, rationale="not exactly the expected count of numbers")
        prose = qa_reward.significant_text(predicted)
        if not qa_reward.significant_text(gold) and prose:
            return Verdict(correct=False, rationale=f"prose around the answer value ({prose[:40]!r})")
        return Verdict(correct=True, rationale="direct answer")
    if pred_nums:
        return Verdict(correct=False, rationale="numbers given for a text answer")
    if qa_reward._direct_text(gold) != qa_reward._direct_text(predicted):
        return Verdict(correct=False, rationale="text differs from the expected text")
    return Verdict(correct=True, rationale="direct answer")


def fuzzy_match(gold: str, predicted: str, tolerance: float = 0.0) -> Verdict:
    """This version's ``fuzzy_match_answer``: ``qa_reward``'s without the bracketed-list path."""
    if not gold:
        raise ValueError("the gold answer is empty")
    if not predicted:
        return Verdict(correct=False, rationale="empty answer")
    if not 0 <= tolerance <= 1:
        raise ValueError(f"tolerance must be within [0, 1], got {tolerance}")
    if "unable to determine" in predicted.lower():
        return Verdict(correct=False, rationale="'unable to determine'")
    gold_nums, pred_nums = numbers(gold), numbers(predicted)
    if gold_nums and pred_nums:
        if len(gold_nums) > 1:
            return qa_reward._match_list(gold, gold_nums, pred_nums, predicted, tolerance)
        return qa_reward._match_single(gold, gold_nums, pred_nums, predicted, tolerance)
    if qa_reward._direct_text(gold) in qa_reward._direct_text(predicted):
        return Verdict(correct=True, rationale="text match")
    return Verdict(correct=False, rationale="text mismatch")


def grade(gold: str, predicted: str, tolerance: float = 0.0) -> Verdict:
    """This version's ``score_answer`` with its reason: last tag, guard, fuzzy match."""
    answer = qa_reward.final_answer(predicted)
    try:
        guard = direct_answer(gold, answer)
        return fuzzy_match(gold, answer, tolerance) if guard.correct else guard
    except ValueError as exc:  # the benchmark scores any error as 0
        return Verdict(correct=False, rationale=f"not gradable: {exc}")


def score_answer(gold: str, predicted: str, tolerance: float = 0.0) -> float:
    """1.0 or 0.0 exactly as this version's ``score_answer(gold, predicted, tolerance)``."""
    return 1.0 if grade(gold, predicted, tolerance).correct else 0.0
