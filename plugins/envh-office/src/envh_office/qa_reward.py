"""OfficeQA's own verdict: a port of the benchmark's ``reward.py`` ``score_answer``.

Ported from ``reward.py`` of github.com/databricks/officeqa at its main branch, in the
version with ``extract_final_answer_from_xml``, ``_is_direct_answer_only`` and the
bracketed numeric lists ("lists"). Another main-branch version circulates ("prose",
``qa_reward_prose``); the benchmark score needs both (``qa_scoring.benchmark``). Its
rules, in the order it applies them:

1. The LAST ``<FINAL_ANSWER>...</FINAL_ANSWER>`` is graded (no tags: the whole text).
2. The answer must be direct: one non-empty line, at most 250 characters, exactly as many
   numbers as the gold answer (years dropped as below; a bracketed gold list may also be
   met by a comma segmentation of the prediction), no ``<markup>``; a text gold answer
   needs the same text (case, quotes, parentheticals and spacing aside).
3. Numbers are read after ``\\u2212`` becomes ``-``, ``(1,234)`` / ``($5)`` become
   negatives, currency symbols go, and commas are removed only inside a valid thousands
   group (``1,234,567``; not ``23,82`` nor ``44.00,231.52``).
4. Then the fuzzy match: a bracketed gold list is matched in order; other lists need
   every gold number; a single number needs one prediction within ``tolerance``
   (relative), with unit words compatible and any gold words overlapping.

The changes, both for time, not verdicts: the last tag is found by a linear walk instead
of the benchmark's super-linear regex (``final_answer``); and the benchmark enumerates
every comma segmentation of a list answer, which is exponential in the number of commas
(``0,000,000,...`` within 250 characters), while here the same question — does some
segmentation fit — is answered by a memoised search over positions: the same verdict in
polynomial time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import attrs

_CURRENCY = "$£€¥₹¢₩₽"
_NUMBER_BODY = r"\d{1,3}(?:,\d{3})*(?:\.\d+)?|\d+(?:\.\d+)?"
_ACCOUNTING = re.compile(rf"\(\s*([{_CURRENCY}])?\s*({_NUMBER_BODY})\s*\)")
_CURRENCY_RE = re.compile(rf"[{_CURRENCY}]")
_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)")
_NUMBER = re.compile(r"-?\d+\.?\d*%?")
_LIST_ITEM = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?")
_BRACKETED = re.compile(r"\[([^\[\]]+)\]")
_OPEN_TAG = re.compile("<FINAL_ANSWER>", re.IGNORECASE)
_CLOSE_TAG = re.compile("</FINAL_ANSWER>", re.IGNORECASE)
_MARKUP = re.compile(r"<[^>]*>")
_UNITS = (("trillion", re.compile(r"\btrillions?\b")),
          ("billion", re.compile(r"\bbillions?\b|\bb\b")),
          ("million", re.compile(r"\bmillions?\b|\bm\b")),
          ("thousand", re.compile(r"\bthousands?\b|\bk\b")))
_UNIT_WORDS = ("trillion", "trillions", "billion", "billions", "million", "millions", "thousand",
               "thousands", "hundred", "hundreds", "percent", "percentage", "%")
CONTEXT_CHARS = 20
MAX_DIRECT_CHARS = 250

Numbers = list[tuple[float, str]]


@attrs.frozen(kw_only=True)
class Verdict:
    """The benchmark's answer: ``correct`` and its reason in a line."""

    correct: bool
    rationale: str


