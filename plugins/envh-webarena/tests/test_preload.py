"""The context made ahead has the next episode's task page loaded (spare.py): a reset of the
same task only seeds and starts the episode. These tests check that this changes nothing
an episode can see: seeds give the same instance as a page loaded at reset, the preloaded
page ran no episode code, another task or a dead preloaded page gets a context made on the
spot, and the episode before cannot reach the page preloaded for the one after it."""

from __future__ import annotations

import os
import re
import time

import pytest
from envh import TaskRef
from procgroup import renderers, socket_inodes

pytestmark = pytest.mark.timeout(300)

MODES = ("preloaded", "made ahead, blank", "made at reset")


def _ref(name: str) -> TaskRef:
    return TaskRef(suite="miniwob", instance_id=name)


@pytest.fixture
def runtime():
    from envh_webarena.runtime import shared_runtime

    rt = shared_runtime()
    yield rt
    rt.make_ahead = rt.preload = True


def _mode(runtime, mode: str) -> None:
    runtime.make_ahead = mode != "made at reset"
    runtime.preload = mode == "preloaded"


def _without_port(text: str) -> str:
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)


@pytest.mark.parametrize("task,seeds", [("click-checkboxes", (5, 11)), ("flight.AA", (3,))])
def test_a_seed_gives_the_same_instance_on_a_preloaded_page(runtime, task, seeds) -> None:
    """Observation (goal, tree, bids) of a seeded reset: equal whether the task page was
    preloaded (and, for flight.AA, its form's files prefetched), made ahead blank or loaded
    at reset; and the preloaded mode really took preloaded pages."""
    from envh_webarena.miniwob import MiniwobEnv

    env = MiniwobEnv(tasks=[task])
    texts: dict[tuple[str, int], str] = {}
    try:
        for mode in MODES:
            _mode(runtime, mode)
            for _ in range(2):  # the next reset is of this mode's kind (a task repeated: preloaded)
                env.reset(task=_ref(task), seed=0)
            for seed in seeds:
                hits = runtime.preload_hits
                obs = env.reset(task=_ref(task), seed=seed).observation
                assert env.session.preloaded is (mode == "preloaded")
                assert runtime.preload_hits == hits + (mode == "preloaded")
                texts[mode, seed] = obs.text
    finally:
        env.close()
    for seed in seeds:
        assert texts["preloaded", seed] == texts["made ahead, blank", seed] == texts["made at reset", seed]
    if len(seeds) > 1:
        assert texts["preloaded", seeds[0]] != texts["preloaded", seeds[1]]


EPISODE_STATE = """() => ({timer: core.EP_TIMER, start: core.ept0, episodes: WOB_EPISODE_ID,
  cover: core.cover_div === null ? null : core.cover_div.style.display, done: WOB_DONE_GLOBAL,
  nonce: window.__envhEpisode === undefined ? null : window.__envhEpisode, random: typeof Math.random})"""


def test_the_preloaded_page_ran_no_episode_code(runtime) -> None:
    """The page waiting in the spare shows MiniWoB's START cover and nothing else: no
    episode clock, no draw, no nonce; the episode that takes it has all three."""
    from envh_webarena.miniwob import MiniwobEnv

    env = MiniwobEnv(tasks=["click-button"])
    try:
        env.reset(task=_ref("click-button"), seed=1)
        env.reset(task=_ref("click-button"), seed=1)  # a task repeated: its page is preloaded
        spare = runtime._spare
        assert spare is not None and spare.url and spare.url.endswith("/miniwob/click-button.html")
        _, page = spare.future.result()
        idle = runtime._driver.call(page.evaluate, EPISODE_STATE)
        assert idle == {"timer": None, "start": None, "episodes": 0, "cover": "block", "done": False,
                        "nonce": None, "random": "function"}
        env.reset(task=_ref("click-button"), seed=1)
        assert env.session.preloaded and env.session.page == runtime._driver.wrap(page)
        started = env.session.page.evaluate(EPISODE_STATE)
        assert started["timer"] is not None and started["start"] and started["cover"] == "none"
        assert started["nonce"] == env._nonce
    finally:
        env.close()


