"""OfficeQA's answer matching: the benchmark's semantics, case by case, and EM/F1."""

from __future__ import annotations

import pytest
from envh_office import qa_scoring as s


@pytest.mark.parametrize(("gold", "pred", "scores"), [
    # numbers are compared as written: '543 million' and '543' agree, '543000000' does not
    ("543 million", "543", (1, 1, 1)),
    ("543 million", "The receipts were 543,000,000 dollars", (0, 0, 0)),
    ("2,417 million", "<FINAL_ANSWER>2417</FINAL_ANSWER>", (1, 1, 1)),
    ("2,417 million", "I read 1941 tables. <FINAL_ANSWER>2,417 million</FINAL_ANSWER>", (1, 1, 1)),
    # tolerance: 0 exact, 1 %, 5 %
    ("100.0", "100.9", (0, 1, 1)),
    ("100.0", "103", (0, 0, 1)),
    ("100.0", "106", (0, 0, 0)),
    ("-4.5%", "\u22124.5%", (1, 1, 1)),
    # a year in the prediction: one version of the benchmark ignores it when the gold
    # answer is not a year, the other counts it (and refuses the prose): 0 for both
    ("7.25", "In 1977 it was 7.25", (0, 0, 0)),
    ("7.25", "It happened in 1977", (0, 0, 0)),
    # hybrid answers: the words must overlap too
    ("March 1977", "march 1977", (1, 1, 1)),
    ("March 1977", "April 1977", (0, 0, 0)),
    ("March 1977", "1977", (0, 0, 0)),
    # lists: every gold number must be present
    ("12.5, 40.25", "12.5, 40.25", (1, 1, 1)),
    ("12.5, 40.25", "series A 12.5 and series B 40.25", (0, 0, 0)),  # prose: one version refuses
    ("12.5, 40.25", "12.5 only", (0, 0, 0)),
    # text answers: the same text, case and parentheticals aside (a direct answer only)
    ("Federal Old-Age and Survivors Insurance (OASI) Trust Fund",
     "federal old-age and survivors insurance (OASI) trust fund", (1, 1, 1)),
    ("Federal Old-Age and Survivors Insurance (OASI) Trust Fund",
     "It is the federal old-age and survivors insurance (OASI) trust fund", (0, 0, 0)),
    ("Treasury (Dept.) bills", "Treasury (TD) bills", (1, 1, 1)),
    ("Treasury", "the Mint", (0, 0, 0)),
    ("0", "0", (1, 1, 1)),
    ("0", "1", (0, 0, 0)),
])
def test_benchmark_matching(gold, pred, scores):
    assert tuple(int(s.score_answer(gold, pred, t)) for t in s.TOLERANCES) == scores


def test_empty_and_bad_inputs():
    assert s.score_answer("5", "") == 0.0
    assert s.score_answer("5", "<FINAL_ANSWER> </FINAL_ANSWER>") == 0.0
    with pytest.raises(ValueError):
        s.score_answer("", "5")
    with pytest.raises(ValueError):
        s.score_answer("5", "5", tolerance=2)


def test_em_and_f1():
    assert s.exact_match("The Treasury", "treasury.") == 1.0
    assert s.exact_match("March 1977", "<FINAL_ANSWER>March 1977</FINAL_ANSWER>") == 1.0
    assert s.exact_match("March 1977", "April 1977") == 0.0
    assert s.token_f1("march 1977", "april 1977") == pytest.approx(0.5)
    assert s.token_f1("a b c", "x y") == 0.0
    assert s.token_f1("12.5, 40.25", "12.5 40.25") == 1.0  # punctuation is dropped on both sides
    assert s.token_f1("12.5, 40.25", "12.5, 40.25") == 1.0


@pytest.mark.parametrize(("gold", "pred", "benchmark"), [
    ("March 1977", "arc 1977", 1.0),          # a fragment of the gold word
    ("March 1977", "Mar 1977", 1.0),
    ("No", "not known", 0.0),                 # substring, not a word
    ("Yes", "yes no", 0.0),                   # both offered
    ("543 million", "543 billion", 0.0),      # another scale
    ("12", "12 to 13", 0.0),                  # a range of guesses
    ("100", "1 2 3 4 5 6 7 8 9 10 20 30 40 50 60 70 80 90 100", 0.0),
    ("42", "42 is wrong, 7", 0.0),
    ("12.5, 40.25", "12.5 13 14 40.25 41", 0.0),
])
def test_strict_refuses_wrong_answers(gold, pred, benchmark):
    """Each of these is wrong; the benchmark (``benchmark``: its recorded score) passes
    some of them, strict matching refuses them all."""
    assert s.score_answer(gold, pred, 0.0) == benchmark
    assert all(s.score_answer(gold, pred, t, strict=True) == 0.0 for t in s.TOLERANCES)


@pytest.mark.parametrize(("gold", "pred"), [
    ("543 million", "$543 million"),
    ("12.5, 40.25", "40.25, 12.5"),
    ("7.25", "$7.25"),
    ("March 1977", "in March of 1977"),
    ("2,417 million", "I read 1941 tables. <FINAL_ANSWER>2,417 million</FINAL_ANSWER>"),
    ("Treasury (Dept.) bills", "Treasury (TD) bills"),
    ("-4.5%", "\u22124.5%"),
])
def test_strict_keeps_right_answers(gold, pred):
    assert all(s.score_answer(gold, pred, t, strict=True) == 1.0 for t in s.TOLERANCES)


@pytest.mark.parametrize(("gold", "pred"), [
    ("543 million", "$543 million (543,000,000)"),   # two numbers: not a direct answer
    ("40.25 million", "series B 40.25 million"),     # 'B' reads as billion
    ("5.2%", "5.2% (0.052)"),
])
def test_benchmark_refuses_restated_answers(gold, pred):
    """Right, but not in the benchmark's direct-answer form: both verdicts refuse them."""
    assert all(s.score_answer(gold, pred, t, strict) == 0.0 for t in s.TOLERANCES for strict in (False, True))
