"""WebArena's evaluators: string_match, url_match and program_html, with WebArena's rules.

* **string_match** on the final answer: ``exact_match`` (after WebArena's cleaning: strip,
  drop one pair of surrounding quotes, lower-case), ``must_include`` (each phrase is a
  substring; a one-character phrase alone must be one of ``nltk.word_tokenize``'s tokens,
  WebArena's guard against '0' matching '10': ``tokenize.py``) and ``fuzzy_match`` (the
  LLM judge; ``N/A`` tasks check the unachievable reason with ``string_note``).
* **url_match** (``url_note`` "GOLD in PRED"): some reference's netloc is the page's and
  its path segments begin the page's path, and every reference query parameter has one of
  its values in the page's query (WebArena matches netloc+path as a substring; see
  ``url_match``).
* **program_html**: for each target, open its URL (``last``: the page as it is; ``func:``:
  an allowed helper) and wait ``SETTLE_S`` as WebArena does, read the locator (empty: the
  page's HTML; a ``document.…`` expression run in the page after its ``prep_actions``;
  ``func:``: an allowed helper) and require ``exact_match`` or ``must_include``
  (``|OR|`` alternatives).

Official code: web-arena-x/webarena ``evaluation_harness/evaluators.py`` at 1a628d69fc8a;
the pairs it was checked on are in ``tests/test_webarena_fidelity.py`` and
``tests/test_url_match.py``.

The score is the product over the configured evaluators, as in WebArena. WebArena
``eval()``s the ``func:`` strings; here they are parsed and only the helpers in
``helpers.HELPERS`` can be called, with literal arguments, ``__last_url__`` and ``__page__``.
"""

from __future__ import annotations

import collections
import html
from typing import Any
from urllib.parse import parse_qs, urlparse

from envh import errors

from envh_webarena.runtime import is_browser_gone
from envh_webarena.webarena import helpers
from envh_webarena.webarena.judge import JudgeConfig, NoVerdict, fuzzy_match, unachievable_match
from envh_webarena.webarena.tokenize import AmbiguousBoundary, word_tokenize


def clean_answer(answer: str) -> str:
    """WebArena's ``StringEvaluator.clean_answer``: strip, drop a surrounding quote pair (a lone
    ``"`` or ``'`` both starts and ends the text, so it becomes ""), lower-case."""
    answer = answer.strip()
    if answer[:1] in ("'", '"') and answer.endswith(answer[:1]):
        answer = answer[1:-1]
    return answer.lower()


def exact_match(ref: str, pred: str) -> float:
    return float(clean_answer(pred) == clean_answer(ref))


def must_include(ref: str, pred: str, *, tokenize: bool = False) -> float:
    """WebArena's rule: a substring, but a one-character reference that is a task's only
    ``must_include`` phrase must be one of NLTK's word tokens ("3" is not in "3.5", "-3")."""
    ref, pred = clean_answer(ref), clean_answer(pred)
    if tokenize and len(ref) == 1 and len(word_tokenize(ref)) == 1:
        try:
            return float(ref in word_tokenize(pred))
        except AmbiguousBoundary:  # Punkt would need its full model here: never more than NLTK gives
            return 0.0
    return float(ref in pred)


def string_match(task: dict[str, Any], answer: str, judge: JudgeConfig) -> tuple[float, dict[str, Any]]:
    pred = clean_answer(answer)
    score, parts = 1.0, dict[str, Any]()
    for approach, value in task["eval"]["reference_answers"].items():
        try:
            s = _string_approach(task, approach, value, pred, judge)
        except NoVerdict as exc:  # the answer's doing (see judge.py): a failed match, with the reason
            s, parts[f"{approach}_error"] = 0.0, str(exc)
        parts[approach] = s
        score *= s
    return score, parts


