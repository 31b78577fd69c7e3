"""Episodes share a browser, never a context: the context made ahead for the next episode
(spare.py) starts as empty as one made at reset, and nothing reaches it before it is taken."""

from __future__ import annotations

import pytest
from procgroup import renderers

pytestmark = pytest.mark.timeout(180)

LEAVE_TRACES = """async () => {
  localStorage.setItem('left', 'by episode one'); sessionStorage.setItem('left', 'one');
  document.cookie = 'left=one; path=/';
  await new Promise((ok, bad) => { const r = indexedDB.open('left', 1);
    r.onupgradeneeded = () => r.result.createObjectStore('s'); r.onsuccess = () => ok(); r.onerror = bad; });
  await caches.open('left').then(c => c.put('/left', new Response('one')));
  window.name = 'episode one';
  return true;
}"""
READ_TRACES = """async () => ({
  local: localStorage.length, session: sessionStorage.length, cookie: document.cookie,
  idb: (await indexedDB.databases()).length, caches: (await caches.keys()).length,
  name: window.name, history: history.length })"""


def _login(page, shop: str) -> None:
    page.goto(f"{shop}/customer/account/login/")
    page.get_by_label("Email", exact=True).fill("emma.lopez@gmail.com")
    page.get_by_label("Password", exact=True).fill("Password.123")
    page.get_by_role("button", name="Sign In").click()
    page.wait_for_load_state()
    assert "Signed in" in page.content()


def test_context_made_ahead_carries_nothing_over(demo_sites) -> None:
    from envh_webarena.runtime import shared_runtime
    from envh_webarena.session import BrowserSession

    shop = demo_sites["shop"].url
    runtime = shared_runtime()
    one = BrowserSession(runtime)
    _login(one.page, shop)
    one.page.goto(f"{shop}/")
    assert one.page.evaluate(LEAVE_TRACES)
    traces = one.page.evaluate(READ_TRACES)
    assert traces["local"] and traces["idb"] and traces["caches"] and traces["history"] >= 3
    runtime.make_spare()  # as a reset does once its observation is out
    assert runtime._spare is not None
    one.close()
    hits = runtime.spare_hits
    two = BrowserSession(runtime)
    try:
        assert runtime.spare_hits == hits + 1  # the made-ahead context was the one taken
        assert two.context is not one.context and two.page.url == "about:blank"
        assert not two.context.cookies() and len(two.pages) == 1
        two.page.goto(f"{shop}/")
        assert "Signed in" not in two.page.content()
        clean = {"local": 0, "session": 0, "cookie": "", "idb": 0, "caches": 0, "name": ""}
        assert two.page.evaluate(READ_TRACES) == {**clean, "history": 2}  # about:blank, then the shop
        control = runtime.new_context()  # a context made on the spot reads the same
        page = control.new_page()
        page.goto(f"{shop}/")
        assert page.evaluate(READ_TRACES) == {**clean, "history": 2}
        control.close()
    finally:
        two.close()


def test_a_live_episode_cannot_reach_the_next_ones_context(demo_sites) -> None:
    """While episode one runs, the next context is already made: same-origin channels and
    named windows of episode one do not reach it (the control: the same channel does reach
    a second tab of the same episode)."""
    from envh_webarena.runtime import shared_runtime
    from envh_webarena.session import BrowserSession

    shop = demo_sites["shop"].url
    runtime = shared_runtime()
    one = BrowserSession(runtime)
    runtime.make_spare()
    two = BrowserSession(runtime)  # takes the spare while episode one is still open
    try:
        first = one.page
        sibling = one.new_tab()
        listen = "() => { window.__heard = []; new BroadcastChannel('envh').onmessage = e => __heard.push(e.data); " \
                 "addEventListener('storage', e => __heard.push('storage ' + e.key)); }"
        for page in (first, sibling, two.page):
            page.goto(f"{shop}/")
        for page in (sibling, two.page):
            page.evaluate(listen)
        first.evaluate("() => { new BroadcastChannel('envh').postMessage('from one'); "
                              "localStorage.setItem('k', 'v'); window.open('', 'envh-named'); }")
        sibling.wait_for_function("() => __heard.length >= 2", timeout=5000)
        two.page.wait_for_timeout(300)
        # the two events come from different task sources: Chromium orders them either way
        assert sorted(sibling.evaluate("() => __heard")) == ["from one", "storage k"]
        assert two.page.evaluate("() => __heard") == []
        assert len(two.pages) == 1 and two.page.evaluate("() => localStorage.length") == 0
    finally:
        one.close()
        two.close()