def test_another_task_gets_a_context_made_on_the_spot(runtime) -> None:
    """A reset of another task than the preloaded one: the spare is thrown away (and
    closed), the episode's page is loaded at reset and plays the asked task and seed."""
    from envh_webarena.miniwob import MiniwobEnv

    runtime.preload = False
    reference = MiniwobEnv(tasks=["enter-text"])
    expected = _without_port(reference.reset(task=_ref("enter-text"), seed=7).observation.text)
    reference.close()
    runtime.preload = True
    env = MiniwobEnv(tasks=["click-button", "enter-text"])
    try:
        env.reset(task=_ref("click-button"), seed=1)
        env.reset(task=_ref("click-button"), seed=1)
        assert runtime._spare.url.endswith("/click-button.html")
        discarded = runtime._driver.wrap(runtime._spare.future.result()[0])
        hits, preloaded = runtime.spare_hits, runtime.preload_hits
        obs = env.reset(task=_ref("enter-text"), seed=7).observation
        assert not env.session.preloaded and runtime.spare_hits == hits and runtime.preload_hits == preloaded
        assert _without_port(obs.text) == expected
        deadline = time.monotonic() + 10  # closed in the background
        while discarded in runtime.browser().contexts and time.monotonic() < deadline:
            time.sleep(0.05)
        assert discarded not in runtime.browser().contexts
        # after a miss, the next spare is blank (a task switch loads nothing for nothing) and
        # serves the reset; once the task repeats, its page is preloaded again
        assert runtime._spare.url is None
        hits = runtime.spare_hits
        obs = env.reset(task=_ref("enter-text"), seed=7).observation
        assert runtime.spare_hits == hits + 1 and not env.session.preloaded
        assert _without_port(obs.text) == expected
        assert runtime._spare.url.endswith("/enter-text.html")
        obs = env.reset(task=_ref("enter-text"), seed=7).observation
        assert env.session.preloaded and _without_port(obs.text) == expected
    finally:
        env.close()


def test_tasks_taking_turns_get_blank_spares_not_wasted_loads(runtime) -> None:
    """Resets alternating two tasks: after the first preloaded page goes unused, the spares
    are blank and every one is taken (none thrown away); a task repeated is preloaded."""
    from envh_webarena.miniwob import MiniwobEnv

    env = MiniwobEnv(tasks=["click-button", "enter-text"])
    try:
        for name in ("click-button", "click-button", "enter-text"):
            env.reset(task=_ref(name), seed=1)
        hits = runtime.spare_hits
        for i, name in enumerate(["click-button", "enter-text"] * 2):
            assert runtime._spare.url is None
            env.reset(task=_ref(name), seed=i)
            assert not env.session.preloaded and env.goal
        assert runtime.spare_hits == hits + 4
        env.reset(task=_ref("enter-text"), seed=9)  # repeated
        assert runtime._spare.url.endswith("/enter-text.html")
        env.reset(task=_ref("enter-text"), seed=9)
        assert env.session.preloaded
    finally:
        env.close()


def test_a_preload_that_fails_to_load_is_not_used(runtime) -> None:
    """The page to preload answers 404: the spare is not used, the reset loads its task
    itself and plays it."""
    from envh_webarena.miniwob import MiniwobEnv, task_server

    class Missing(MiniwobEnv):
        def _preload_url(self, task):
            return f"{task_server().url}/no-such-page.html"

    env = Missing(tasks=["click-button"])
    try:
        for _ in range(2):
            env.reset(task=_ref("click-button"), seed=1)
        assert runtime._spare.url.endswith("/no-such-page.html")
        hits = runtime.spare_hits
        obs = env.reset(task=_ref("click-button"), seed=1).observation
        assert runtime.spare_hits == hits and not env.session.preloaded
        assert "Click on the" in obs.text and env.session.page.url.endswith("/click-button.html")
    finally:
        env.close()


READ_TRACES = """async () => ({
  local: localStorage.length, session: sessionStorage.length, cookie: document.cookie,
  idb: (await indexedDB.databases()).length, caches: (await caches.keys()).length,
  name: window.name, history: history.length, opener: window.opener !== null })"""
LEAVE_TRACES = """async () => {
  localStorage.setItem('left', 'one'); sessionStorage.setItem('left', 'one');
  document.cookie = 'left=one; path=/';
  await new Promise((ok, bad) => { const r = indexedDB.open('left', 1);
    r.onupgradeneeded = () => r.result.createObjectStore('s'); r.onsuccess = () => ok(); r.onerror = bad; });
  await caches.open('left');
  new BroadcastChannel('left').postMessage('one');
  window.name = 'one';
  return window.open(location.href, 'envh-next') !== null;
}"""


