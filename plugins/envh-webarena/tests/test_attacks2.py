"""Attacks on the browser bridges, second round: each test pins a behaviour that was found
broken (F1..F9) or unguarded (F10: a mutation removing it left the whole suite green).
Loopback only (servers on 127.0.0.1).

F1 MiniWoB partial credit for a wrong answer is not success; F2 a WebShop purchase counts
when the server gets it; F3 malformed WebArena eval blocks are SpecErrors; F4 malformed
config files and fields are SpecErrors; F5 a page URL cannot break a func: template; F6
malformed WebShop data is an EnvError; F7 the memory cap stops a page going past it; F8 a
popup flood is an observation; F9 a page cannot redirect a bid; F10 the MiniWoB clock.

Third round: G1 a page named after the agent's last URL that does not load fails the
target, not an InfraError; G2 func: calls are checked when the task is made; G3 an iframe
going away moves no other frame's bids; G4 a bid inside a closed shadow root is not shown;
G5 blank must_include strings are SpecErrors; G6 WebShop purchase records end with their
episode. Not fixed, documented: a page that spins its renderer is an InfraError once the
hang watchdog kills the browser (tested in test_attacks.py)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from envh import Action, TaskRef, errors


def A(tool: str, **args: object) -> Action:  # noqa: N802
    return Action(tool=tool, args=args)


PAGES = {
    "/": "<title>home</title><p>home page</p>",
    # F8: a page that opens many windows at one click (Playwright disables the popup blocker)
    "/popups": "<title>popups</title><button onclick='for(let i=0;i<200;i++) window.open(\"/\")'>pop</button>",
    # F9b: a page cloning an element (cloneNode copies the bid attribute), as list templates do
    "/clone": """<title>clone</title><button id=orig onclick="const c = this.cloneNode(true);
c.textContent = 'copy'; c.onclick = () => { document.title = 'COPY'; }; document.body.appendChild(c);">orig</button>""",
    # F9: the page copies the bid the runtime gave the real button onto a trap placed before it
    "/hijack": """<title>hijack</title>
<button id=trap onclick="document.title='TRAP'" style="position:absolute;left:0;top:40px">trap</button>
<button id=real onclick="document.title='REAL'">real</button>
<script>
const real = document.getElementById('real'), trap = document.getElementById('trap');
new MutationObserver(() => { const b = real.getAttribute('bid');
  if (b !== null && trap.getAttribute('bid') !== b) trap.setAttribute('bid', b); }).observe(real, {attributes: true});
</script>""",
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


# a program_html target on the page WebArena's own template names after the agent's last URL
_LAST_URL_EVAL = {"eval_types": ["program_html"], "program_html": [{
    "url": "func:reddit_get_post_url('__last_url__')", "locator": "",
    "required_contents": {"must_include": ["never there"]}}]}


@contextlib.contextmanager
def _page_episode(url: str) -> Iterator[tuple[Any, str]]:
    """A WebArena episode on one local page: the env and its first observation's text."""
    env = _wa([_task(1, url)])
    try:
        yield env, env.reset(task=_wa_ref(1)).observation.text
    finally:
        env.close()



# --------------------------------------------------------------------------------------
# F1 (high): MiniWoB success = raw reward > 0 counts partial credit for a WRONG answer as
# a success: click-checkboxes submitted with nothing checked (seed 8: 2 of 6 boxes wanted,
# raw 0.33), find-greatest with the smallest card (raw 0.1). MiniWoB's own binary reward
# (miniwob.reward.get_binary_reward) is success iff raw_reward == 1.
# --------------------------------------------------------------------------------------
def test_f1_miniwob_partial_credit_for_a_wrong_answer_is_not_success() -> None:
    import re

    from envh_webarena.axtree import find_bid
    from envh_webarena.miniwob import MiniwobEnv

    env = MiniwobEnv(tasks=["click-checkboxes", "find-greatest"], max_steps=None)
    try:
        obs = env.reset(task=TaskRef(suite="miniwob", instance_id="click-checkboxes"), seed=8).observation
        assert obs.data["goal"] != "Select nothing and click Submit."
        resp = env.step(A("click", bid=find_bid(obs.text, "button", "Submit")))  # nothing checked
        assert resp.terminated
        assert not env.evaluate().success, "submitting no box when boxes are wanted is a wrong answer"

        obs = env.reset(task=TaskRef(suite="miniwob", instance_id="find-greatest"), seed=0).observation
        cards = re.findall(r"\[(\d+)\] StaticText '(\d+)'", obs.text)
        smallest = min(cards, key=lambda c: int(c[1]))[0]
        text = env.step(A("click", bid=smallest)).observation.text
        resp = env.step(A("click", bid=find_bid(text, "button", "Submit")))
        assert resp.terminated
        assert not env.evaluate().success, "picking the smallest card is a wrong answer (raw 0.1)"
    finally:
        env.close()


