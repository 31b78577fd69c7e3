"""Attacks on the browser bridges, third round (loopback only); each test pins a fix:

G1 a policy-chosen page URL makes a func: program_html target an InfraError at evaluate;
G2 malformed func: templates pass check_task and fail untyped at evaluate;
G3 frame prefixes are frame indexes: an iframe going away makes the bids of the frames
after it unclickable / collide with a new frame's;
G4 a page-written bid inside a closed shadow root names a second element in the tree;
G5 blank must_include strings pass check_task and grade any answer a success;
G6 WebShop purchase records outlive their episode (process-wide, never dropped).
Not fixed, documented: a page that spins its renderer (``while(true){}`` in a handler) is an
InfraError once the hang watchdog kills the browser (tested in test_attacks.py)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from envh import Action, TaskRef, errors


def A(tool: str, **args: object) -> Action:  # noqa: N802
    return Action(tool=tool, args=args)


PAGES = {
    "/": "<title>home</title><p>home page</p>",
    # G3: two same-origin iframes; a button removes the first and adds another at the end
    "/frames": """<title>frames</title>
<button onclick="document.getElementById('f1').remove();
 const f = document.createElement('iframe'); f.srcdoc = '<button onclick=&quot;top.document.title=\\'NEW\\'&quot;>new</button>';
 document.body.appendChild(f);">shift</button>
<iframe id=f1 srcdoc="<button>one</button>"></iframe>
<iframe id=f2 srcdoc="<button onclick=&quot;top.document.title='TWO'&quot;>two</button>"></iframe>""",
    # G4: a closed shadow root (the runtime's marking cannot enter it) holding an element
    # with a bid the page wrote: the light-DOM button gets the same bid from the counter
    "/shadow": """<title>shadow</title><div id=host></div>