def test_the_episode_before_cannot_reach_the_preloaded_page(runtime) -> None:
    """Episode one runs on the same origin as the page preloaded for episode two and leaves
    every trace it can (storage, cookies, a named window of the task's URL, a broadcast):
    episode two's page reads as clean as one loaded into a context made at reset."""
    from envh_webarena.miniwob import MiniwobEnv

    env = MiniwobEnv(tasks=["click-button"])
    try:
        env.reset(task=_ref("click-button"), seed=1)
        env.reset(task=_ref("click-button"), seed=1)  # a task repeated: its page is preloaded
        assert runtime._spare is not None and runtime._spare.url
        assert env.session.page.evaluate(LEAVE_TRACES)  # episode one's own page, during its turn
        assert env.session.page.evaluate(READ_TRACES)["local"] == 1  # the traces are there
        env.reset(task=_ref("click-button"), seed=1)
        assert env.session.preloaded and len(env.session.pages) == 1
        clean = {"local": 0, "session": 0, "cookie": "", "idb": 0, "caches": 0, "name": "", "history": 2,
                 "opener": False}
        assert env.session.page.evaluate(READ_TRACES) == clean
        runtime.make_ahead = False  # the control: a context made at reset reads the same
        env.reset(task=_ref("click-button"), seed=1)
        assert not env.session.preloaded and env.session.page.evaluate(READ_TRACES) == clean
    finally:
        env.close()


def test_a_preloaded_page_whose_renderer_died_is_replaced(runtime) -> None:
    """The preloaded page's renderer killed while it waits: the next reset plays the asked
    seed on a page loaded at reset, not an error and not the dead page."""
    from envh_webarena.miniwob import MiniwobEnv

    runtime.make_ahead = False
    reference = MiniwobEnv(tasks=["enter-text"])
    expected = _without_port(reference.reset(task=_ref("enter-text"), seed=4).observation.text)
    runtime.make_ahead = True
    env = MiniwobEnv(tasks=["enter-text"])
    try:
        runtime.make_ahead = False
        for _ in range(2):  # no spare yet: its renderers come next (and the task repeats)
            env.reset(task=_ref("enter-text"), seed=2)
        before = renderers(runtime.pid)
        runtime.make_ahead = True
        runtime.make_spare(env._preload_url(_ref("enter-text")))  # as the reset does at its end
        assert runtime._spare.url and runtime._spare.future.result()  # loaded: its renderer is up
        new = renderers(runtime.pid) - before
        assert new
        for pid in new:
            os.kill(pid, 9)
        time.sleep(0.5)  # nothing calls Playwright meanwhile: the crash is news only at the reset
        assert env.session.page.evaluate("() => 2") == 2  # the live episode's page is untouched
        hits = runtime.spare_hits
        obs = env.reset(task=_ref("enter-text"), seed=4).observation
        assert runtime.spare_hits == hits and not env.session.preloaded
        assert _without_port(obs.text) == expected
    finally:
        env.close()


def test_the_runtime_works_beside_a_sync_playwright_in_the_same_thread() -> None:
    """A sync Playwright open in this thread (as the ui tests keep one for a module) does not
    stop the browser runtime, and the runtime does not stop it: each has its own loop."""
    from envh_webarena.miniwob import MiniwobEnv
    from envh_webarena.runtime import CHROMIUM_ARGS, chromium_path, shared_runtime
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        other = pw.chromium.launch(executable_path=chromium_path(), args=list(CHROMIUM_ARGS))
        page = other.new_page()
        env = MiniwobEnv(tasks=["click-button"])
        try:
            obs = env.reset(task=_ref("click-button"), seed=3).observation
            assert "Click on the" in obs.text and shared_runtime().alive()
            page.set_content("<title>sync</title>")
            assert page.title() == "sync"
        finally:
            env.close()
            other.close()


def test_the_runtime_uses_only_playwrights_public_api() -> None:
    """No reach into Playwright's implementation (a release may move it): the spare and the
    sync calls go through ``playwright.async_api`` only."""
    import envh_webarena

    root = os.path.dirname(envh_webarena.__file__)
    private = re.compile(r"_impl_obj|playwright\._impl|\._sync\(|\._loop\b|_sync_base|from_impl")
    found = []
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    found += [f"{name}:{i}" for i, line in enumerate(f, 1) if private.search(line)]
    assert not found


