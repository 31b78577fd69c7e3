"""OfficeQA's verdict against the benchmark's own ``reward.py``: recorded input/expected pairs.

Source: github.com/databricks/officeqa ``reward.py`` at main, in the two versions that
circulate as vendored copies (README "Grading fidelity"). "lists" (``qa_reward``):
``score_answer`` = ``extract_final_answer_from_xml`` (last tag) → ``_is_direct_answer_only``
(incidental years dropped, markup refused, bracketed lists segmented) →
``fuzzy_match_answer``; thousands commas via ``_VALID_THOUSANDS_RE``; bracketed lists via
``_segment_numeric_list_values``. "prose" (``qa_reward_prose``): the same steps, but the
guard counts every number and refuses prose around a purely numeric gold answer, commas go
from any ``\\d{1,3}(,\\d{3})+`` run, and there is no bracketed-list path. Each expected
score below is what that version's ``score_answer`` returns for the pair, traced through its
code; envh's benchmark score is 1 only when both are 1. The earlier ``reward.py`` (commit
0da20e9aa535) graded the whole response with every comma deleted and no tag extraction in
``score_answer``; the benchmark's current scorer replaced it.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time

import pytest
from envh_office import qa_reward, qa_reward_prose, qa_scoring

# (gold, predicted, tolerance, score_answer of the 'lists' version, of the 'prose' version)
RECORDED = [
    # the LAST <FINAL_ANSWER> is graded
    ("2,417 million", "<FINAL_ANSWER>12</FINAL_ANSWER> no, <FINAL_ANSWER>2,417 million</FINAL_ANSWER>", 0.0, 1.0, 1.0),
    ("2,417 million", "<FINAL_ANSWER>2,417 million</FINAL_ANSWER> no, <FINAL_ANSWER>12</FINAL_ANSWER>", 0.0, 0.0, 0.0),
    ("2,417 million", "I read 1941 tables. <FINAL_ANSWER>2,417 million</FINAL_ANSWER>", 0.0, 1.0, 1.0),
    # commas: only a valid thousands group is one number
    ("2382", "23,82", 0.0, 0.0, 0.0),
    ("23, 82", "23,82", 0.0, 1.0, 1.0),
    ("2,417", "2417", 0.0, 1.0, 1.0),
    ("[44.00,231.52]", "[44.00, 231.52]", 0.0, 1.0, 0.0),
    ("[44.00, 231.52]", "[44.00,231.52]", 0.0, 1.0, 0.0),
    ("[44.00,231.52]", "[231.52, 44.00]", 0.0, 0.0, 0.0),   # a bracketed gold list is ordered
    ("[8, 152260]", "[8,152,260]", 0.0, 1.0, 0.0),           # segmented at commas to fit the gold list
    ("[8, 152260]", "[8,152,261]", 0.0, 0.0, 0.0),
    # accounting negatives and currency signs
    ("-1,234", "(1,234)", 0.0, 1.0, 1.0),
    ("-5", "($5)", 0.0, 1.0, 1.0),
    ("543 million", "$543 million", 0.0, 1.0, 1.0),
    ("1977", "(1977)", 0.0, 1.0, 1.0),                      # a bracketed year stays a year
    # the direct-answer guard
    ("5", "<b>5</b>", 0.0, 0.0, 0.0),
    ("5", "5\nor maybe 6", 0.0, 0.0, 0.0),
    ("5", "5 " + "x" * 260, 0.0, 0.0, 0.0),
    ("5", "5 and 6", 0.0, 0.0, 0.0),
    ("Treasury", "the Treasury", 0.0, 0.0, 0.0),
    ("Treasury (Dept.) bills", "treasury  bills", 0.0, 1.0, 1.0),
    ("Treasury", "5 Treasury", 0.0, 0.0, 0.0),
    ("7.25", "In 1977 it was 7.25", 0.0, 1.0, 0.0),         # an incidental year is not counted
    # units and tolerance
    ("543 million", "543 billion", 0.0, 0.0, 0.0),
    ("543 million", "543", 0.0, 1.0, 1.0),
    ("100.0", "100.9", 0.01, 1.0, 1.0),
    ("100.0", "103", 0.01, 0.0, 0.0),
    ("100.0", "103", 0.05, 1.0, 1.0),
    ("0", "0", 0.0, 1.0, 1.0),
    ("0", "1", 0.0, 0.0, 0.0),
    # hybrids and lists
    ("March 1977", "march 1977", 0.0, 1.0, 1.0),
    ("March 1977", "April 1977", 0.0, 0.0, 0.0),
    ("12.5, 40.25", "40.25, 12.5", 0.0, 1.0, 1.0),          # an unbracketed list is not ordered
    ("12.5, 40.25", "12.5", 0.0, 0.0, 0.0),
    ("Unable to determine", "unable to determine", 0.0, 0.0, 0.0),
    ("5", "", 0.0, 0.0, 0.0),
    ("5", "<FINAL_ANSWER> </FINAL_ANSWER>", 0.0, 0.0, 0.0),
    # where the two versions disagree: prose around a numeric gold answer, markup, commas
    ("5", "5 dollars", 0.0, 1.0, 0.0),
    ("5", "about 5", 0.0, 1.0, 0.0),
    ("5", "<FINAL_ANSWER>the answer is 5</FINAL_ANSWER>", 0.0, 1.0, 0.0),
    ("12.5, 40.25", "12.5 and 40.25", 0.0, 1.0, 0.0),
    ("March 1977", "<b>March 1977</b>", 0.0, 0.0, 1.0),     # 'lists' refuses markup; 'prose' sees text
    ("1.234567", "1.234,567", 0.0, 0.0, 1.0),               # no look-behind: '234,567' is one group
    ("[1, 2, 3]", "[3, 2, 1]", 0.0, 0.0, 1.0),              # no bracketed-list path: any order
    ("[1, 2, 3]", "1, 2, 3", 0.0, 1.0, 1.0),
]


@pytest.mark.parametrize(("gold", "pred", "tolerance", "lists", "prose"), RECORDED)
def test_recorded_upstream_scores(gold, pred, tolerance, lists, prose):
    assert qa_reward.score_answer(gold, pred, tolerance) == lists
    assert qa_reward_prose.score_answer(gold, pred, tolerance) == prose
    assert qa_scoring.benchmark_scores(gold, pred, tolerance) == {"lists": lists, "prose": prose}
    # never a reward either version refuses
    assert qa_scoring.score_answer(gold, pred, tolerance) == min(lists, prose)


@pytest.mark.parametrize(("gold", "pred", "tolerance", "lists", "prose"), [r for r in RECORDED if min(r[3:]) == 0])
def test_strict_never_passes_what_the_benchmark_refuses(gold, pred, tolerance, lists, prose):
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


# the benchmark's extract_final_answer_from_xml, the oracle of the linear extraction
_UPSTREAM_FINAL = re.compile(r"<FINAL_ANSWER>\s*(.*?)\s*</FINAL_ANSWER>", re.DOTALL | re.IGNORECASE)


def _upstream_final(text: str) -> str:
    found = list(_UPSTREAM_FINAL.finditer(text or ""))
    return found[-1].group(1).strip() if found else (text or "")


def test_final_answer_equals_the_benchmark_regex():
    """Same result as the benchmark's regex: on the recorded answers and on every kind of
    nesting, unclosed tag, case (including the Unicode case folds 'ſ' ~ 's') and space."""
    for _, pred, *_ in RECORDED:
        assert qa_reward.final_answer(pred) == _upstream_final(pred)
    pieces = ["<FINAL_ANSWER>", "</FINAL_ANSWER>", "<final_answer>", "</Final_Answer>", "<FINAL_AN\u017fWER>",
              " ", "\n", "\xa0", "\u2028", "a", "5", "<", "/"]
    rng = random.Random(0)
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 7)))
        assert qa_reward.final_answer(text) == _upstream_final(text), repr(text)


def test_final_answer_is_linear():
    """The benchmark's regex takes 61 s on an opening tag and 5000 spaces and 190 s on
    32000 unclosed opening tags; the extraction (and both versions' grading) must finish
    at once. Run in a subprocess under a timeout: a regression hangs, not the suite."""
    code = ("from envh_office import qa_reward, qa_reward_prose, qa_scoring\n"
            "for t in ['<FINAL_ANSWER>' * 32000, '<FINAL_ANSWER>' + ' ' * 5000,\n"
            "          '<FINAL_ANSWER>' + ' ' * 200000 + 'x</FINAL_ANSWER>' + '<final_answer>' * 20000]:\n"
            "    qa_scoring.score_answer('5', t, 0.0, True)\n"
            "    qa_reward_prose.score_answer('5', t)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def test_comma_segmentation_is_polynomial():
    """The benchmark enumerates every segmentation; ours answers the same question at once."""
    pred = "[" + ",".join(["000"] * 62) + "]"
    start = time.perf_counter()
    assert qa_reward.score_answer("[1, 2, 3, 4, 5, 6]", pred) == 0.0
    assert qa_reward.score_answer("[0, 0, 0, 0, 0, 0]", pred) == 1.0
    assert time.perf_counter() - start < 1.0
