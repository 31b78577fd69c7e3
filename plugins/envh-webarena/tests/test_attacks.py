"""Hostile inputs: selector injection, odd numbers, tab abuse, evaluator code injection,
oversized pages, slow-loris POSTs. Each is an error observation or a typed error, never a
crash, a hang or an escape."""

from __future__ import annotations

import math
import socket
import time

import pytest
from envh import Action, TaskRef, errors
from envh_webarena.demo.tasks import TASKS

CLICK = TaskRef(suite="miniwob", instance_id="click-button")


def A(tool: str, **args: object) -> Action:  # noqa: N802
    return Action(tool=tool, args=args)


@pytest.fixture(scope="module")
def env():
    from envh_webarena.miniwob import MiniwobEnv

    e = MiniwobEnv(tasks=["click-button"], max_steps=None)
    yield e
    e.close()


def test_bid_selector_injection_is_refused(env) -> None:
    env.reset(task=CLICK, seed=1)
    for bid in ['1"], button, [x="', "*", "13 >> nth=0", "", "a b"]:
        resp = env.step(A("click", bid=bid))
        assert resp.info["error"]["type"] == "action_failed" and not resp.terminated, bid
    assert not env.get_env_state()["task_done"]


def test_odd_numbers_and_tab_abuse_are_error_observations(env) -> None:
    env.reset(task=CLICK, seed=1)
    assert env.step(A("scroll", delta_x=math.nan, delta_y=0)).info["error"]
    assert not env.step(A("scroll", delta_x=1e300, delta_y=-1e300)).info.get("error")  # clamped
    assert env.step(A("tab_focus", index=7)).info["error"]["message"].startswith("No tab 7")
    assert "last open tab" in env.step(A("tab_close")).info["error"]["message"]
    for _ in range(3):
        env.step(A("new_tab"))
    state = env.get_env_state()
    assert len(state["tabs"]) == 4 and state["tabs"][3]["active"]
    assert not env.step(A("tab_focus", index=0)).info.get("error")
    assert env.get_env_state()["url"].endswith("click-button.html")


def test_tab_flood_keeps_the_observation_bounded(env) -> None:
    env.reset(task=CLICK, seed=1)
    for _ in range(14):
        obs = env.step(A("new_tab")).observation
    assert len(env.get_env_state()["tabs"]) > 10
    assert "more" in obs.text and len(obs.text) < 10_000


def test_program_html_func_cannot_run_code(demo_sites, tmp_path) -> None:
    from envh_webarena.webarena import helpers

    for bad in ("__import__('os').system('true')", "reddit_get_post_url(__import__('os'))",
                "open('/etc/passwd')", "reddit_get_post_url('x', y=1)", "reddit_get_post_url"):
        with pytest.raises(errors.SpecError):
            helpers.call(bad, last_url="http://127.0.0.1/", page=None)
    hostile = "http://127.0.0.1/f/x/1/'+__import__('os').getcwd()+'"
    out = helpers.call("reddit_get_post_url('__last_url__')", last_url=hostile, page=None)
    assert out == "http://127.0.0.1/f/x/1/"  # the URL stayed a string


def test_webarena_start_url_must_be_http(demo_sites) -> None:
    from envh_webarena.webarena.bridge import WebArenaEnv

    bad = dict(TASKS[3], task_id=99, start_url="file:///etc/passwd")
    env = WebArenaEnv(tasks=[bad], sites=demo_sites["urls"])
    try:
        with pytest.raises(errors.SpecError, match="start_url"):
            env.reset(task=TaskRef(suite="webarena", split="test", instance_id="99"))
    finally:
        env.close()


def test_oversized_page_text_is_bounded(demo_sites) -> None:
    from envh_webarena.webarena.bridge import WebArenaEnv

    env = WebArenaEnv(tasks=TASKS, sites=demo_sites["urls"], max_chars=2000)
    try:
        env.reset(task=TaskRef(suite="webarena", split="test", instance_id="5"))
        resp = env.step(A("goto", url=f"{demo_sites['shop'].url}/catalogsearch/result/?q={'x' * 1900}"))
        assert not resp.info.get("error") and len(resp.observation.text) < 3500
    finally:
        env.close()


