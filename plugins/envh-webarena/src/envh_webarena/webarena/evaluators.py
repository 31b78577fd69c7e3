"""WebArena's evaluators: string_match, url_match and program_html, with WebArena's rules.

* **string_match** on the final answer: ``exact_match`` (after WebArena's cleaning: strip,
  drop one pair of surrounding quotes, lower-case), ``must_include`` (each phrase is a
  substring; a one-character phrase alone must be a whole token, WebArena's guard against
  '0' matching '10') and ``fuzzy_match`` (the LLM judge; ``N/A`` tasks check the
  unachievable reason with ``string_note``).
* **url_match** (``url_note`` "GOLD in PRED"): some reference's host is the page's and its
  path segments begin the page's path, and every reference query parameter has one of its
  values in the page's query (WebArena matches host+path as a substring; see ``url_match``).
* **program_html**: for each target, open its URL (``last``: the agent's page as it is;
  ``func:``: an allowed helper), read the locator (empty: the page's HTML; a
  ``document.…`` expression run in the page after its ``prep_actions``; ``func:``: an
  allowed helper) and require ``exact_match`` or ``must_include`` (``|OR|`` alternatives).

The score is the product over the configured evaluators, as in WebArena. WebArena
``eval()``s the ``func:`` strings; here they are parsed and only the helpers in
``helpers.HELPERS`` can be called, with literal arguments, ``__last_url__`` and ``__page__``.
"""

from __future__ import annotations

import collections
import html
import re
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from envh import errors

from envh_webarena.runtime import is_browser_gone
from envh_webarena.webarena import helpers
from envh_webarena.webarena.judge import JudgeConfig, fuzzy_match, unachievable_match


def clean_answer(answer: str) -> str:
    answer = answer.strip()
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "'\"":
        answer = answer[1:-1]
    return answer.lower()


def exact_match(ref: str, pred: str) -> float:
    return float(clean_answer(pred) == clean_answer(ref))


def _tokens(text: str) -> list[str]:
    # word_tokenize's split for what this guard needs: words, numbers and punctuation apart
    return re.findall(r"\w+|[^\w\s]", text)


def must_include(ref: str, pred: str, *, tokenize: bool = False) -> float:
    ref, pred = clean_answer(ref), clean_answer(pred)
    if tokenize and len(ref) == 1 and len(_tokens(ref)) == 1:
        return float(ref in _tokens(pred))
    return float(ref in pred)


def string_match(task: dict[str, Any], answer: str, judge: JudgeConfig) -> tuple[float, dict[str, Any]]:
    pred = clean_answer(answer)
    score, parts = 1.0, {}
    for approach, value in task["eval"]["reference_answers"].items():
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
        parts[approach] = s
        score *= s
    return score, parts


def _split_url(url: str) -> tuple[str, list[str], dict[str, list[str]]]:
    """Host (lower case, default port dropped), decoded path segments, query parameters."""
    parts = urlsplit(url.strip())
    host = parts.netloc.lower().rsplit("@", 1)[-1]
    for default in (":80", ":443"):
        host = host.removesuffix(default)
    segments = [unquote(s) for s in parts.path.rstrip("/").split("/")]  # '/a//b' is not '/a/b'
    return host, segments, parse_qs(parts.query)


def url_match(task: dict[str, Any], page_url: str) -> float:
    """WebArena's "GOLD in PRED" rule, with the reference's host+path matched by parts.

    WebArena tests ``ref_host_path in pred_host_path`` on strings, so ``/order_id/5`` also
    matches ``/order_id/55`` and a reference can match inside another host's path. Here the
    host must be the same and the reference's path segments must begin the page's path:
    the same page, or one under it (``/order_id/5/key/ab12/``, Magento's admin keys), not
    ``/order_id/55``. The query rule is WebArena's (every reference parameter has one of the
    references' values among the page's), and, as there, the scheme and fragment are ignored.
    """
    rule = task["eval"].get("url_note", "GOLD in PRED")
    if rule != "GOLD in PRED":
        raise errors.SpecError(f"task {task['task_id']}: unknown url_note {rule!r}")
    pred_host, pred_path, pred_query = _split_url(page_url)
    ref_paths, ref_queries = [], collections.defaultdict(set)
    for ref in task["eval"]["reference_url"].split(" |OR| "):
        host, path, query = _split_url(ref)
        ref_paths.append((host, path))
        for k, vs in query.items():
            ref_queries[k].update(vs)
    base_score = float(any(host == pred_host and pred_path[:len(path)] == path for host, path in ref_paths))
    query_score = 1.0
    for k, values in ref_queries.items():
        query_score *= float(any(v in pred_query.get(k, []) for v in values))
    return base_score * query_score


def program_html(task: dict[str, Any], context: Any, page: Any) -> tuple[float, list[dict[str, Any]]]:
    """Check each target of ``eval.program_html`` in the episode's browser context."""
    from playwright.sync_api import Error

    score, report = 1.0, []
    for target in task["eval"]["program_html"]:
        url = str(target.get("url", "last"))
        # a page named after the agent's own last URL: if it does not load, the agent went
        # somewhere wrong (a failed target), not the site being down (an InfraError)
        from_agent = url.startswith("func:") and helpers.LAST_URL in url
        if url.startswith("func:"):
            url = str(helpers.call(url.removeprefix("func:"), last_url=page.url, page=page))
        locator = str(target.get("locator", ""))
        probe = page if url == "last" else context.new_page()
        try:
            if probe is not page:
                try:
                    probe.goto(url, wait_until="load", timeout=30_000)
                except Error as exc:
                    if not from_agent or is_browser_gone(exc):
                        raise errors.InfraError(f"program_html could not open {url}: {exc}") from exc
                    score = 0.0
                    report.append({"url": url, "locator": locator, "score": 0.0,
                                   "error": f"the page the agent's last URL names did not load: {exc}"[:500]})
                    continue
            selected = _select(probe, locator, target)
        finally:
            if probe is not page:
                probe.close()
        selected = html.unescape(selected)
        required = target.get("required_contents") or {}
        if "exact_match" in required:
            s = exact_match(str(required["exact_match"]), selected)
        elif "must_include" in required:
            s = 1.0
            for content in required["must_include"]:
                s *= float(any(must_include(alt, selected) for alt in str(content).split(" |OR| ")))
        else:
            raise errors.SpecError(f"task {task['task_id']}: required_contents needs exact_match or must_include")
        report.append({"url": url, "locator": locator[:200], "score": s, "found": selected[:300]})
        score *= s
    return score, report


def _select(page: Any, locator: str, target: dict[str, Any]) -> str:
    from playwright.sync_api import Error

    if not locator.strip():
        return str(page.content())
    if locator.startswith(("document.", "[...document.")):
        for prep in target.get("prep_actions", []):
            try:
                page.evaluate(f"() => {prep}")
            except Error:
                pass
        try:
            value = page.evaluate(f"() => {locator}")
        except Error:
            return ""  # the element is not there: WebArena scores the page as wrong
        return "" if value is None else str(value)
    if locator.startswith("func:"):
        return str(helpers.call(locator.removeprefix("func:"), last_url=page.url, page=page))
    raise errors.SpecError(f"Unknown program_html locator {locator[:100]!r}")


def evaluate(task: dict[str, Any], *, answer: str, context: Any, page: Any,
             judge: JudgeConfig) -> tuple[float, dict[str, Any]]:
    """The product of the task's evaluators, and what each gave."""
    score, details = 1.0, {}
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