# --------------------------------------------------------------------------------------
# F2 (medium): WebShop browser mode reads the purchase only in _after_action, which is
# skipped when the action reported an error. A Buy Now whose done page is slower than the
# action timeout (Playwright's click waits for the navigation it started) is reported as
# "click timed out", and if that was the last step evaluate() says "not purchased" while
# the page shows the score page.
# --------------------------------------------------------------------------------------
def test_f2_webshop_browser_purchase_on_a_slow_done_page_is_counted(webshop_data) -> None:
    from envh_webarena.axtree import find_bid
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="browser", data=webshop_data, max_steps=2)
    site = env.site
    original = site.render

    def slow(route, **kw):
        if route.kind == "done":
            time.sleep(4)  # a done page slower than the 3 s action timeout (a loaded machine)
        return original(route, **kw)

    site.render = slow
    try:
        goals = site.catalogue.goals
        i = next(i for i, g in enumerate(goals) if g["asin"] == "B0TSHIRT01")
        env.reset(task=TaskRef(suite="webshop", split="test", instance_id=str(i)))
        options = "%7B%22color%22%3A%20%22navy%20blue%22%2C%20%22size%22%3A%20%22large%22%7D"
        text = env.step(A("goto", url=f"{env._server().url}/item_page/fixed_{i}/B0TSHIRT01/x/1/{options}")
                        ).observation.text
        env.step(A("click", bid=find_bid(text, "button", "Buy Now")))
        assert "/done/" in env.get_env_state()["url"]  # the purchase did happen
        verdict = env.evaluate()
        assert verdict.metrics["purchased"] and verdict.success
    finally:
        site.render = original
        env.close()


def test_f2b_a_purchase_counts_when_the_server_gets_it_and_only_for_its_episode(webshop_data) -> None:
    """The done page never arrives within the step (8 s; the action timeout is 3 s): the
    server got the Buy Now, so the step ends the episode with the purchase. A second episode
    of the same goal in the same process (another browser context) did not buy anything."""
    from envh_webarena.axtree import find_bid
    from envh_webarena.webshop.bridge import make_webshop

    buyer = make_webshop(mode="browser", data=webshop_data, max_steps=5)
    other = make_webshop(mode="browser", data=webshop_data, max_steps=5)
    site = buyer.site
    assert other.site is site  # one site a process: the case where episodes could be confused
    original = site.render

    def slow(route, **kw):
        if route.kind == "done":
            time.sleep(8)
        return original(route, **kw)

    site.render = slow
    try:
        i = next(i for i, g in enumerate(site.catalogue.goals) if g["asin"] == "B0TSHIRT01")
        ref = TaskRef(suite="webshop", split="test", instance_id=str(i))
        buyer.reset(task=ref)
        other.reset(task=ref)
        options = "%7B%22color%22%3A%20%22navy%20blue%22%2C%20%22size%22%3A%20%22large%22%7D"
        text = buyer.step(A("goto", url=f"{buyer._server().url}/item_page/fixed_{i}/B0TSHIRT01/x/1/{options}")
                          ).observation.text
        resp = buyer.step(A("click", bid=find_bid(text, "button", "Buy Now")))
        assert resp.terminated and resp.reward == 1.0
        assert buyer.evaluate().success and buyer.evaluate().metrics["purchased"]
        assert not other.evaluate().metrics["purchased"] and not other.evaluate().success
        assert not other.step(A("noop")).terminated
    finally:
        site.render = original
        buyer.close()
        other.close()