def test_slow_post_does_not_hold_the_webshop_server(webshop_data) -> None:
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="browser", data=webshop_data)
    try:
        env.reset(task=TaskRef(suite="webshop", split="test", instance_id="0"))
        url = env._server().url
        host, port = url.split("//")[1].split(":")
        with socket.create_connection((host, int(port))) as slow:
            slow.sendall(b"POST /fixed_0 HTTP/1.1\r\nHost: x\r\nContent-Length: 90000\r\n\r\nsearch_query=a")
            start = time.monotonic()
            obs = env.reset(task=TaskRef(suite="webshop", split="test", instance_id="0")).observation
            assert "Instruction" in obs.text and time.monotonic() - start < 30
    finally:
        env.close()


def test_webshop_forged_routes_are_not_purchases(webshop_data) -> None:
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="browser", data=webshop_data)
    try:
        env.reset(task=TaskRef(suite="webshop", split="test", instance_id="0"))
        base = env._server().url
        for url in (f"{base}/done/fixed_1/B0GREENT05/%7B%7D",  # another session's goal
                    f"{base}/done/fixed_0/B0GREENT05/not-json", f"{base}/item_page/fixed_0/../../etc/1/%7B%7D"):
            resp = env.step(A("goto", url=url))
            assert not resp.terminated and not env.evaluate().metrics["purchased"], url
    finally:
        env.close()


def test_evaluate_leaves_the_policys_tabs_alone(demo_sites, tmp_path) -> None:
    from envh_webarena.webarena.bridge import WebArenaEnv

    env = WebArenaEnv(tasks=TASKS, sites=demo_sites["urls"], auth_dir=str(tmp_path))
    try:
        env.reset(task=TaskRef(suite="webarena", split="test", instance_id="6"))  # program_html opens pages
        env.step(A("new_tab"))
        env.step(A("goto", url=f"{demo_sites['forum'].url}/f/hiking"))
        env.step(A("tab_focus", index=0))
        before = env.get_env_state()["tabs"]
        assert not env.evaluate().success
        obs = env.step(A("noop")).observation
        assert env.get_env_state()["tabs"] == before and obs.data["url"].endswith("/submit")
    finally:
        env.close()


def test_tree_ignores_page_written_bids_and_never_loops() -> None:
    from envh_webarena.axtree import render

    nodes = [{"nodeId": "1", "role": {"value": "RootWebArea"}, "name": {"value": "t"}, "childIds": ["2"]},
             {"nodeId": "2", "parentId": "1", "role": {"value": "button"}, "name": {"value": "x"},
              "childIds": ["1"], "backendDOMNodeId": 5}]  # a cycle back to the root
    dom = {"backendNodeId": 1, "attributes": [],
           "children": [{"backendNodeId": 5, "attributes": ["bid", "x'); evil"]}]}
    text, bids = render(nodes, dom, max_chars=500)
    assert text == "RootWebArea 't'\n\tbutton 'x'" and bids == []


def test_miniwob_other_task_on_the_task_tab_is_not_a_success() -> None:
    """Navigating the task's tab to an easier task on the same server, starting it from its
    START cover and solving it must not count for the task that was set."""
    import re

    from envh_webarena.axtree import find_bid
    from envh_webarena.miniwob import MiniwobEnv

    e = MiniwobEnv(tasks=["enter-password"], max_steps=None)
    try:
        e.reset(task=TaskRef(suite="miniwob", instance_id="enter-password"), seed=3)
        url = e.get_env_state()["url"]
        text = e.step(A("goto", url=re.sub(r"[^/]+\.html.*$", "click-button.html", url))).observation.text
        text = e.step(A("click", bid=find_bid(text, "StaticText", "START"))).observation.text
        word = re.findall(r'Click on the "([^"]+)" button', text)[0]
        resp = e.step(A("click", bid=find_bid(text, "button", word)))
        assert e.get_env_state()["url"].endswith("click-button.html")  # the swap did happen
        assert not resp.reward > 0 and not e.evaluate().success
    finally:
        e.close()


