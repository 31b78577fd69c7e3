"""OfficeQA's verdict: the benchmark's answer-matching rules, plus EM and token F1.

``score_answer(gold, predicted, tolerance)`` is the benchmark's own ``score_answer``
under both main-branch versions of ``reward.py`` that circulate (``qa_reward``: bracketed
lists; ``qa_reward_prose``: the prose guard): 1 only when each of them gives 1, since
which one is current cannot be pinned. The last ``<FINAL_ANSWER>`` is graded, it must be
a direct answer of the gold answer's shape, numbers are read with thousands commas only
removed and compared as the *base* number written (``543 million`` and ``543`` agree;
``543000000`` does not), within ``tolerance`` (relative; 0 = exact).

``strict=True`` grades with the benchmark first, then closes the ways a wrong answer
still passes its rules: text must appear as whole words ('no' is not in 'not known';
'March' is not in 'arc'), an answer that names both 'yes' and 'no' is hedged, a number whose scale word differs from the gold's
('543 billion' for '543 million') does not match, and an answer carrying numbers that
fit no gold number (besides years and the same value rescaled by a scale word) is a
guess list ('12 to 13', '1 2 3 ... 100'), not an answer. ``strict=False`` is the
benchmark's behaviour.

``exact_match`` and ``token_f1`` are the paper's EM/F1 metrics over normalised text
(lower case, punctuation and articles dropped, SQuAD style).
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Callable

import attrs

from . import qa_reward, qa_reward_prose

_NUMBER = re.compile(r"-?\d+\.?\d*%?")
_UNIT_WORDS = ("trillions", "trillion", "billions", "billion", "millions", "million", "thousands",
               "thousand", "hundreds", "hundred", "percentage", "percent")
_UNITS = ((re.compile(r"\btrillions?\b"), "trillion"),
          (re.compile(r"\bbillions?\b|\bb\b"), "billion"),
          (re.compile(r"\bmillions?\b|\bm\b"), "million"),
          (re.compile(r"\bthousands?\b|\bk\b"), "thousand"))
CONTEXT_CHARS = 20
TOLERANCES = (0.0, 0.01, 0.05)


@attrs.frozen(kw_only=True)
class Match:
    """One comparison: ``correct`` and the reason in a line (never shown to the policy)."""

    correct: bool
    rationale: str


def _normalise(text: str) -> str:
    return text.replace("\u2212", "-")


def final_answer(text: str) -> str:
    """The content of the last ``<FINAL_ANSWER>...</FINAL_ANSWER>`` ('' when those tags
    are empty), else the whole text — the benchmark grades the last one."""
    return qa_reward.final_answer(text)


def numbers_with_context(text: str) -> list[tuple[float, str]]:
    """Each number in ``text`` with the lower-cased text around it (for unit words); read
    as the benchmark reads them (only thousands commas removed: ``23,82`` is 23 and 82)."""
    flat = qa_reward.number_text(text)
    out = []
    for m in _NUMBER.finditer(flat):
        raw = m.group().rstrip("%")
        if raw in ("", "-"):
            continue
        context = flat[max(0, m.start() - CONTEXT_CHARS): m.end() + CONTEXT_CHARS].lower()
        out.append((float(raw), context))
    return out


def unit_of(context: str) -> str | None:
    """The scale word near a number (trillion, billion, million, thousand), if any."""
    return next((name for pattern, name in _UNITS if pattern.search(context)), None)


def _year_like(value: float) -> bool:
    return 1900 <= value <= 2100 and value == int(value)


def significant_text(text: str) -> str:
    """``text`` without numbers, unit words and punctuation ('' if under 2 characters)."""
    cleaned = _NUMBER.sub("", _normalise(text).lower()).replace(",", "")
    for word in _UNIT_WORDS:
        cleaned = re.sub(rf"\b{word}\b", "", cleaned)
    cleaned = re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", cleaned)).strip()
    return cleaned if len(cleaned) >= 2 else ""


def _contains_words(haystack: str, needle: str) -> bool:
    """``needle`` inside ``haystack`` on word boundaries."""
    return bool(needle) and re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", haystack) is not None


def _text_overlaps(gold: str, predicted: str, strict: bool = False) -> bool:
    g, p = significant_text(gold), significant_text(predicted)
    if not g:
        return True
    if strict:
        return bool(p) and (_contains_words(p, g) or _contains_words(g, p))
    return bool(p) and (g in p or p in g)


_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_YES_NO = re.compile(r"(?<!\w)(yes|no)(?!\w)")


_UNIT_AFTER = re.compile(r"\s*(?:\$\s*)?(trillion|billion|million|thousand|bn|mn|[bmk])s?(?!\w)", re.IGNORECASE)
_UNIT_ABBR = {"bn": "billion", "b": "billion", "mn": "million", "m": "million", "k": "thousand"}


def numbers_with_units(text: str) -> list[tuple[float, str | None]]:
    """Each number in ``text`` with the scale word written right after it, if any."""
    flat = qa_reward.number_text(text)
    out = []
    for m in _NUMBER.finditer(flat):
        raw = m.group().rstrip("%")
        if raw in ("", "-"):
            continue
        after = _UNIT_AFTER.match(flat, m.end())
        unit = after.group(1).lower() if after else None
        out.append((float(raw), _UNIT_ABBR.get(unit, unit) if unit else None))
    return out


def _same_unit(gold_unit: str | None, pred_unit: str | None) -> bool:
    return gold_unit is None or pred_unit is None or gold_unit == pred_unit


def _explained(p: float, gold: list[float], tolerance: float) -> bool:
    """A predicted number that restates a gold number (as is, as a fraction of a percent,
    or rescaled by a scale word: 543 million = 543,000,000)."""
    tolerance = max(tolerance, 1e-9)  # 5.2 / 100 is 0.052000000000000005
    for g in gold:
        if _close(g, p, tolerance) or _close(g / 100, p, tolerance):
            return True
        if any(_close(g * f, p, tolerance) or _close(g, p * f, tolerance) for f in _SCALES.values()):
            return True
    return False


def _guess_list(gold_nums: list[tuple[float, str]], pred_nums: list[tuple[float, str]],
                tolerance: float) -> bool:
    """True when the prediction carries a number that fits no gold number (years aside
    unless the gold answer has years): several candidates offered, one of them graded."""
    keep_years = any(_year_like(g) for g, _ in gold_nums)
    golds = [g for g, _ in gold_nums]
    return any(not _explained(p, golds, tolerance) for p, _ in pred_nums
               if keep_years or not _year_like(p))


def _close(gold: float, pred: float, tolerance: float) -> bool:
    if gold == 0:
        return pred == 0
    return abs(gold - pred) / abs(gold) <= tolerance


# the two main-branch versions of the benchmark's reward.py (README "Grading fidelity")
BENCHMARK_VERSIONS: dict[str, Callable[[str, str, float], qa_reward.Verdict]] = {
    "lists": qa_reward.grade, "prose": qa_reward_prose.grade}


def benchmark_scores(gold: str, predicted: str, tolerance: float = 0.0) -> dict[str, float]:
    """Each benchmark version's ``score_answer`` (1.0 or 0.0), by version name."""
    return {name: 1.0 if grade(gold, predicted, tolerance).correct else 0.0
            for name, grade in BENCHMARK_VERSIONS.items()}


