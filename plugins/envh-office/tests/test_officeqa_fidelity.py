"""OfficeQA's verdict against the benchmark's own ``reward.py``: recorded input/expected pairs.

Source: github.com/databricks/officeqa ``reward.py`` at main (``score_answer`` =
``extract_final_answer_from_xml`` (last tag) → ``_is_direct_answer_only`` →
``fuzzy_match_answer``; thousands commas via ``_VALID_THOUSANDS_RE``; bracketed lists via
``_segment_numeric_list_values``). Each expected score below is what that function returns
for the pair, traced through its code. The earlier ``reward.py`` (commit 0da20e9aa535) graded
the whole response with every comma deleted and no tag extraction in ``score_answer``; the
benchmark's current scorer replaced it, and envh matches the current one.
"""

from __future__ import annotations

import time

import pytest
from envh_office import qa_reward, qa_scoring

# (gold, predicted, tolerance, upstream score_answer)
RECORDED = [
    # the LAST <FINAL_ANSWER> is graded
    ("2,417 million", "<FINAL_ANSWER>12</FINAL_ANSWER> no, <FINAL_ANSWER>2,417 million</FINAL_ANSWER>", 0.0, 1.0),
    ("2,417 million", "<FINAL_ANSWER>2,417 million</FINAL_ANSWER> no, <FINAL_ANSWER>12</FINAL_ANSWER>", 0.0, 0.0),
    ("2,417 million", "I read 1941 tables. <FINAL_ANSWER>2,417 million</FINAL_ANSWER>", 0.0, 1.0),
    # commas: only a valid thousands group is one number
    ("2382", "23,82", 0.0, 0.0),
    ("23, 82", "23,82", 0.0, 1.0),
    ("2,417", "2417", 0.0, 1.0),
    ("[44.00,231.52]", "[44.00, 231.52]", 0.0, 1.0),
    ("[44.00, 231.52]", "[44.00,231.52]", 0.0, 1.0),
    ("[44.00,231.52]", "[231.52, 44.00]", 0.0, 0.0),   # a bracketed gold list is ordered
    ("[8, 152260]", "[8,152,260]", 0.0, 1.0),           # segmented at commas to fit the gold list
    ("[8, 152260]", "[8,152,261]", 0.0, 0.0),
    # accounting negatives and currency signs
    ("-1,234", "(1,234)", 0.0, 1.0),
    ("-5", "($5)", 0.0, 1.0),
    ("543 million", "$543 million", 0.0, 1.0),
    ("1977", "(1977)", 0.0, 1.0),                      # a bracketed year stays a year
    # the direct-answer guard
    ("5", "<b>5</b>", 0.0, 0.0),
    ("5", "5\nor maybe 6", 0.0, 0.0),
    ("5", "5 " + "x" * 260, 0.0, 0.0),
    ("5", "5 and 6", 0.0, 0.0),
    ("Treasury", "the Treasury", 0.0, 0.0),
    ("Treasury (Dept.) bills", "treasury  bills", 0.0, 1.0),
    ("Treasury", "5 Treasury", 0.0, 0.0),
    ("7.25", "In 1977 it was 7.25", 0.0, 1.0),         # an incidental year is not counted
    # units and tolerance
    ("543 million", "543 billion", 0.0, 0.0),
    ("543 million", "543", 0.0, 1.0),
    ("100.0", "100.9", 0.01, 1.0),
    ("100.0", "103", 0.01, 0.0),
    ("100.0", "103", 0.05, 1.0),
    ("0", "0", 0.0, 1.0),
    ("0", "1", 0.0, 0.0),
    # hybrids and lists
    ("March 1977", "march 1977", 0.0, 1.0),
    ("March 1977", "April 1977", 0.0, 0.0),
    ("12.5, 40.25", "40.25, 12.5", 0.0, 1.0),          # an unbracketed list is not ordered
    ("12.5, 40.25", "12.5", 0.0, 0.0),
    ("Unable to determine", "unable to determine", 0.0, 0.0),
    ("5", "", 0.0, 0.0),
    ("5", "<FINAL_ANSWER> </FINAL_ANSWER>", 0.0, 0.0),
]


@pytest.mark.parametrize(("gold", "pred", "tolerance", "expected"), RECORDED)
def test_recorded_upstream_scores(gold, pred, tolerance, expected):
    assert qa_reward.score_answer(gold, pred, tolerance) == expected
    assert qa_scoring.score_answer(gold, pred, tolerance) == expected


@pytest.mark.parametrize(("gold", "pred", "tolerance", "expected"), [r for r in RECORDED if r[3] == 0.0])
def test_strict_never_passes_what_the_benchmark_refuses(gold, pred, tolerance, expected):
    assert qa_scoring.score_answer(gold, pred, tolerance, strict=True) == 0.0


@pytest.mark.parametrize(("text", "expected"), [
    ("23,82", [23.0, 82.0]),
    ("1,234,567.5", [1234567.5]),
    ("44.00,231.52", [44.0, 231.52]),
    ("(1,234) and ($5)", [-1234.0, -5.0]),
    ("\u22124.5%", [-4.5]),
])
def test_number_reading(text, expected):
    assert [v for v, _ in qa_reward.numbers(text)] == expected
    assert [v for v, _ in qa_scoring.numbers_with_context(text)] == expected


def test_final_answer_is_the_last_tag():
    assert qa_scoring.final_answer("<FINAL_ANSWER>1</FINAL_ANSWER><final_answer> 2 </final_answer>") == "2"


def test_comma_segmentation_is_polynomial():
    """The benchmark enumerates every segmentation; ours answers the same question at once."""
    pred = "[" + ",".join(["000"] * 62) + "]"
    start = time.perf_counter()
    assert qa_reward.score_answer("[1, 2, 3, 4, 5, 6]", pred) == 0.0
    assert qa_reward.score_answer("[0, 0, 0, 0, 0, 0]", pred) == 1.0
    assert time.perf_counter() - start < 1.0
