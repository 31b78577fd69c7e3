"""OfficeQA's verdict: the benchmark's answer-matching rules, plus EM and token F1.

``score_answer(gold, predicted, tolerance)`` follows the semantics of the benchmark's
``reward.py``: the answer inside ``<FINAL_ANSWER>`` tags if present; numbers are read
with their surrounding text (commas dropped, Unicode minus normalised, ``%`` kept), and
compared as the *base* number written (``543 million`` and ``543`` agree; ``543000000``
does not); a single gold number needs one predicted number within ``tolerance``
(relative; 0 = exact), a list of gold numbers needs every one matched; year-like numbers
in the prediction are ignored unless the gold answer is a year or has text; when the gold
answer has words besides numbers and units ("March 1977") those words must overlap too;
a gold answer without numbers is a case-insensitive text match (parentheticals dropped).

``exact_match`` and ``token_f1`` are the paper's EM/F1 metrics over normalised text
(lower case, punctuation and articles dropped, SQuAD style).
"""

from __future__ import annotations

import collections
import re
import string

import attrs

_NUMBER = re.compile(r"-?\d+\.?\d*%?")
_FINAL = re.compile(r"<FINAL_ANSWER>\s*(.*?)\s*</FINAL_ANSWER>", re.DOTALL | re.IGNORECASE)
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
    """The content of ``<FINAL_ANSWER>...</FINAL_ANSWER>`` ('' when the tags are empty),
    else the whole text."""
    found = _FINAL.search(text or "")
    return found.group(1).strip() if found else (text or "")


def numbers_with_context(text: str) -> list[tuple[float, str]]:
    """Each number in ``text`` with the lower-cased text around it (for unit words)."""
    flat = _normalise(text).replace(",", "")
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


def _text_overlaps(gold: str, predicted: str) -> bool:
    g, p = significant_text(gold), significant_text(predicted)
    if not g:
        return True
    return bool(p) and (g in p or p in g)


def _close(gold: float, pred: float, tolerance: float) -> bool:
    if gold == 0:
        return pred == 0
    return abs(gold - pred) / abs(gold) <= tolerance


def match(gold: str, predicted: str, tolerance: float = 0.0) -> Match:
    """Compare a prediction (``<FINAL_ANSWER>`` honoured) with the gold answer."""
    if not 0 <= tolerance <= 1:
        raise ValueError(f"tolerance must be within [0, 1], got {tolerance}")
    if not gold or not gold.strip():
        raise ValueError("the gold answer is empty")
    predicted = final_answer(predicted or "")
    if not predicted.strip():
        return Match(correct=False, rationale="empty answer")
    gold_nums, pred_nums = numbers_with_context(gold), numbers_with_context(predicted)
    if gold_nums and pred_nums:
        overlap = _text_overlaps(gold, predicted)
        if len(gold_nums) > 1:
            keep_years = any(_year_like(g) for g, _ in gold_nums)
            candidates = [p for p, _ in pred_nums if keep_years or not _year_like(p)]
            missing = [g for g, _ in gold_nums
                       if not (overlap and any(_close(g, p, tolerance) for p in candidates))]
            if missing:
                return Match(correct=False, rationale=f"list: {len(gold_nums) - len(missing)}/"
                                                      f"{len(gold_nums)} numbers matched")
            return Match(correct=True, rationale=f"list: all {len(gold_nums)} numbers matched")
        g = gold_nums[0][0]
        filter_years = not (_year_like(g) or significant_text(gold))
        for p, _ in pred_nums:
            if filter_years and _year_like(p):
                continue
            if _close(g, p, tolerance) and overlap:
                return Match(correct=True, rationale=f"number within {tolerance:.0%}")
        return Match(correct=False, rationale="no predicted number matched")
    g_text = re.sub(r"\([^)]*\)", "", gold.strip().lower().strip("\"'")).strip()
    p_text = re.sub(r"\([^)]*\)", "", predicted.strip().lower().strip("\"'")).strip()
    if g_text and g_text in p_text:
        return Match(correct=True, rationale="text match")
    return Match(correct=False, rationale="text mismatch")


def score_answer(gold: str, predicted: str, tolerance: float = 0.0) -> float:
    """1.0 when ``predicted`` matches ``gold`` under the benchmark's rules, else 0.0."""
    return 1.0 if match(gold, predicted, tolerance).correct else 0.0


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