def benchmark(gold: str, predicted: str, tolerance: float = 0.0) -> Match:
    """The benchmark's verdict: correct only when every version passes the answer."""
    verdicts = {name: grade(gold, predicted, tolerance) for name, grade in BENCHMARK_VERSIONS.items()}
    refused = {name: v for name, v in verdicts.items() if not v.correct}
    if refused:
        return Match(correct=False, rationale="; ".join(f"{name}: {v.rationale}" for name, v in refused.items()))
    return Match(correct=True, rationale=verdicts["lists"].rationale)


def match(gold: str, predicted: str, tolerance: float = 0.0, strict: bool = False) -> Match:
    """Compare a prediction (the last ``<FINAL_ANSWER>`` graded) with the gold answer: the
    benchmark's verdict, and with ``strict`` also envh's tighter rules (module docstring)."""
    if not 0 <= tolerance <= 1:
        raise ValueError(f"tolerance must be within [0, 1], got {tolerance}")
    if not gold or not gold.strip():
        raise ValueError("the gold answer is empty")
    bench = benchmark(gold, predicted or "", tolerance)
    if not strict or not bench.correct:
        return Match(correct=bench.correct, rationale=bench.rationale)
    return _tightened(gold, final_answer(predicted or ""), tolerance)


def _tightened(gold: str, predicted: str, tolerance: float, strict: bool = True) -> Match:
    """envh's tighter rules, applied to an answer the benchmark accepts."""
    if not predicted.strip():
        return Match(correct=False, rationale="empty answer")
    gold_nums, pred_nums = numbers_with_context(gold), numbers_with_context(predicted)
    if gold_nums and pred_nums:
        overlap = _text_overlaps(gold, predicted, strict)
        gold_units = [u for _, u in numbers_with_units(gold)]
        pred_units = [u for _, u in numbers_with_units(predicted)]
        if strict and _guess_list(gold_nums, pred_nums, tolerance):
            return Match(correct=False, rationale="several different numbers given")
        if len(gold_nums) > 1:
            keep_years = any(_year_like(g) for g, _ in gold_nums)
            candidates = [p for p, _ in pred_nums if keep_years or not _year_like(p)]
            cand = [(p, u) for (p, _), u in zip(pred_nums, pred_units) if p in candidates]
            missing = [g for (g, _), gu in zip(gold_nums, gold_units)
                       if not (overlap and any(_close(g, p, tolerance) and (not strict or _same_unit(gu, u))
                                               for p, u in cand))]
            if missing:
                return Match(correct=False, rationale=f"list: {len(gold_nums) - len(missing)}/"
                                                      f"{len(gold_nums)} numbers matched")
            return Match(correct=True, rationale=f"list: all {len(gold_nums)} numbers matched")
        g = gold_nums[0][0]
        filter_years = not (_year_like(g) or significant_text(gold))
        for (p, _), unit in zip(pred_nums, pred_units):
            if filter_years and _year_like(p):
                continue
            if strict and not _same_unit(gold_units[0], unit):
                continue
            if _close(g, p, tolerance) and overlap:
                return Match(correct=True, rationale=f"number within {tolerance:.0%}")
        return Match(correct=False, rationale="no predicted number matched")
    g_text = re.sub(r"\([^)]*\)", "", gold.strip().lower().strip("\"'")).strip()
    p_text = re.sub(r"\([^)]*\)", "", predicted.strip().lower().strip("\"'")).strip()
    if strict:
        if _YES_NO.fullmatch(g_text) and len(set(_YES_NO.findall(p_text))) > 1:
            return Match(correct=False, rationale="both yes and no given")
        if _contains_words(p_text, g_text):
            return Match(correct=True, rationale="text match")
        return Match(correct=False, rationale="text mismatch")
    if g_text and g_text in p_text:
        return Match(correct=True, rationale="text match")
    return Match(correct=False, rationale="text mismatch")


def score_answer(gold: str, predicted: str, tolerance: float = 0.0, strict: bool = False) -> float:
    """1.0 when ``predicted`` matches ``gold`` under the benchmark's rules (tightened by
    ``strict``), else 0.0."""
    return 1.0 if match(gold, predicted, tolerance, strict).correct else 0.0


def normalise_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(gold: str, predicted: str) -> float:
    return float(normalise_answer(gold) == normalise_answer(final_answer(predicted)))


def token_f1(gold: str, predicted: str) -> float:
    g, p = normalise_answer(gold).split(), normalise_answer(final_answer(predicted)).split()
    if not g or not p:
        return float(g == p)
    common = sum((collections.Counter(g) & collections.Counter(p)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)