def _string_approach(task: dict[str, Any], approach: str, value: Any, pred: str, judge: JudgeConfig) -> float:
    if approach == "exact_match":
        s = exact_match(str(value), pred)
    elif approach == "must_include":
        values = list(value)
        s = 1.0
        for v in values:
            s *= must_include(str(v), pred, tokenize=len(values) == 1)
    elif approach == "fuzzy_match":
        if value == "N/A":
            s = exact_match("N/A", pred)
            if s != 1.0:
                s = unachievable_match(judge, pred, str(task["eval"].get("string_note", "")), task["intent"])
        else:
            s = 1.0
            for ref in list(value):
                s *= (1.0 if not ref else 0.0) if not pred else fuzzy_match(judge, pred, str(ref), task["intent"])
    else:
        raise errors.SpecError(f"task {task['task_id']}: unknown reference_answers key {approach!r}")
    return s


def _parse_url(url: str) -> tuple[str, list[str], dict[str, list[str]]]:
    """WebArena's ``parse_url`` of a ``clean_url``-ed URL, the path as segments: the netloc
    as written (case, port and user kept), the raw path without its trailing '/', the
    query parsed by ``parse_qs`` (which percent-decodes values, as there)."""
    parts = urlparse(url.rstrip("/"))
    return parts.netloc, parts.path.rstrip("/").split("/"), parse_qs(parts.query)


def url_match(task: dict[str, Any], page_url: str) -> float:
    """WebArena's "GOLD in PRED" rule, with the reference's host+path matched by parts.

    WebArena tests ``ref_netloc_path in pred_netloc_path`` on the raw strings, so
    ``/order_id/5`` also matches ``/order_id/55`` and a reference can match inside another
    host's path. Here the netloc must be the same text and the reference's raw path
    segments must begin the page's: the same page, or one under it
    (``/order_id/5/key/ab12/``, Magento's admin keys), not ``/order_id/55``. Whatever this
    accepts WebArena accepts: no case folding, default port or percent-decoding that
    WebArena does not do. The query rule is WebArena's (every reference parameter has one
    of the references' values among the page's), and, as there, scheme and fragment are
    ignored.
    """
    rule = task["eval"].get("url_note", "GOLD in PRED")
    if rule != "GOLD in PRED":
        raise errors.SpecError(f"task {task['task_id']}: unknown url_note {rule!r}")
    pred_netloc, pred_path, pred_query = _parse_url(page_url)
    ref_paths, ref_queries = [], collections.defaultdict(set)
    for ref in task["eval"]["reference_url"].split(" |OR| "):
        netloc, path, query = _parse_url(ref)
        ref_paths.append((netloc, path))
        for k, vs in query.items():
            ref_queries[k].update(vs)
    base_score = float(any(netloc == pred_netloc and pred_path[:len(path)] == path for netloc, path in ref_paths))
    query_score = 1.0
    for k, values in ref_queries.items():
        query_score *= float(any(v in pred_query.get(k, []) for v in values))
    return base_score * query_score


SETTLE_S = 3.0  # WebArena's HTMLContentEvaluator sleeps 3 s after each goto, before reading


def program_html(task: dict[str, Any], context: Any, page: Any) -> tuple[float, list[dict[str, Any]]]:
    """Check each target of ``eval.program_html`` in the episode's browser context.

    As WebArena's ``HTMLContentEvaluator``: a target with a URL opens it (``goto``, then
    ``SETTLE_S`` for the page's scripts to fill it in) and later targets' ``last`` and
    ``__last_url__`` mean the page the previous target opened. The pages are opened in new
    tabs of the episode's context, so the agent's own page stays as it was left.
    """
    score, report, current = 1.0, [], page
    try:
        for target in task["eval"]["program_html"]:
            probe, entry = _open_target(task, target, context, current)
            if probe is not current and probe is not None:
                if current is not page:
                    current.close()
                current = probe
            if entry is None:
                entry = _check_target(task, target, current)
            report.append(entry)
            score *= entry["score"]
    finally:
        if current is not page:
            current.close()
    return score, report