def test_page_webrtc_sends_no_udp_past_the_proxy() -> None:
    """WebRTC's STUN/ICE traffic is UDP and ignores the HTTP proxy that keeps the browser on
    loopback: a page could send packets to any address. A STUN server named on 127.0.0.1
    stands in for an outside host (no traffic leaves the machine): nothing may reach it."""
    from envh_webarena.runtime import shared_runtime

    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(2.5)
    ctx = shared_runtime().new_context()
    try:
        page = ctx.new_page()
        candidates = page.evaluate("""async (port) => {
          const pc = new RTCPeerConnection({iceServers: [{urls: 'stun:127.0.0.1:' + port}]});
          pc.createDataChannel('x');
          await pc.setLocalDescription(await pc.createOffer());
          await new Promise(r => setTimeout(r, 1000));
          return pc.localDescription.sdp.split('\\n').filter(l => l.startsWith('a=candidate'));
        }""", udp.getsockname()[1])
        with pytest.raises(socket.timeout):
            udp.recvfrom(2048)
        assert candidates == []
    finally:
        ctx.close()
        udp.close()


def test_page_script_requests_to_other_hosts_go_to_the_dead_proxy() -> None:
    """fetch, WebSocket and <img> from page JavaScript (not only the policy's goto) are sent
    to the dead proxy, so they fail in the browser without a connection to the host
    (192.0.2.1 is TEST-NET-1: even a broken guard sends nothing anywhere that matters)."""
    from envh_webarena.runtime import shared_runtime

    ctx = shared_runtime().new_context()
    failed: list[tuple[str, str | None]] = []
    ctx.on("requestfailed", lambda r: failed.append((r.url, r.failure)))
    try:
        page = ctx.new_page()
        out = page.evaluate("""async () => {
          const img = new Promise(r => { const i = new Image(); i.onerror = () => r('img failed');
                                         i.onload = () => r('img loaded'); i.src = 'http://192.0.2.1/i.png'; });
          const ws = new Promise(r => { const w = new WebSocket('ws://192.0.2.1/');
                                        w.onerror = () => r('ws failed'); w.onopen = () => r('ws open'); });
          const f = fetch('http://[::ffff:c000:201]/f', {mode: 'no-cors'}).then(() => 'fetch ok', () => 'fetch failed');
          return Promise.all([img, ws, f]);
        }""")
        assert out == ["img failed", "ws failed", "fetch failed"]
        page.wait_for_timeout(100)
        reasons = {u: why for u, why in failed}
        assert reasons["http://192.0.2.1/i.png"] == "net::ERR_PROXY_CONNECTION_FAILED"
        assert reasons["http://[::ffff:c000:201]/f"] == "net::ERR_PROXY_CONNECTION_FAILED"
    finally:
        ctx.close()


def test_webshop_done_url_options_must_be_offered(webshop_data) -> None:
    """A done URL is typed by the policy: an invented option name carrying the wanted value
    must not turn a wrong-size purchase into a success, nor may an unoffered value count."""
    from envh_webarena.webshop.bridge import make_webshop
    from envh_webarena.webshop.site import Route

    env = make_webshop(mode="text", data=webshop_data)
    try:
        goals = env.site.catalogue.goals
        i = next(i for i, g in enumerate(goals) if g["asin"] == "B0TSHIRT01")  # navy blue, large
        buy = lambda **o: env.site.score(Route(kind="done", session=f"fixed_{i}", asin="B0TSHIRT01",  # noqa: E731
                                               options=tuple(sorted(o.items()))))["reward"]
        assert buy(color="navy blue", size="large") == pytest.approx(1.0)
        near = buy(color="navy blue", size="small")
        assert near == pytest.approx(4 / 5)
        assert buy(color="navy blue", size="small", fit="large") == pytest.approx(near)
        assert buy(color="navy blue", size="xxl large") < 1.0
    finally:
        env.close()