def final_answer(text: str) -> str:
    """The last ``<FINAL_ANSWER>`` content (stripped), else ``text`` unchanged.

    The benchmark's ``re.finditer(r'<FINAL_ANSWER>\\s*(.*?)\\s*</FINAL_ANSWER>', DOTALL |
    IGNORECASE)`` takes quadratic time or worse on many unclosed tags or long whitespace;
    this walks the same matches left to right with two literal searches (the same tags,
    case-insensitively, under the same case rules): each match opens at the first opening
    tag from where the previous one closed and closes at the first closing tag after it.
    Linear in ``len(text)``; the same result (``tests/test_officeqa_fidelity.py`` checks
    it against the regex)."""
    text = text or ""
    last: tuple[int, int] | None = None
    pos = 0
    while (opened := _OPEN_TAG.search(text, pos)) is not None:
        closed = _CLOSE_TAG.search(text, opened.end())
        if closed is None:  # no closing tag after this one: none after any later one either
            break
        last = (opened.end(), closed.start())
        pos = closed.end()
    return text[last[0]: last[1]].strip() if last is not None else text


def normalise_text(text: str) -> str:
    """Unicode minus to ``-`` and whitespace runs to one space."""
    return re.sub(r"\s+", " ", text.replace("\u2212", "-")).strip()


def is_year(value: float) -> bool:
    return 1900 <= value <= 2100 and value == int(value)


def _numeric_formatting(text: str) -> str:
    """``(1,234)`` and ``($5)`` as negatives (a bare year in brackets stays), no currency signs."""
    def repl(m: re.Match[str]) -> str:
        if m.group(1) is None and is_year(float(m.group(2).replace(",", ""))):
            return m.group(0)
        return f"-{m.group(2)}"
    return _CURRENCY_RE.sub("", _ACCOUNTING.sub(repl, text))


def number_text(text: str) -> str:
    """``text`` as the benchmark reads numbers in it: thousands commas gone, other commas kept."""
    flat = _numeric_formatting(normalise_text(text))
    return _THOUSANDS.sub(lambda m: m.group().replace(",", ""), flat)


def numbers(text: str) -> Numbers:
    """Each number with the lower-cased text within 20 characters of it."""
    flat = number_text(text)
    out = []
    for m in _NUMBER.finditer(flat):
        raw = m.group().rstrip("%")
        if raw in ("", "-"):
            continue
        out.append((float(raw), flat[max(0, m.start() - CONTEXT_CHARS): m.end() + CONTEXT_CHARS].lower()))
    return out


def unit_of(context: str) -> str | None:
    return next((name for name, pattern in _UNITS if pattern.search(context.lower())), None)


def _units_compatible(gold: str | None, pred: str | None) -> bool:
    return gold is None or pred is None or gold == pred


def significant_text(text: str) -> str:
    """Words left after numbers, unit words and punctuation go ('' when under 2 characters)."""
    if not text:
        return ""
    cleaned = re.sub(r"-?\d+\.?\d*%?", "", normalise_text(text).lower()).replace(",", "")
    for unit in _UNIT_WORDS:
        cleaned = re.sub(r"\b" + unit + r"\b", "", cleaned)
    cleaned = re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", cleaned)).strip()
    return cleaned if len(cleaned) >= 2 else ""


def text_overlaps(gold: str, predicted: str) -> bool:
    if not gold or not predicted:
        return False
    g, p = significant_text(gold), significant_text(predicted)
    if not g:
        return True
    return bool(p) and (g in p or p in g)


def _close(gold: float, pred: float, tolerance: float) -> bool:
    return pred == 0 if gold == 0 else abs(gold - pred) / abs(gold) <= tolerance


# -- bracketed numeric lists --------------------------------------------------------------
def _bracketed_body(text: str) -> str | None:
    """The body of the one ``[...]`` in ``text`` when nothing outside it has a digit."""
    flat = normalise_text(text)
    found = list(_BRACKETED.finditer(flat))
    if len(found) != 1:
        return None
    outside = flat[: found[0].start()] + flat[found[0].end():]
    return None if re.search(r"\d", outside) else found[0].group(1)


def _list_item(raw: str) -> float | None:
    item = raw.strip()
    if not item or ("," in item and re.search(r"\s,|,\s", item)):
        return None
    item = _numeric_formatting(normalise_text(item))
    if _LIST_ITEM.fullmatch(item) is None:
        return None
    return float(item.rstrip("%").replace(",", ""))