def test_a_dead_driver_thread_is_an_infra_error_then_the_next_reset_works(runtime) -> None:
    """The thread running Playwright's loop ends (a callback raised SystemExit): the next
    step is an InfraError within the hang timeout, not a wait for ever, and the next reset
    starts a new driver and browser."""
    from envh import Action, errors
    from envh_webarena.miniwob import MiniwobEnv

    env = MiniwobEnv(tasks=["click-button"], hang_timeout_s=10)
    try:
        env.reset(task=_ref("click-button"), seed=1)
        driver, pid = runtime._driver, runtime.pid

        def boom() -> None:
            raise SystemExit("the loop's thread ends here")

        driver.loop.call_soon_threadsafe(boom)
        driver.thread.join(5)
        assert not driver.thread.is_alive()
        start = time.monotonic()
        with pytest.raises(errors.InfraError):
            env.step(Action(tool="noop", args={}))
        assert time.monotonic() - start < 10
        obs = env.reset(task=_ref("click-button"), seed=1).observation
        assert "Click on the" in obs.text and runtime._driver is not driver and runtime.pid != pid
        assert _gone_within(pid, 10)  # the old browser: stopped by the relaunch
    finally:
        env.close()


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        from envh_webarena.runtime import _start_time

        if _start_time(pid) is None:  # gone, or a zombie until Playwright's driver reaps it
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _listening_inodes() -> set[str]:
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                for line in list(f)[1:]:
                    fields = line.split()
                    if fields[3] == "0A":  # LISTEN
                        out.add(fields[9])
        except OSError:
            continue
    return out


def test_the_browser_opens_no_devtools_port(runtime) -> None:
    """No process of the runtime's browser listens on a TCP port (Playwright talks to it
    over a pipe): another local user or process cannot drive it. The control: with the
    opt-in DevTools port the same scan finds it, a policy's goto to it is refused under
    each spelling of loopback, and observations read over it equal those read without."""
    from envh import Action
    from envh_webarena.miniwob import MiniwobEnv, task_server

    env = MiniwobEnv(tasks=["click-button"])
    try:
        plain = env.reset(task=_ref("click-button"), seed=3).observation.text
        assert runtime.devtools_port is None and env.session.port is None
        assert socket_inodes(runtime.pid) and not socket_inodes(runtime.pid) & _listening_inodes()
        runtime.devtools_tcp = True
        runtime.kill()  # the next reset launches a browser with the port
        for _ in range(2):
            over_tcp = env.reset(task=_ref("click-button"), seed=3).observation.text
        port = env.session.port
        assert port and port == runtime.devtools_port
        assert socket_inodes(runtime.pid) & _listening_inodes()
        assert next(iter(env.session._cdp.values()))[1] is not None  # read over its own connection
        assert _without_port(over_tcp) == _without_port(plain)
        for host in ("127.0.0.1", "localhost", "[::1]", "2130706433", "127.1"):
            resp = env.step(Action(tool="goto", args={"url": f"http://{host}:{port}/json/list"}))
            assert resp.info["error"]["type"] == "action_failed", host
            assert "DevTools" in resp.info["error"]["message"] and "devtools/page" not in resp.observation.text
        resp = env.step(Action(tool="goto", args={"url": f"{task_server().url}/miniwob/click-button.html"}))
        assert not resp.info.get("error") and env.session.page.url.endswith("/click-button.html")
    finally:
        env.close()
        if runtime.devtools_tcp:
            runtime.devtools_tcp = False
            runtime.kill()


def test_a_client_gone_mid_answer_prints_nothing(capsys) -> None:
    """A page closed while the task server answers it (a spare thrown away mid-load) is no
    traceback on stderr; any other server error still is (the control)."""
    from envh_webarena.miniwob import task_server

    httpd = task_server().httpd
    for exc, shown in ((BrokenPipeError(32, "Broken pipe"), False), (ConnectionResetError(104, "reset"), False),
                       (ValueError("a real bug"), True)):
        try:
            raise exc
        except Exception:  # noqa: BLE001 - handle_error reads the exception being handled
            httpd.handle_error(None, ("127.0.0.1", 1))
        err = capsys.readouterr().err
        assert (type(exc).__name__ in err) is shown, err