<button onclick="document.title='LIGHT'">light</button>
<script>
const root = document.getElementById('host').attachShadow({mode: 'closed'});
root.innerHTML = '<button bid="5" onclick="document.title=\\'CONFIRM\\'">Confirm</button>';
</script>""",
    # G7: a button whose handler never returns (the renderer's main thread spins)
}


class _Pages(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # noqa: D102
        pass

    def do_GET(self) -> None:  # noqa: N802
        body = PAGES.get(self.path.split("?")[0], "<title>any</title><p>any</p>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def pages():
    from envh_webarena.httpserve import LocalServer

    server = LocalServer(_Pages)
    yield server.url
    server.close()


def _task(tid: Any, url: str, ev: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"task_id": tid, "sites": [], "start_url": url, "intent": "probe", "require_login": False,
            "eval": ev if ev is not None else {"eval_types": ["url_match"], "reference_url": url}, **extra}


def _wa(tasks: list[dict[str, Any]], **kw: Any):
    from envh_webarena.webarena.bridge import WebArenaEnv

    return WebArenaEnv(tasks=tasks, max_steps=None, **kw)


def _wa_ref(tid: Any) -> TaskRef:
    return TaskRef(suite="webarena", split="test", instance_id=str(tid))


# --------------------------------------------------------------------------------------
# G1 (medium): a program_html target whose url is a func: template of the agent's page
# (WebArena's `func:reddit_get_post_url('__last_url__')`) is opened in a new page; when the
# agent ended on a page that did not load (an error page: page.url is
# chrome-error://chromewebdata/), that goto fails and evaluate() raises InfraError ("dead
# browser": the pool replays the episode) instead of grading it a failure. The policy
# chooses where it ends, so it can turn any such failing episode into an infra error.
# --------------------------------------------------------------------------------------
def test_g1_an_agent_page_that_did_not_load_is_a_failure_not_an_infra_error(pages) -> None:
    ev = {"eval_types": ["program_html"], "program_html": [{
        "url": "func:reddit_get_post_url('__last_url__')", "locator": "",
        "required_contents": {"must_include": ["never there"]}}]}
    env = _wa([_task(1, f"{pages}/", ev)])
    try:
        env.reset(task=_wa_ref(1))
        env.step(A("goto", url="http://127.0.0.1:1/f/x/1/"))  # refused port: an error page
        verdict = env.evaluate()  # raised InfraError
        assert not verdict.success
    finally:
        env.close()


# --------------------------------------------------------------------------------------
# G2 (low): func: templates are not checked when the bridge is made (check_task passes a
# call that is not even Python, or a helper called with the wrong arguments), and at
# evaluate a wrong arity is a TypeError / AttributeError, not a SpecError naming the task.
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("func", ["func:nosuch(", "func:reddit_get_post_url(1, 2)", "func:reddit_get_post_url()"])
def test_g2_malformed_func_templates_are_spec_errors_when_made(func: str) -> None:
    ev = {"eval_types": ["program_html"], "program_html": [{
        "url": func, "locator": "", "required_contents": {"must_include": ["x"]}}]}
    with pytest.raises(errors.SpecError):
        _wa([_task(1, "http://127.0.0.1:9/", ev)])


@pytest.mark.parametrize("expr", ["reddit_get_post_url(1, 2)", "reddit_get_post_url()", "reddit_get_post_url(1)"])
def test_g2_a_helper_called_wrongly_is_a_spec_error(expr: str) -> None:
    from envh_webarena.webarena import helpers

    with pytest.raises(errors.SpecError):
        helpers.call(expr, last_url="http://127.0.0.1:1/f/a/1/", page=None)


# --------------------------------------------------------------------------------------
# G5 (medium, the F3 class one level down): a must_include list of empty or blank strings
# (or, in program_html, an entry with a blank " |OR| " alternative) passes check_task, and
# "" is in every answer and every page: any answer / any page is a success (played: answer
# "a wrong answer" scored 1.0).
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("ev", [
    {"eval_types": ["string_match"], "reference_answers": {"must_include": [""]}},
    {"eval_types": ["string_match"], "reference_answers": {"must_include": ["  "]}},
    {"eval_types": ["string_match"], "reference_answers": {"must_include": ["apple", ""]}},
    {"eval_types": ["program_html"], "program_html": [
        {"url": "last", "locator": "", "required_contents": {"must_include": [""]}}]},
    # program_html's must_include splits each entry on " |OR| ": a blank alternative matches any page
    {"eval_types": ["program_html"], "program_html": [
        {"url": "last", "locator": "", "required_contents": {"must_include": ["zzz |OR| "]}}]},
], ids=["empty-string", "blank-string", "one-empty-of-two", "program-html-empty-string",
        "program-html-blank-alternative"])
def test_g5_blank_must_include_strings_are_spec_errors(ev: dict[str, Any]) -> None:
    with pytest.raises(errors.SpecError):
        _wa([_task(1, "http://127.0.0.1:9/", ev)])


# --------------------------------------------------------------------------------------
# G3 (medium): a frame's bid prefix is its index in page.frames, read anew at each
# observation and each action, while the bids MARK_JS wrote stay on the elements. When an
# iframe goes away and another comes (an ad slot reloading), the second iframe keeps its
# "b" bids and the new one (index 2 now) is marked "b" too from its own counter: the tree
# shows two [b3] buttons, and clicking the bid shown for "two" clicks "new" (the count
# check is per frame, so nothing is refused). With the iframe only removed, the remaining
# frame's bids name no frame at all ("No element").
# --------------------------------------------------------------------------------------
def test_g3_a_frame_going_away_does_not_move_the_other_frames_bids(pages) -> None:
    import re

    from envh_webarena.axtree import find_bid

    env = _wa([_task(1, f"{pages}/frames")])
    try:
        text = env.reset(task=_wa_ref(1)).observation.text
        two = find_bid(text, "button", "two")
        text = env.step(A("click", bid=find_bid(text, "button", "shift"))).observation.text
        shown = re.findall(r"\[(\w+)\] button", text)
        assert len(shown) == len(set(shown)), f"a bid names two elements in the tree: {shown}"
        two_now = find_bid(text, "button", "two")
        resp = env.step(A("click", bid=two_now))
        assert not resp.info.get("error"), resp.info
        assert env.get_env_state()["title"] == "TWO", (two, two_now, env.get_env_state()["title"])
    finally:
        env.close()


# --------------------------------------------------------------------------------------
# G4 (low): MARK_JS cannot enter a closed shadow root, but Chromium's DOM (pierce) and
# accessibility tree do, and _bid_map keeps any bid of the right shape: a page writes
# bid="5" on a "Confirm" button in a closed shadow root, the light-DOM button "light" gets
# bid 5 from the counter, the tree shows both as [5], and a click on the bid shown for
# "Confirm" clicks "light" (Playwright's locator cannot see closed roots, so the count
# check sees one element). "Each bid names one element" does not hold in the observation.
# --------------------------------------------------------------------------------------
def test_g4_a_bid_in_a_closed_shadow_root_does_not_name_a_second_element(pages) -> None:
    import re

    from envh_webarena.axtree import find_bid

    env = _wa([_task(1, f"{pages}/shadow")])
    try:
        text = env.reset(task=_wa_ref(1)).observation.text
        shown = re.findall(r"\[(\w+)\] button", text)
        assert len(shown) == len(set(shown)), f"a bid names two elements in the tree: {shown}\n{text}"
        try:
            confirm = find_bid(text, "button", "Confirm")
        except LookupError:
            return  # not offered with a bid: fine
        env.step(A("click", bid=confirm))
        assert env.get_env_state()["title"] != "LIGHT"
    finally:
        env.close()


# --------------------------------------------------------------------------------------
# G6 (low): WebshopSite.purchases is process-wide and an entry is dropped only by the next
# reset of the same bridge: close() keeps the episode's own record, and every done URL of
# another session the policy opens (goto /done/fixed_N/...) adds one that nothing drops.
# --------------------------------------------------------------------------------------
def test_g6_webshop_purchase_records_do_not_outlive_their_episode(webshop_data) -> None:
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="browser", data=webshop_data, max_steps=10)
    site = env.site
    try:
        env.reset(task=TaskRef(suite="webshop", split="test", instance_id="0"))
        cookie = env._purchase_key[1]
        base = env._server().url
        for j in range(3):
            env.step(A("goto", url=f"{base}/done/fixed_{9000 + j}/B0TSHIRT01/%7B%7D"))
    finally:
        env.close()
    left = [k for k in site.purchases if k[1] == cookie]
    assert not left, f"records of a closed episode kept: {left}"