def _segmentation_fits(text: str, count: int, fits: Callable[[int, float], bool]) -> bool:
    """Whether ``text`` (its one bracketed body, else all of it) splits at commas into
    ``count`` list items whose i-th value satisfies ``fits(i, value)``."""
    if count < 2:
        return False
    body = _bracketed_body(text) or normalise_text(text)
    cuts = [m.start() for m in re.finditer(",", body)]
    starts, ends = [0, *(c + 1 for c in cuts)], [*cuts, len(body)]
    chunks = len(starts)
    if chunks < count:
        return False

    @functools.cache
    def reach(chunk: int, index: int) -> bool:
        if index == count:
            return chunk == chunks
        for end in range(chunk + 1, chunks - (count - index) + 2):
            value = _list_item(body[starts[chunk]: ends[end - 1]])
            if value is not None and fits(index, value) and reach(end, index + 1):
                return True
        return False

    return reach(0, 0)


def _gold_list(gold: str, gold_nums: Numbers) -> Numbers | None:
    """The gold numbers when the gold answer is one bracketed list they segment into."""
    body = _bracketed_body(gold)
    if body is None or len(gold_nums) < 2:
        return None
    values = [g for g, _ in gold_nums]
    return gold_nums if _segmentation_fits(body, len(values), lambda i, v: v == values[i]) else None


def _in_order(gold: Numbers, pred: Numbers, tolerance: float) -> bool:
    if len(gold) != len(pred):
        return False
    return all(_units_compatible(unit_of(gc), unit_of(pc)) and _close(g, p, tolerance)
               for (g, gc), (p, pc) in zip(gold, pred))


def _drop_years(gold: str, gold_nums: Numbers, pred_nums: Numbers) -> Numbers:
    """Prediction numbers without incidental years (kept when the gold answer has years,
    or, for one gold number, words)."""
    if not gold_nums:
        return pred_nums
    if len(gold_nums) == 1:
        drop = not (is_year(gold_nums[0][0]) or significant_text(gold))
    else:
        drop = not any(is_year(g) for g, _ in gold_nums)
    return [(p, c) for p, c in pred_nums if not (drop and is_year(p))]


def _match_gold_list(gold: str, gold_list: Numbers, pred_nums: Numbers, predicted: str,
                     tolerance: float) -> Verdict:
    def fits(i: int, v: float) -> bool:  # a segmented item has no context, hence no unit
        return _close(gold_list[i][0], v, tolerance)
    if _segmentation_fits(predicted, len(gold_list), fits):
        return Verdict(correct=True, rationale="ordered list: a comma segmentation matches")
    if _in_order(gold_list, _drop_years(gold, gold_list, pred_nums), tolerance):
        return Verdict(correct=True, rationale=f"ordered list: all {len(gold_list)} numbers in order")
    return Verdict(correct=False, rationale="ordered list mismatch")


# -- the verdict ----------------------------------------------------------------------------
def direct_answer(gold: str, predicted: str) -> Verdict:
    """The benchmark's guard: the prediction is one direct answer of the gold answer's shape."""
    predicted = predicted.strip()
    if not predicted:
        return Verdict(correct=False, rationale="empty answer")
    if len([line for line in predicted.splitlines() if line.strip()]) > 1:
        return Verdict(correct=False, rationale="the answer spans several lines")
    if len(predicted) > MAX_DIRECT_CHARS:
        return Verdict(correct=False, rationale="the answer is too long to be a direct answer")
    gold_nums, pred_nums = numbers(gold), numbers(predicted)
    if gold_nums:
        if len(_drop_years(gold, gold_nums, pred_nums)) != len(gold_nums):
            gold_list = _gold_list(gold, gold_nums)
            if gold_list is None or not _segmentation_fits(predicted, len(gold_list), lambda i, v: True):
                return Verdict(correct=False, rationale="not exactly the expected count of numbers")
        if _MARKUP.search(predicted):
            return Verdict(correct=False, rationale="markup around the answer value")
        return Verdict(correct=True, rationale="direct answer")
    if pred_nums:
        return Verdict(correct=False, rationale="numbers given for a text answer")
    if _direct_text(gold) != _direct_text(predicted):
        return Verdict(correct=False, rationale="text differs from the expected text")
    return Verdict(correct=True, rationale="direct answer")