# --------------------------------------------------------------------------------------
# F3 (medium): malformed eval blocks pass check_task and grade silently: an empty
# reference_answers / must_include / program_html list is a success for any answer, and a
# must_include written as a string is split into characters ("apple" matches "pale").
# They should be SpecErrors when the bridge is made.
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("ev", [
    {"eval_types": ["string_match"], "reference_answers": {}},
    {"eval_types": ["string_match"], "reference_answers": {"must_include": []}},
    {"eval_types": ["string_match"], "reference_answers": {"must_include": "apple"}},
    {"eval_types": ["string_match"], "reference_answers": {"must_include": None}},
    {"eval_types": ["string_match"], "reference_answers": {"fuzzy_match": ""}},
    {"eval_types": ["program_html"], "program_html": []},
    {"eval_types": ["program_html"], "program_html": ["not an object"]},
    {"eval_types": ["program_html"], "program_html": [
        {"url": "last", "locator": "", "required_contents": {"must_include": "home"}}]},
], ids=["empty-answers", "empty-must-include", "string-must-include", "null-must-include", "empty-fuzzy",
        "empty-program-html", "program-html-target-str", "program-html-must-include-str"])
def test_f3_malformed_eval_blocks_are_spec_errors(ev: dict[str, Any]) -> None:
    with pytest.raises(errors.SpecError):
        _wa([_task(1, "http://127.0.0.1:9/", ev)])


def test_f3_string_must_include_does_not_match_by_characters(pages) -> None:
    """The silent-wrong-reward half of F3, played: must_include "apple", answer "pale"."""
    try:
        env = _wa([_task(1, f"{pages}/", {"eval_types": ["string_match"],
                                          "reference_answers": {"must_include": "apple"}})])
    except errors.SpecError:
        return  # refused when made: fine
    try:
        env.reset(task=_wa_ref(1))
        env.step(A("stop", answer="pale"))
        assert not env.evaluate().success
    finally:
        env.close()


# --------------------------------------------------------------------------------------
# F4 (low): config files and fields of the wrong shape raise untyped exceptions
# (JSONDecodeError, IsADirectoryError, UnicodeDecodeError, AttributeError, TypeError), and a
# wrong viewport_size / geolocation is reported as an InfraError (a dead browser: the pool
# retries it) although it is the task config's fault.
# --------------------------------------------------------------------------------------
def test_f4_unreadable_config_files_are_spec_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    for name in ("bad.json", "dir.json", "bin.json"):
        with pytest.raises(errors.SpecError):
            _wa([], config_files=str(tmp_path / name))


def test_f4_wrongly_typed_config_fields_are_spec_errors(pages) -> None:
    with pytest.raises(errors.SpecError):
        _wa([_task(1, f"{pages}/")], sites=["shopping"])  # type: ignore[arg-type]
    for extra in ({"viewport_size": "big"}, {"geolocation": {"lat": 1}},
                  {"require_login": True, "storage_state": {"cookies": []}}):
        try:
            env = _wa([_task(1, f"{pages}/", **extra)])
        except errors.SpecError:
            continue  # refused when made: fine
        try:
            with pytest.raises(errors.SpecError):  # not InfraError, not TypeError
                env.reset(task=_wa_ref(1))
        finally:
            env.close()


# --------------------------------------------------------------------------------------
# F5 (medium): helpers.call substitutes the agent's page URL as text, and then replaces
# '__last_url__' again inside the literal it just inserted: a page URL containing
# '__last_url__' makes WebArena's own `func:reddit_get_post_url('__last_url__')` a syntax
# error, so evaluate() raises SpecError (blaming the task) instead of grading: the policy
# can turn any such episode into an env_error with no verdict.
# --------------------------------------------------------------------------------------
def test_f5_page_url_cannot_break_a_func_template(pages) -> None:
    from envh_webarena.webarena import helpers

    url = "http://127.0.0.1:1/f/books/__last_url__/"
    assert helpers.call("reddit_get_post_url('__last_url__')", last_url=url, page=None) == url
    env = _wa([_task(1, f"{pages}/", _LAST_URL_EVAL)])
    try:
        env.reset(task=_wa_ref(1))
        env.step(A("goto", url=f"{pages}/f/x/__last_url__/"))
        verdict = env.evaluate()  # a verdict, not SpecError
        assert not verdict.success
    finally:
        env.close()


# --------------------------------------------------------------------------------------
# F6 (low/medium): WebShop data files of the wrong shape raise AttributeError / KeyError /
# TypeError / ValueError from the loader instead of EnvError, and instruction_options
# written as a string is split into one-letter goal options (silently wrong reward).
# --------------------------------------------------------------------------------------
def _mutated(tmp_path: Path, prefix: str, fn) -> str:
    from envh_webarena.demo.webshop_catalogue import write_catalogue

    folder = write_catalogue(tmp_path)
    path = next(p for p in Path(folder).iterdir() if p.name.startswith(prefix))
    path.write_text(json.dumps(fn(json.loads(path.read_text()))))
    return str(folder)