def test_a_spare_that_is_not_pristine_or_fits_other_options_is_not_used(demo_sites, tmp_path) -> None:
    """A spare whose page navigated or closed, or made with other options (a storage state),
    is thrown away: the episode gets a context made on the spot, with its own options."""
    import json

    from envh_webarena.aio import unwrap
    from envh_webarena.runtime import shared_runtime
    from envh_webarena.session import BrowserSession

    shop = demo_sites["shop"].url
    runtime = shared_runtime()
    for spoil in ("navigate", "close"):
        runtime.make_spare()
        spare = runtime._spare
        context_raw, page_raw = spare.future.result()  # what only a bug could hold
        if spoil == "navigate":
            runtime._driver.call(page_raw.goto, f"{shop}/")
        else:
            runtime._driver.call(page_raw.close)
        hits = runtime.spare_hits
        session = BrowserSession(runtime)
        try:
            assert runtime.spare_hits == hits and session.page.url == "about:blank"
            assert unwrap(session.context) is not context_raw
        finally:
            session.close()
    # a spare made with the default options is not taken for a context with a storage state
    login = BrowserSession(runtime)
    _login(login.page, shop)
    state = tmp_path / "state.json"
    login.context.storage_state(path=str(state))
    login.close()
    runtime.make_spare()
    hits = runtime.spare_hits
    logged_in = BrowserSession(runtime, storage_state=str(state))
    try:
        assert runtime.spare_hits == hits
        logged_in.page.goto(f"{shop}/")
        assert "Signed in" in logged_in.page.content()
    finally:
        logged_in.close()
    # ... and a spare made for that state is not taken once the file says otherwise
    runtime.make_spare()
    state.write_text(json.dumps({"cookies": [], "origins": []}), encoding="utf-8")
    hits = runtime.spare_hits
    fresh = BrowserSession(runtime, storage_state=str(state))
    try:
        assert runtime.spare_hits == hits
        fresh.page.goto(f"{shop}/")
        assert "Signed in" not in fresh.page.content()
    finally:
        fresh.close()


def test_a_spare_whose_renderer_died_is_replaced(demo_sites) -> None:
    """The made-ahead page's renderer killed (as the OOM killer would) before the reset:
    the episode gets a working context made on the spot, not an error."""
    import os
    import time

    from envh_webarena.runtime import shared_runtime
    from envh_webarena.session import BrowserSession

    runtime = shared_runtime()
    if runtime._spare is not None:  # start from no spare at all
        runtime._spare.discard()
        runtime._spare = None
    first = BrowserSession(runtime)
    first.close()
    before = renderers(runtime.pid)  # type: ignore[arg-type]
    runtime.make_spare()
    runtime._spare.future.result()  # the spare's page exists: its renderer too
    new = renderers(runtime.pid) - before  # type: ignore[arg-type]
    assert new  # the spare page's renderer (and any Chromium started beside it): all killed
    for pid in new:
        os.kill(pid, 9)
    time.sleep(0.5)  # nothing calls Playwright meanwhile: the crash is news only at the reset
    hits = runtime.spare_hits
    session = BrowserSession(runtime)
    try:
        assert runtime.spare_hits == hits
        session.page.goto(f"{demo_sites['shop'].url}/")
        assert session.snapshot(max_chars=2000)["axtree"]
    finally:
        session.close()
