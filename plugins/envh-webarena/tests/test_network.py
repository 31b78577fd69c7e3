"""What a page can reach besides its own document: no service worker, no DNS query for any
host but the allowed ones, and iframes of other sites (their own renderer) in the tree."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from envh import Action
from envh_webarena.axtree import find_bid

pytestmark = pytest.mark.timeout(180)


def site(route: Callable[[str], tuple[str, str]]) -> Any:
    """A LocalServer answering every GET with ``route(path) -> (content type, body)``."""
    from envh_webarena.httpserve import LocalServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            ctype, body = route(self.path)
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return LocalServer(Handler)


SW_PAGE = "<html><body>service worker test</body></html>"
SW_JS = "self.addEventListener('fetch', e => { if (e.request.url.endsWith('/hello')) " \
        "e.respondWith(new Response('from the worker')); });"
REGISTER = """async () => {
  const late = new Promise(r => setTimeout(() => r('late'), 2000));
  try { await Promise.race([navigator.serviceWorker.register('/sw.js'), late]); }
  catch (e) { return 'refused'; }
  return (await Promise.race([navigator.serviceWorker.ready, late])) === 'late' ? 'not ready' : 'ready';
}"""


@pytest.fixture(scope="module")
def sw_site() -> Iterator[Any]:
    routes = {"/sw.js": ("text/javascript", SW_JS), "/hello": ("text/plain", "from the server")}
    server = site(lambda path: routes.get(path, ("text/html", SW_PAGE)))
    yield server
    server.close()


def _worker_serves(context: Any, url: str) -> tuple[str, bool, str]:
    page = context.new_page() if not context.pages else context.pages[0]
    page.goto(url, wait_until="load")
    state = page.evaluate(REGISTER)
    page.reload(wait_until="load")
    controlled = page.evaluate("() => !!navigator.serviceWorker.controller")
    return state, controlled, page.evaluate("async () => (await fetch('/hello')).text()")


def test_episode_contexts_block_service_workers(sw_site) -> None:
    from envh_webarena.runtime import shared_runtime
    from envh_webarena.session import BrowserSession

    runtime = shared_runtime()
    control = runtime.new_context(service_workers="allow")  # the same page where workers are allowed
    try:
        assert _worker_serves(control, f"{sw_site.url}/") == ("ready", True, "from the worker")
    finally:
        control.close()
    for _ in range(2):  # a context made at reset and one made ahead
        session = BrowserSession(runtime)
        try:
            state, controlled, hello = _worker_serves(session.context, f"{sw_site.url}/")
            assert state != "ready" and not controlled and hello == "from the server"
        finally:
            runtime.make_spare()
            session.close()


LEAK_PAGE = """<html><head>
<link rel="dns-prefetch" href="//dns-prefetch.envh-leak.example">
<link rel="preconnect" href="http://preconnect.envh-leak.example">
<link rel="prefetch" href="http://prefetch.envh-leak.example/next.html">
</head><body><a href="http://anchor.envh-leak.example/">a link</a>
<img src="http://img.envh-leak.example/a.png"><img src="http://allowed.envh-test.invalid/b.png">
<script>fetch('http://fetch.envh-leak.example/x').catch(() => {});
new WebSocket('ws://ws.envh-leak.example/');</script></body></html>"""


def _resolver_jobs(netlog: str) -> set[str]:
    """Hosts Chromium started a resolver job for (a DNS or system lookup), from its net log."""
    with open(netlog, encoding="utf-8") as f:
        text = f.read().rstrip()
    log = json.loads(text if text.endswith("}") else text.rstrip(",") + "]}")
    job = log["constants"]["logEventTypes"]["HOST_RESOLVER_MANAGER_JOB"]
    return {e["params"]["host"] for e in log["events"]
            if e["type"] == job and "host" in e.get("params", {})}


def test_no_dns_lookup_but_for_allowed_hosts(tmp_path) -> None:
    """DNS hints, preconnect, prefetch, images, fetch and WebSocket to other hosts start no
    lookup, from an episode's context nor from one without the proxy (the resolver rules
    hold alone); an allowed host name does (the control: the log shows lookups)."""
    from envh_webarena.runtime import DEAD_PROXY, BrowserRuntime

    server = site(lambda path: ("text/html", LEAK_PAGE))
    netlog = str(tmp_path / "netlog.json")
    failures: list[BaseException] = []

    def visit() -> None:  # a thread of its own: one sync Playwright per thread, and the shared one is taken
        runtime = BrowserRuntime(extra_hosts=("allowed.envh-test.invalid",),
                                 extra_args=(f"--log-net-log={netlog}", "--net-log-capture-mode=Everything"))
        try:
            context, page, _, _ = runtime.open_context()
            # and a context with no proxy at all: the resolver rules hold without it
            direct = runtime.new_context(proxy={"server": DEAD_PROXY, "bypass": "*"})
            for p in (page, direct.new_page()):
                p.goto(f"{server.url}/", wait_until="load")
                p.hover("a")
            time.sleep(2)
            context.close()
            direct.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)
        finally:
            runtime.close()  # flushes the net log

    thread = threading.Thread(target=visit)
    thread.start()
    thread.join(120)
    server.close()
    assert not thread.is_alive() and not failures, failures
    jobs = _resolver_jobs(netlog)
    assert any("allowed.envh-test.invalid" in h for h in jobs), jobs
    assert not [h for h in jobs if "allowed.envh-test.invalid" not in h], jobs


FRAME_PAGE = """<html><body><p id=said>nothing yet</p><input aria-label='Inner box'>
<button onclick="document.getElementById('said').textContent = 'said ' + document.querySelector('input').value">
Say it</button></body></html>"""


@pytest.fixture(scope="module")
def framed() -> Iterator[tuple[Any, Any]]:
    inner = site(lambda path: ("text/html", FRAME_PAGE))
    outer = site(lambda path: ("text/html", (
        f"<html><body><h1>Outer</h1><iframe title=same-site src='http://127.0.0.1:{inner.port}/'></iframe>"
        f"<iframe title=cross-site src='http://localhost:{inner.port}/'></iframe></body></html>")))
    yield outer, inner
    outer.close()
    inner.close()


def test_iframes_of_other_origins_are_in_the_tree_and_take_actions(framed) -> None:
    """Two origins on 127.0.0.1 (other port: same site, same renderer) and localhost (another
    site: Chromium puts it in its own renderer process) both show their content with
    frame-prefixed bids, and actions in them work."""
    from envh_webarena.miniwob import MiniwobEnv

    outer, inner = framed
    with MiniwobEnv(tasks=["click-button"]) as env:
        env.reset(task=None, seed=0)
        obs = env.step(Action(tool="goto", args={"url": f"{outer.url}/"})).observation
        page = env.session.page
        cross = next(f for f in page.frames if f.url.startswith("http://localhost:"))
        page.context.new_cdp_session(cross).detach()  # its own renderer: only such frames take a session
        same = next(f for f in page.frames if f.url.startswith(f"http://127.0.0.1:{inner.port}"))
        with pytest.raises(Exception, match="(?i)not.*oopif|separate|part of"):
            page.context.new_cdp_session(same)
        boxes = [b for b in re.findall(r"\[(\w+)\] textbox 'Inner box'", obs.text)]
        assert len(boxes) == 2 and all(b[0].isalpha() for b in boxes), obs.text
        for box, word in zip(boxes, ("same", "cross")):
            env.step(Action(tool="fill", args={"bid": box, "value": word}))
        buttons = re.findall(r"\[(\w+)\] button 'Say it'", obs.text)
        for button in buttons:
            resp = env.step(Action(tool="click", args={"bid": button}))
            assert not resp.info.get("error"), resp.info
        text = resp.observation.text
        assert "said same" in text and "said cross" in text, text
        assert find_bid(text, "heading", "Outer")





def test_a_new_allowed_host_name_relaunches_the_browser_with_it() -> None:
    """Resolver rules are fixed at launch: a host name allowed later relaunches the browser
    with a rule letting it through (and later calls keep that browser)."""
    from envh_webarena.runtime import BrowserRuntime

    seen: list[object] = []

    def play() -> None:
        runtime = BrowserRuntime(extra_hosts=("10.0.0.7:8080",))
        try:
            runtime.browser()
            seen.append(_cmdline(runtime.pid))
            runtime.extra_hosts += ("wa-shop.envh-test.invalid:7770",)
            runtime.browser()
            seen.extend([runtime.launches, _cmdline(runtime.pid)])
            runtime.browser()
            seen.append(runtime.launches)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            seen.append(exc)
        finally:
            runtime.close()

    thread = threading.Thread(target=play)
    thread.start()
    thread.join(120)
    first, launches, second, again = seen
    assert "MAP * ~NOTFOUND" in first and "EXCLUDE 10.0.0.7" in first and "wa-shop" not in first
    assert launches == 2 and "EXCLUDE wa-shop.envh-test.invalid" in second and again == 2


def _cmdline(pid: int | None) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


def test_a_flood_of_cross_site_frames_keeps_the_observation_bounded(framed) -> None:
    """Forty cross-site iframes: the step answers in bounded time, the tree is cut at
    max_chars, and the first out-of-process frames are read."""
    from envh_webarena.axtree import MAX_REMOTE_FRAMES
    from envh_webarena.miniwob import MiniwobEnv

    outer, inner = framed
    flood = site(lambda path: ("text/html", "<html><body>" + "".join(
        f"<iframe src='http://localhost:{inner.port}/?{i}'></iframe>" for i in range(40)) + "</body></html>"))
    try:
        with MiniwobEnv(tasks=["click-button"], max_chars=3000) as env:
            env.reset(task=None, seed=0)
            start = time.monotonic()
            obs = env.step(Action(tool="goto", args={"url": f"{flood.url}/"})).observation
            elapsed = time.monotonic() - start
            shown = len(re.findall(r"textbox 'Inner box'", obs.data["axtree"]))
            assert 1 <= shown <= MAX_REMOTE_FRAMES and len(obs.data["axtree"]) <= 3100, obs.data["axtree"][-300:]
            assert elapsed < 60
    finally:
        flood.close()