@pytest.mark.parametrize(("prefix", "fn"), [
    ("items_shuffle", lambda d: [1, 2, 3]),
    ("items_shuffle", lambda d: [dict(x, customization_options={"color": [{"nope": 1}]}) for x in d]),
    ("items_shuffle", lambda d: [dict(x, name=5) for x in d]),
    ("items_shuffle", lambda d: []),
    ("items_human_ins", lambda d: [1]),
    ("items_human_ins", lambda d: {k: [{"instruction_attributes": ["x"]}] for k in d}),
    ("items_human_ins", lambda d: {k: [dict(i, instruction_options="large") for i in v] for k, v in d.items()}),
    ("items_ins_v2", lambda d: {k: [1] for k in d}),
], ids=["items-not-objects", "option-without-value", "name-int", "no-items", "human-list",
        "instruction-missing", "instruction-options-str", "attributes-list"])
def test_f6_malformed_webshop_data_is_an_env_error(tmp_path: Path, prefix: str, fn) -> None:
    from envh_webarena.webshop import data as wsdata

    folder = _mutated(tmp_path, prefix, fn)
    with pytest.raises(errors.EnvError):
        wsdata.load(folder)


# --------------------------------------------------------------------------------------
# F7 (medium): --memory-mb sets RLIMIT_DATA, which is per process: Chromium and each of its
# renderers get the whole cap, so a worker's browser is not bounded in sum (four pages of
# 800 MB under a 2 GiB cap all succeed). The README and --help now say so; what the cap
# does do is stop one page (one renderer) going past it: that is tested here.
# --------------------------------------------------------------------------------------
_CAP_CHILD = textwrap.dedent("""
    import os, resource, sys
    cap = 2048 << 20
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    from http.server import BaseHTTPRequestHandler
    from envh_webarena.httpserve import LocalServer
    PAGE = (b"<title>m</title><button onclick='window.a=[];for(let i=0;i<2600;i++)"
            b"{window.a.push(new Uint8Array(1<<20).fill(1))};document.title=\\"allocated\\"'>alloc</button>")
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_GET(self):
            self.send_response(200); self.send_header("Content-Length", str(len(PAGE))); self.end_headers()
            self.wfile.write(PAGE)
    s = LocalServer(H)
    from envh import Action, TaskRef
    from envh_webarena.axtree import find_bid
    from envh_webarena.webarena.bridge import WebArenaEnv
    task = {"task_id": 1, "sites": [], "start_url": s.url + "/", "intent": "m", "require_login": False,
            "eval": {"eval_types": ["url_match"], "reference_url": s.url}}
    env = WebArenaEnv(tasks=[task], max_steps=None)
    text = env.reset(task=TaskRef(suite="webarena", split="test", instance_id="1")).observation.text
    try:
        env.step(Action(tool="click", args={"bid": find_bid(text, "button", "alloc")}))
        print(env.get_env_state()["title"])
    except Exception as exc:  # the renderer died: an InfraError
        print(type(exc).__name__)
    env.close()
""")


