"""WebArena's grading, case by case against the official code.

Official code: web-arena-x/webarena, ``evaluation_harness/evaluators.py`` at
1a628d69fc8a9c3b78c66fb3ba1c04fef00ec0a4 (``StringEvaluator.must_include``,
``URLEvaluator``, ``HTMLContentEvaluator``; the first two read the same at a7c475b57504)
and its tokenizer, ``nltk.word_tokenize`` (nltk/nltk, ``nltk/tokenize/destructive.py`` at
07a43d2246c5; ``nltk/tokenize/punkt.py`` of NLTK 3.10.4 with the English ``punkt_tab``
model). The expected values below are what that code returns, worked out from it (NLTK's
own doctest outputs where it has them) or recorded from NLTK 3.10.4 with that model
(``data/punkt_word_tokenize_pairs.json``: random lower-case strings of digits, letters,
periods, quotes and brackets); WebArena's evaluator is not on the package index and NLTK's
sentence model is a data download, so neither runs here.
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from envh import TaskRef, errors
from envh_webarena.httpserve import LocalServer
from envh_webarena.webarena.evaluators import clean_answer, must_include, string_match
from envh_webarena.webarena.judge import JudgeConfig
from envh_webarena.webarena.tokenize import word_tokenize

# --- nltk.word_tokenize: NLTK's doctests (nltk/tokenize/__init__.py, destructive.py) ---------
MUFFINS = "Good muffins cost $3.88\nin New York.  Please buy me\ntwo of them.\n\nThanks."
TOKENIZE = [
    (MUFFINS, ["Good", "muffins", "cost", "$", "3.88", "in", "New", "York", ".", "Please", "buy", "me",
               "two", "of", "them", ".", "Thanks", "."]),
    ("They'll save and invest more.", ["They", "'ll", "save", "and", "invest", "more", "."]),
    ("hi, my name can't hello,", ["hi", ",", "my", "name", "ca", "n't", "hello", ","]),
    ("the total is 3,000 - 3.5% of 1/3 (or 3)", ["the", "total", "is", "3,000", "-", "3.5", "%", "of", "1/3",
                                                 "(", "or", "3", ")"]),
    ("it is -3 or 3.", ["it", "is", "-3", "or", "3", "."]),
    ("1. 3. 5", ["1", ".", "3", ".", "5"]),              # a number then a digit: Punkt ends the sentence
    ("step 3. then go", ["step", "3.", "then", "go"]),  # a number then a lower-case word: it does not
    # Punkt's period context: '.' then punctuation (not only white space) is a candidate end
    ('the answer is "3." per the page', ["the", "answer", "is", "``", "3", ".", "''", "per", "the", "page"]),
    ("(it is 3.) done", ["(", "it", "is", "3", ".", ")", "done"]),
    # the model: a sentence-final token before a quote; one-letter abbreviations keep their '.'
    ('the total is 2. "', ["the", "total", "is", "2.", "``"]),
    ("size c. 3", ["size", "c.", "3"]),
    ("size b. 3", ["size", "b", ".", "3"]),
    ("it was 3. administrators said", ["it", "was", "3", ".", "administrators", "said"]),  # "unknown" in the model
    ("3. who", ["3.", "who"]),  # a collocation of the model
    # NLTK's regex engine: U+001C is not white space there, so 'x' is not the next token
    ("3. \u2009 \x1c x", ["3", ".", "x"]),
    ("(3. \x1c the [3. x", ["(", "3", ".", "the", "[", "3.", "x"]),
]


@pytest.mark.parametrize(("text", "tokens"), TOKENIZE)
def test_word_tokenize_is_nltks(text: str, tokens: list[str]) -> None:
    assert word_tokenize(text) == tokens


# --- StringEvaluator.must_include(ref, pred, tokenize) -----------------------------------------
MUST_INCLUDE = [  # (ref, pred, tokenize, upstream score)
    ("3", "3.5", True, 0.0),
    ("3", "3,000", True, 0.0),
    ("3", "1/3", True, 0.0),
    ("3", "-3", True, 0.0),
    ("3", "$3", True, 1.0),             # '$' is its own token
    ("3", "3 items", True, 1.0),
    ("3", "there are 3.", True, 1.0),    # the final period is split off
    ("3", "answer: 3. done", True, 0.0),  # '3.' before a lower-case word stays one token
    ("3", "(3)", True, 1.0),
    ("3", "3%", True, 1.0),
    ("0", "10", True, 0.0),
    ("a", "a b", True, 1.0),
    ("3", "3.5", False, 1.0),           # several phrases, or program_html: a plain substring
    ("3", "1/3", False, 1.0),
    ("'3'", "3", True, 1.0),            # the reference is cleaned first
    ("Yes", "yes it is", True, 1.0),     # longer than one character: a substring
    ("yes", "eyes", True, 1.0),
    ("3", 'the answer is "3." per the page', True, 1.0),  # Punkt ends the sentence at '.' before '"'
    ("2", 'the total is 2. "', True, 0.0),               # '2.' stays one token
    ("c", "size c. 3", True, 0.0),                       # 'c' is an abbreviation of the model
    ("b", "size b. 3", True, 1.0),
    ("3", "3. \u2102", True, 0.0),  # refused: an upper-case next token needs Punkt's full model (NLTK: 1)
]


PAIRS = json.loads((Path(__file__).parent / "data" / "punkt_word_tokenize_pairs.json").read_text("utf-8"))


def test_word_tokenize_agrees_with_nltk_on_recorded_random_strings() -> None:
    wrong = [(text, tokens, word_tokenize(text)) for text, tokens in PAIRS["pairs"] if word_tokenize(text) != tokens]
    assert not wrong, wrong[:5]


def test_clean_answer_is_webarenas() -> None:
    # StringEvaluator.clean_answer: startswith and endswith the same quote -> answer[1:-1]
    assert [clean_answer(a) for a in ['"', "'", ' " ', '"3"', "'a'", "'3\"", "", "\"A"]] == \
        ["", "", "", "3", "a", "'3\"", "", '"a']


@pytest.mark.parametrize(("ref", "pred", "tokenize", "score"), MUST_INCLUDE)
def test_must_include_matches_webarena(ref: str, pred: str, tokenize: bool, score: float) -> None:
    assert must_include(ref, pred, tokenize=tokenize) == score


def test_string_match_tokenizes_only_a_lone_phrase() -> None:
    """WebArena tokenises when ``must_include`` holds one phrase (``tokenize=len(value) == 1``)."""
    def task(refs: list[str]) -> dict[str, Any]:
        return {"task_id": 1, "intent": "", "eval": {"reference_answers": {"must_include": refs}}}

    judge = JudgeConfig()
    assert string_match(task(["3"]), "3.5", judge)[0] == 0.0
    assert string_match(task(["3"]), "It is 3", judge)[0] == 1.0
    assert string_match(task(["3", "5"]), "3.5", judge)[0] == 1.0


# --- HTMLContentEvaluator: goto, then time.sleep(3), then read -------------------------------
LATE_PAGE = b"""<!doctype html><html><body><div id="status">loading</div><script>
window.addEventListener('load', () => setTimeout(() => {
  document.getElementById('status').textContent = 'Order placed';
}, 1500));
</script></body></html>"""


class _LatePage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(LATE_PAGE)))
        self.end_headers()
        self.wfile.write(LATE_PAGE)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


def test_program_html_reads_a_page_its_script_fills_after_load() -> None:
    """Magento and GitLab fill pages by script: WebArena reads 3 s after ``goto``."""
    from envh_webarena.webarena.bridge import WebArenaEnv

    with LocalServer(_LatePage) as site:
        ev = {"eval_types": ["program_html"], "program_html": [
            {"url": f"{site.url}/order", "locator": "document.querySelector('#status').textContent",
             "required_contents": {"exact_match": "Order placed"}},
            {"url": "last", "locator": "", "required_contents": {"must_include": ["Order placed"]}}]}
        task = {"task_id": 1, "sites": [], "start_url": f"{site.url}/", "intent": "probe",
                "require_login": False, "eval": ev}
        env = WebArenaEnv(tasks=[task], max_steps=None)
        try:
            env.reset(task=TaskRef(suite="webarena", split="test", instance_id="1"))
            t0 = time.monotonic()
            verdict = env.evaluate()
            assert time.monotonic() - t0 >= 3.0
        finally:
            env.close()
    # the second target's "last" is the page the first one opened, as WebArena's
    assert [t["score"] for t in verdict.metrics["details"]["program_html"]] == [1.0, 1.0]
    assert verdict.success


# --- the judge: a reply without a verdict or a refused request is the answer's failure -------
class _Judge(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint answering by the student's answer in the prompt."""

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        prompt = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["messages"][-1]["content"]
        status, body = 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "judge",
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "I cannot tell."}}]}
        if "refused" in prompt:
            status, body = 400, {"error": {"message": "content filter", "type": "invalid_request_error"}}
        elif "broken" in prompt:
            status, body = 500, {"error": {"message": "internal", "type": "server_error"}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


@pytest.mark.timeout(60)
def test_judge_without_a_verdict_scores_zero_but_a_failing_judge_is_infra() -> None:
    def task(value: Any) -> dict[str, Any]:
        return {"task_id": 1, "intent": "q", "eval": {"reference_answers": {"fuzzy_match": value},
                                                     "string_note": "no such item"}}

    with LocalServer(_Judge) as server:
        judge = JudgeConfig(base_url=f"{server.url}/v1", timeout=5)
        for value in (["Dune"], "N/A"):
            score, parts = string_match(task(value), "maybe", judge)
            assert score == 0.0 and "no verdict" in parts["fuzzy_match_error"]
            score, parts = string_match(task(value), "refused", judge)
            assert score == 0.0 and "HTTP 400" in parts["fuzzy_match_error"]
        with pytest.raises(errors.InfraError, match="judge"):
            string_match(task(["Dune"]), "broken", judge)