# Chromium's network errors for a site that cannot be reached at all (down, not listening,
# unresolvable): the infrastructure's, whatever the episode did
UNREACHABLE = ("ERR_CONNECTION_REFUSED", "ERR_CONNECTION_RESET", "ERR_CONNECTION_CLOSED", "ERR_CONNECTION_FAILED",
               "ERR_CONNECTION_TIMED_OUT", "ERR_TIMED_OUT", "ERR_NAME_NOT_RESOLVED", "ERR_ADDRESS_UNREACHABLE",
               "ERR_INTERNET_DISCONNECTED", "ERR_EMPTY_RESPONSE", "ERR_PROXY_CONNECTION_FAILED")


def _open_target(task: dict[str, Any], target: dict[str, Any], context: Any,
                 current: Any) -> tuple[Any, dict[str, Any] | None]:
    """The page a target reads (``current`` for ``last``), or ``None`` and a failed entry
    when the page does not load because of what it serves now (a redirect loop, an
    aborted load: the site's state after the episode, the policy's doing). A site that
    cannot be reached, a load that times out or a browser that went away raise
    ``InfraError``; a page named after the agent's last URL that does not load always fails
    the target (the agent went somewhere wrong)."""
    from playwright.sync_api import Error
    from playwright.sync_api import TimeoutError as PWTimeout

    url = str(target.get("url", "last"))
    from_agent = url.startswith("func:") and helpers.LAST_URL in url
    if url.startswith("func:"):
        url = str(helpers.call(url.removeprefix("func:"), last_url=current.url, page=current))
    if url == "last":
        return current, None
    probe = context.new_page()
    try:
        probe.goto(url, wait_until="load", timeout=30_000)
        probe.wait_for_timeout(SETTLE_S * 1000)
    except Error as exc:
        probe.close()
        infra = is_browser_gone(exc) or (not from_agent and (
            isinstance(exc, PWTimeout) or any(code in str(exc) for code in UNREACHABLE)))
        if infra:
            raise errors.InfraError(f"program_html could not open {url}: {exc}") from exc
        why = "the page the agent's last URL names" if from_agent else "the target page"
        return None, {"url": url, "locator": str(target.get("locator", ""))[:200], "score": 0.0,
                      "error": f"{why} did not load: {exc}"[:500]}
    return probe, None


def _check_target(task: dict[str, Any], target: dict[str, Any], page: Any) -> dict[str, Any]:
    locator = str(target.get("locator", ""))
    selected = html.unescape(_select(page, locator, target))
    required = target.get("required_contents") or {}
    if "exact_match" in required:
        s = exact_match(str(required["exact_match"]), selected)
    elif "must_include" in required:
        s = 1.0
        for content in required["must_include"]:
            s *= float(any(must_include(alt, selected) for alt in str(content).split(" |OR| ")))
    else:
        raise errors.SpecError(f"task {task['task_id']}: required_contents needs exact_match or must_include")
    return {"url": page.url, "locator": locator[:200], "score": s, "found": selected[:300]}


def _select(page: Any, locator: str, target: dict[str, Any]) -> str:
    from playwright.sync_api import Error

    if not locator.strip():
        return str(page.content())
    if locator.startswith(("document.", "[...document.")):
        try:  # as WebArena: the first prep action that fails ends the preparation
            for prep in target.get("prep_actions", []):
                page.evaluate(f"() => {prep}")
        except Error:
            pass
        try:
            return str(page.evaluate(f"() => {locator}"))  # str(None) is 'None', as there
        except Error:
            return ""  # the element is not there: WebArena scores the page as wrong
    if locator.startswith("func:"):
        return str(helpers.call(locator.removeprefix("func:"), last_url=page.url, page=page))
    raise errors.SpecError(f"Unknown program_html locator {locator[:100]!r}")


def evaluate(task: dict[str, Any], *, answer: str, context: Any, page: Any,
             judge: JudgeConfig) -> tuple[float, dict[str, Any]]:
    """The product of the task's evaluators, and what each gave."""
    score, details = 1.0, dict[str, Any]()
    for kind in task["eval"]["eval_types"]:
        if kind == "string_match":
            s, details["string_match"] = string_match(task, answer, judge)
        elif kind == "url_match":
            s = url_match(task, page.url)
            details["url_match"] = s
        else:
            s, details["program_html"] = program_html(task, context, page)
        score *= s
    return score, details