@pytest.mark.timeout(60)
def test_f7_memory_cap_stops_a_page_allocating_past_it() -> None:
    out = subprocess.run([sys.executable, "-c", _CAP_CHILD], capture_output=True, text=True, timeout=55,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"})
    assert out.returncode == 0, out.stderr[-2000:]
    # 2600 MiB in one page under a 2048 MiB cap: the allocation fails in the page (its
    # script stops before setting the title) or the renderer dies (InfraError)
    assert out.stdout.strip().splitlines()[-1] in ("m", "InfraError"), out.stdout[-500:]


# --------------------------------------------------------------------------------------
# F8 (low): a page that opens 200 windows at one click ends the episode as an InfraError
# ("Could not read the page": the focused popup is still loading after 5 s on 2 cores),
# i.e. the page, not the browser, is blamed as infrastructure and the pool replays it.
# --------------------------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_f8_a_popup_flood_is_an_observation_not_an_infra_error(pages) -> None:
    from envh_webarena.axtree import find_bid

    with _page_episode(f"{pages}/popups") as (env, text):
        resp = env.step(A("click", bid=find_bid(text, "button", "pop")))  # was an InfraError
        assert len(resp.observation.text) < 10_000


# --------------------------------------------------------------------------------------
# F9 (low): the runtime keeps bid attributes a page wrote (only their shape is checked), so
# a page can copy the bid the runtime gave one element onto another placed before it in
# the DOM: the policy clicks the bid it was shown for "real" and the trap is clicked.
# --------------------------------------------------------------------------------------
def test_f9_a_page_cannot_redirect_a_bid_to_another_element(pages) -> None:
    from envh_webarena.axtree import find_bid

    with _page_episode(f"{pages}/hijack") as (env, text):
        resp = env.step(A("click", bid=find_bid(text, "button", "real")))
        # the page keeps copying the bid: the click must not land on the trap; refusing the
        # now ambiguous bid (an error observation) is the answer
        assert env.get_env_state()["title"] != "TRAP"
        assert env.get_env_state()["title"] == "REAL" or "names 2 elements" in resp.info["error"]["message"]


def test_f9b_a_cloned_element_gets_a_bid_of_its_own(pages) -> None:
    from envh_webarena.axtree import find_bid

    with _page_episode(f"{pages}/clone") as (env, text):
        orig = find_bid(text, "button", "orig")
        text = env.step(A("click", bid=orig)).observation.text
        copy = find_bid(text, "button", "copy")
        assert copy != orig and find_bid(text, "button", "orig") == orig  # the original keeps its bid
        resp = env.step(A("click", bid=copy))
        assert not resp.info.get("error") and env.get_env_state()["title"] == "COPY"


# --------------------------------------------------------------------------------------
# F10 (guard): MiniWoB's 10 s episode clock is lifted at start. Removing
# `core.EPISODE_MAX_TIME = ...` from miniwob._START_JS left the whole suite green, while a
# policy that thinks 10.5 s then lost the episode (its click scored 0, not 1).
# --------------------------------------------------------------------------------------
def test_f10_guard_miniwob_episode_clock_is_lifted() -> None:
    from envh_webarena.miniwob import MiniwobEnv

    env = MiniwobEnv(tasks=["click-button"], max_steps=None)
    try:
        env.reset(task=TaskRef(suite="miniwob", instance_id="click-button"), seed=3)
        limit = env.session.page.evaluate("() => core.EPISODE_MAX_TIME")
        assert limit >= 3_600_000, limit  # at least an hour: a slow policy does not lose by time
    finally:
        env.close()


# --------------------------------------------------------------------------------------
# G1 (medium): a program_html target whose url is a func: template of the agent's page
# (WebArena's `func:reddit_get_post_url('__last_url__')`) is opened in a new page; when the
# agent ended on a page that did not load (an error page: page.url is
# chrome-error://chromewebdata/), that goto fails and evaluate() raises InfraError ("dead
# browser": the pool replays the episode) instead of grading it a failure. The policy
# chooses where it ends, so it can turn any such failing episode into an infra error.
# --------------------------------------------------------------------------------------
def test_g1_an_agent_page_that_did_not_load_is_a_failure_not_an_infra_error(pages) -> None:
    env = _wa([_task(1, f"{pages}/", _LAST_URL_EVAL)])
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

    with _page_episode(f"{pages}/frames") as (env, text):
        two = find_bid(text, "button", "two")
        text = env.step(A("click", bid=find_bid(text, "button", "shift"))).observation.text
        shown = re.findall(r"\[(\w+)\] button", text)
        assert len(shown) == len(set(shown)), f"a bid names two elements in the tree: {shown}"
        two_now = find_bid(text, "button", "two")
        resp = env.step(A("click", bid=two_now))
        assert not resp.info.get("error"), resp.info
        assert env.get_env_state()["title"] == "TWO", (two, two_now, env.get_env_state()["title"])


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

    with _page_episode(f"{pages}/shadow") as (env, text):
        shown = re.findall(r"\[(\w+)\] button", text)
        assert len(shown) == len(set(shown)), f"a bid names two elements in the tree: {shown}\n{text}"
        try:
            confirm = find_bid(text, "button", "Confirm")
        except LookupError:
            return  # not offered with a bid: fine
        env.step(A("click", bid=confirm))
        assert env.get_env_state()["title"] != "LIGHT"


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