def _direct_text(text: str) -> str:
    cleaned = re.sub(r"\([^)]*\)", "", text.strip().lower().strip('"').strip("'")).strip()
    return re.sub(r"\s+", " ", cleaned)


def _match_list(gold: str, gold_nums: Numbers, pred_nums: Numbers, predicted: str, tolerance: float) -> Verdict:
    keep_years = any(is_year(g) for g, _ in gold_nums)
    candidates = [(p, c) for p, c in pred_nums if keep_years or not is_year(p)]
    overlap = text_overlaps(gold, predicted)
    matched = sum(1 for g, gc in gold_nums
                  if overlap and any(_units_compatible(unit_of(gc), unit_of(pc)) and _close(g, p, tolerance)
                                     for p, pc in candidates))
    return Verdict(correct=matched == len(gold_nums), rationale=f"list: {matched}/{len(gold_nums)} numbers matched")


def _match_single(gold: str, gold_nums: Numbers, pred_nums: Numbers, predicted: str, tolerance: float) -> Verdict:
    g, gc = gold_nums[0]
    drop_years = not (is_year(g) or significant_text(gold))
    for p, pc in pred_nums:
        if (drop_years and is_year(p)) or not _units_compatible(unit_of(gc), unit_of(pc)):
            continue
        if g == 0 and p != 0:
            continue
        if _close(g, p, tolerance) and text_overlaps(gold, predicted):
            return Verdict(correct=True, rationale=f"number within {tolerance:.0%}")
    return Verdict(correct=False, rationale="no predicted number matched")


def fuzzy_match(gold: str, predicted: str, tolerance: float = 0.0) -> Verdict:
    """The benchmark's ``fuzzy_match_answer`` (raises ``ValueError`` on a bad gold/tolerance)."""
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
        gold_list = _gold_list(gold, gold_nums)
        if gold_list is not None:
            return _match_gold_list(gold, gold_list, pred_nums, predicted, tolerance)
        if len(gold_nums) > 1:
            return _match_list(gold, gold_nums, pred_nums, predicted, tolerance)
        return _match_single(gold, gold_nums, pred_nums, predicted, tolerance)
    g_text = re.sub(r"\s+", " ", re.sub(r"\([^)]*\)", "", gold.strip().lower().strip('"').strip("'"))).strip()
    p_text = re.sub(r"\s+", " ", re.sub(r"\([^)]*\)", "", predicted.strip().lower().strip('"').strip("'"))).strip()
    if g_text in p_text:
        return Verdict(correct=True, rationale="text match")
    return Verdict(correct=False, rationale="text mismatch")


def grade(gold: str, predicted: str, tolerance: float = 0.0) -> Verdict:
    """The benchmark's ``score_answer`` with its reason: last tag, direct-answer guard, fuzzy match."""
    answer = final_answer(predicted)
    try:
        guard = direct_answer(gold, answer)
        return fuzzy_match(gold, answer, tolerance) if guard.correct else guard
    except ValueError as exc:  # the benchmark scores any error as 0
        return Verdict(correct=False, rationale=f"not gradable: {exc}")


def score_answer(gold: str, predicted: str, tolerance: float = 0.0) -> float:
    """1.0 or 0.0 exactly as the benchmark's ``score_answer(gold, predicted, tolerance)``."""
    return 1.0 if grade(gold, predicted, tolerance).correct else 0.0
