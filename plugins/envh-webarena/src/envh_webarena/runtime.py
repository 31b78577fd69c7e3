"""The browser runtime the three bridges share: one Chromium per worker, one context per episode.

Chromium is the system build (``/usr/bin/chromium``, or ``$ENVH_CHROMIUM``), launched by
Playwright over a pipe (no DevTools port on the machine), driven through Playwright's public
async API on a thread of its own (``aio.py``), so the next episode's context can be made
while the policy thinks (``spare.py``). The runtime knows the browser's pid, can tell a
dead browser from a policy mistake, and kills only what it started. A reset opens a fresh browser context
(isolated cookies and storage) instead of a browser, so it costs milliseconds, not a launch.

Outbound traffic is pinned to loopback by default: every context goes through a proxy
address that does not exist, with loopback and the configured hosts bypassing it, so a
policy's ``goto`` to any other host fails inside the browser instead of leaving the machine.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

from envh import errors

from envh_webarena.aio import Driver, DriverGone
from envh_webarena.spare import Spare, options_key

CHROMIUM_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run",
    "--disable-dev-shm-usage", "--no-default-browser-check", "--mute-audio",
    # back/forward reload the page: a bfcache restore fires no load event, so waits would stall
    "--disable-features=BackForwardCache",
    # WebRTC sends UDP (STUN/ICE) straight to any address a page names, past the proxy that
    # pins everything else to loopback: allow only proxied WebRTC traffic, i.e. none
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)
# A port nothing listens on: traffic that is not bypassed fails at once.
DEAD_PROXY = "http://127.0.0.1:9"
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def chromium_path() -> str:
    """The Chromium binary: ``$ENVH_CHROMIUM``, else ``/usr/bin/chromium``."""
    path = os.environ.get("ENVH_CHROMIUM") or "/usr/bin/chromium"
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise errors.InfraError(
            f"Chromium not found at {path}. Install it with `apt-get install chromium` "
            "(dev/setup.d/browser.sh) or point ENVH_CHROMIUM at a Chromium binary.")
    return path


class PageHang(errors.InfraError):
    """A call into the browser outlasted its watchdog, which killed the browser: raised as
    an ``InfraError`` everywhere but in a policy's step, where the page the policy brought
    about is what hung (``BrowserBridge`` ends that episode as the policy's failure)."""


class BrowserStall(errors.InfraError):
    """A call into the browser outlasted its watchdog and the browser itself did not answer a
    trivial DevTools call either (the host stalled, not one page): the browser was killed."""


PROBE_S = 2.0  # how long the watchdog waits for the browser to answer before calling it stalled
#: Seconds a call may still take once its watchdog killed the browser (it fails at once when
#: Playwright sees the browser go). Past them its Playwright driver is abandoned
#: (``Driver.abandon``): the call fails and the next episode starts a new driver.
ABANDON_S = 15.0
#: MiB of JavaScript heap a page's renderer may hold (V8's ``--max-old-space-size``); past it
#: that renderer runs out of memory and crashes (``page_crashed``, the policy's failure) while
#: the browser lives on. Chromium's own limit is about 3.5 GiB a renderer: a page filling it
#: with JavaScript arrays kept a 2-core machine's renderer busy for 15 s idle and over 30 s
#: under load, read as a hang. At 1 GiB it crashed in about 4 s (at 512 MiB in about 1 s).
#: 1 GiB is the heap of a browser on a small device, which sites are built to run in; the
#: served benchmarks' sites were not measured against it (raise it with ``page_heap_mb`` or
#: ``$ENVH_PAGE_HEAP_MB``). Memory outside V8's heap is not capped by it: ArrayBuffers,
#: WebAssembly memory and the DOM can still grow until the machine runs short.
PAGE_HEAP_MB = 1024


def _page_heap_mb(value: int | None) -> int:
    if value is None:
        raw = os.environ.get("ENVH_PAGE_HEAP_MB", "")
        try:
            value = int(raw) if raw.strip() else PAGE_HEAP_MB
        except ValueError:
            raise errors.SpecError(f"ENVH_PAGE_HEAP_MB={raw!r} is not a whole number of MiB.") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 16:
        raise errors.SpecError(f"page_heap_mb={value!r}: a page's JavaScript heap needs at least 16 MiB.")
    return value


def _with_heap_cap(extra_args: tuple[str, ...], heap_mb: int) -> list[str]:
    """``extra_args`` with the page heap cap first in their V8 flags. Chromium keeps only the
    last ``--js-flags`` switch (``-js-flags`` too), so a caller's (``--js-flags=--expose-gc``)
    would drop a cap given apart; within one switch V8 takes a flag's last value, so a size
    of the caller's own still wins."""
    cap = f"--max-old-space-size={heap_mb}"
    args = list(extra_args)
    given = [i for i, a in enumerate(args) if a.startswith(("--js-flags=", "-js-flags="))]
    if not given:
        return [f"--js-flags={cap}", *args]
    last = given[-1]
    args[last] = f"--js-flags={cap} {args[last].split('=', 1)[1]}".rstrip()
    return args


def is_browser_gone(exc: BaseException) -> bool:
    """Whether a Playwright error means the browser, context or page died (not a policy mistake)."""
    text = str(exc)
    return any(s in text for s in ("has been closed", "Target closed", "Connection closed",
                                   "Browser closed", "crashed", "Target crashed", "browser has disconnected"))


class BrowserRuntime:
    """One Chromium process and the Playwright connection to it, for one thread.

    :param executable: the Chromium binary (default: ``chromium_path()``).
    :param extra_hosts: hosts (``host`` or ``host:port``) reachable besides loopback.
    :param block_external: route everything else to a dead proxy and resolve no other
        host name (default on).
    :param extra_args: more Chromium switches (``--log-net-log=...`` to see its traffic).
    :param page_heap_mb: JavaScript heap a page's renderer may hold (default ``PAGE_HEAP_MB``,
        or ``$ENVH_PAGE_HEAP_MB``); a page past it crashes, as a page out of memory does.
    :param devtools_tcp: also open a DevTools port on 127.0.0.1, so observations read the
        page over a connection of their own (``rawcdp.py``, about twice as fast). Off by
        default: any local user or process can drive a browser through that port.
    """

    def __init__(self, executable: str | None = None, *, extra_hosts: tuple[str, ...] = (),
                 block_external: bool = True, extra_args: tuple[str, ...] = (), devtools_tcp: bool = False,
                 page_heap_mb: int | None = None) -> None:
        self.executable = executable
        self.page_heap_mb = _page_heap_mb(page_heap_mb)
        self.devtools_tcp = devtools_tcp
        self.extra_hosts = tuple(extra_hosts)
        self.block_external = block_external
        self.extra_args = tuple(extra_args)
        self._resolvable: frozenset[str] = frozenset()
        self.launches = 0
        self.abandon_s = ABANDON_S  # see ABANDON_S
        self._driver: Driver | None = None
        self.devtools_port: int | None = None  # Chromium's DevTools endpoint (127.0.0.1)
        self._browser: Any = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._profile: str | None = None
        self._owner = threading.current_thread()
        self._live: dict[int, int] = {}  # browser pid -> episodes (sessions) open on it
        # browsers replaced by a relaunch while episodes still ran on them: pid -> (process,
        # browser, profile), stopped when their last episode closes
        self._retired: dict[int, tuple[subprocess.Popen[bytes], Any, str | None]] = {}
        self._spare: Spare | None = None
        self.make_ahead = True  # keep a context + page made ahead for the next episode
        self.preload = True  # ... with the page the bridge expects the next episode to start on
        self.spare_hits = 0  # episodes that got a context made ahead
        self.preload_hits = 0  # ... whose page was already loaded
        self._next: tuple[str, dict[str, Any]] | None = None
        self._asked: tuple[str | None, str | None] = (None, None)  # the pages the last two resets asked for
        self._missed = False  # the last preloaded page was for another task than the reset's

    # -- lifecycle ---------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """Pid of the Chromium this runtime started (None before the first launch)."""
        return None if self._proc is None else self._proc.pid

    def alive(self) -> bool:
        return self.is_alive(self._proc, self._browser)

    @staticmethod
    def is_alive(proc: subprocess.Popen[bytes] | None, browser: Any) -> bool:
        """Whether ``proc`` runs and ``browser`` (its connection) is connected."""
        if proc is None or proc.poll() is not None or browser is None:
            return False
        try:
            return bool(browser.is_connected())
        except errors.InfraError:  # the driver's thread ended: the connection is gone
            return False

    def browser(self) -> Any:
        """The connected browser, launched (or relaunched after a death) on demand."""
        if threading.current_thread() is not self._owner:
            raise errors.InfraError("A BrowserRuntime is bound to the thread that made it; "
                                    "use shared_runtime() in each worker thread.")
        if self.block_external and self.alive() and not _host_names(self.extra_hosts) <= self._resolvable:
            self._retire_browser()  # a host name was allowed since the launch: the resolver rules change
        if not self.alive():
            self._stop_browser()
            self._launch()
        return self._browser

    def _network_args(self) -> list[str]:
        """Pin the browser itself to loopback too: its own requests (the default context:
        update and sign-in services) go to the dead proxy, and no host name resolves but
        localhost and the allowed ones, so neither a page's DNS hints nor the browser send a
        DNS query anywhere (Chromium 156 has no switch that turns DNS prefetch off)."""
        if not self.block_external:
            return []
        names = _host_names(self.extra_hosts)
        self._resolvable = names
        # the rules map IP literals too: loopback and allowed addresses are excluded by name
        allowed = {"localhost", "127.0.0.1", "[::1]", *(_host_part(h) for h in self.extra_hosts)}
        rules = ", ".join(["MAP * ~NOTFOUND", *(f"EXCLUDE {n}" for n in sorted(allowed))])
        bypass = ";".join([*LOOPBACK, *self.extra_hosts])
        return [f"--host-resolver-rules={rules}", f"--proxy-server={DEAD_PROXY}", f"--proxy-bypass-list={bypass}"]

    def _launch(self) -> None:
        """Start Chromium through Playwright's ``launch``: it talks to the browser over a pipe
        (``--remote-debugging-pipe``), so no DevTools port is open on the machine, where
        every local user and process could drive the browser (read files through it, or
        another worker's pages). The browser's pid is found by a marker switch of its own."""
        from playwright.async_api import Error

        exe = self.executable or chromium_path()
        marker = f"--envh-runtime={secrets.token_hex(8)}"
        args = [*CHROMIUM_ARGS, *self._network_args(), *_with_heap_cap(self.extra_args, self.page_heap_mb), marker]
        if self.devtools_tcp:  # opt-in: a DevTools port on 127.0.0.1 for the observation's reads
            args += ["--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"]
        try:
            if self._driver is not None and not self._driver.alive():
                self._driver.stop()  # its thread ended: nothing reaches the browser through it
                self._driver = None
            if self._driver is None:
                try:
                    self._driver = Driver()
                except Exception as exc:  # noqa: BLE001 - Playwright raises a bare Exception when node dies
                    raise errors.InfraError(f"Playwright's driver did not start: {exc}{_memory_hint()}") from exc
            # Playwright starts it in a process group of its own (killpg reaches the
            # renderers, nothing else) and kills it when its driver exits with this process
            self._browser = self._driver.playwright.chromium.launch(
                executable_path=exe, args=args, headless=True, timeout=30_000,
                handle_sigint=False, handle_sigterm=False, handle_sighup=False)
        except Error as exc:
            raise errors.InfraError(f"Chromium ({exe}) did not start: {exc}{_memory_hint()}") from exc
        pid = _find_browser(marker)
        if pid is None:
            try:
                self._browser.close()
            finally:
                self._browser = None
            raise errors.InfraError(f"Chromium ({exe}) started but its process was not found.")
        self._proc = _Process(pid)
        self.devtools_port = _devtools_port(pid) if self.devtools_tcp else None
        self.launches += 1

    def _options(self, options: dict[str, Any]) -> dict[str, Any]:
        options = dict(options)
        # a service worker outlives its page and serves from its own cache: no episode gets one
        options.setdefault("service_workers", "block")
        # nothing a page downloads is kept (no disk or memory a page can fill): a download
        # is refused and the policy told so (``BrowserSession.take_refused_downloads``)
        options.setdefault("accept_downloads", False)
        if self.block_external:
            bypass = ",".join([*LOOPBACK, *self.extra_hosts])
            options.setdefault("proxy", {"server": DEAD_PROXY, "bypass": bypass})
        state = options.get("storage_state")
        if isinstance(state, (str, os.PathLike)):  # by content: a spare must not keep a stale login
            try:
                with open(state, encoding="utf-8") as f:
                    options["storage_state"] = json.load(f)
            except (OSError, ValueError) as exc:
                raise errors.InfraError(f"Cannot read the storage state file {state}: {exc}") from exc
        return options

    def new_context(self, **options: Any) -> Any:
        """A fresh browser context (isolated cookies and storage) on the live browser."""
        from playwright.async_api import Error

        browser = self.browser()
        try:
            return browser.new_context(**self._options(options))
        except Error as exc:
            raise errors.InfraError(f"Chromium (pid {self.pid}) could not open a context: {exc}") from exc

    def _retire_browser(self) -> None:
        """Leave the browser to the episodes still open on it (another bridge's, in this
        thread) and forget it here: the next ``browser()`` launches a new one, and this one
        is stopped when its last episode closes (``close_context``)."""
        if not self._live.get(self.pid or -1):
            self._stop_browser()
            return
        spare, self._spare = self._spare, None
        if spare is not None:
            spare.discard()
        assert self._proc is not None
        self._retired[self._proc.pid] = (self._proc, self._browser, self._profile)
        self._proc, self._browser, self._profile = None, None, None

    def open_context(self, *, preload: str | None = None, **options: Any) -> tuple[Any, Any, bool, Any]:
        """A fresh context and its first page for an episode, whether that page is already
        at ``preload``, and the page's CDP channels if they were opened ahead (else None):
        the spare made ahead when it was made with the same options and preloaded with the
        same URL (``spare.py``), else a context made now (its page blank). The next
        ``make_spare`` makes one like it."""
        from playwright.async_api import Error

        browser = self.browser()
        options = self._options(options)
        key = options_key(options)
        spare, self._spare = self._spare, None
        got, preloaded, channels = None, False, None
        wanted = preload if self.preload else None
        self._asked = (self._asked[1], wanted)
        if spare is not None:
            # a blank page serves any reset (it loads its page itself); a loaded one only its own
            fits = spare.url is None or spare.url == wanted
            if spare.url is not None:
                self._missed = spare.url != wanted
            if self.make_ahead and spare.key == key and spare.browser is browser and fits:
                got = spare.take()
            else:
                spare.discard()
        if got is not None:
            assert spare is not None
            preloaded, channels = spare.url is not None, spare.channels
            self.spare_hits += 1
            self.preload_hits += preloaded
        else:
            try:
                context = browser.new_context(**options)
                got = context, context.new_page()
            except Error as exc:
                raise errors.InfraError(f"Chromium (pid {self.pid}) could not open a context: {exc}") from exc
        self._next = (key, options)
        assert self._proc is not None
        self._live[self._proc.pid] = self._live.get(self._proc.pid, 0) + 1
        return got[0], got[1], preloaded, channels

    def make_spare(self, preload: str | None = None, *, prefetch: list[str] | tuple[str, ...] = (),
                   warm: str | None = None) -> None:
        """Start making the next episode's context and page (with ``preload`` loaded in it,
        the files ``prefetch`` names fetched into its cache and the ``warm`` step run in it,
        if given and ``self.preload``) on the driver's loop and return at once (``spare.py``):
        called once an episode's first observation is out, so the work overlaps the
        policy's turn instead of the next reset."""
        if not self.make_ahead or self._spare is not None or self._next is None or not self.alive():
            return
        assert self._driver is not None
        key, options = self._next
        # after a preloaded page went unused, preload again only once a task repeats (resets
        # that switch tasks would otherwise load a page for nothing each time)
        if not self.preload or (self._missed and self._asked[0] != self._asked[1]):
            preload, prefetch = None, ()
        self._spare = Spare(self._driver, self._browser, key, options, preload, tuple(prefetch) if preload else (),
                            port=self.devtools_port, warm=warm if preload else None)

    def close_context(self, context: Any, pid: int | None = None) -> None:
        """Close an episode's context (opened on the browser with ``pid``) without waiting
        for it: the browser disposes of it while the next episode starts; nothing can reach
        it any more. A replaced browser whose last episode this was is stopped."""
        from envh_webarena.aio import unwrap

        if pid is not None and pid in self._live:
            self._live[pid] -= 1
            if self._live[pid] <= 0:
                del self._live[pid]
                if pid in self._retired:
                    _stop(*self._retired.pop(pid))
                    return
        if self._driver is None:
            return
        raw = unwrap(context)
        try:
            self._driver.submit(lambda: _close_quietly(raw))
        except (RuntimeError, errors.InfraError):  # the driver is gone: the context went with the browser
            pass

    def kill(self) -> None:
        """Kill the browser process (SIGKILL); the next ``browser()`` relaunches it."""
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=10)

    @contextlib.contextmanager
    def watchdog(self, seconds: float, what: str, proc: subprocess.Popen[bytes] | None = None,
                 browser: Any = None) -> Iterator[None]:
        """Bound a call into the browser: past ``seconds`` the browser is killed from a
        timer thread (a page spinning in JavaScript blocks ``evaluate`` and CDP calls for
        ever, and nothing in this thread can interrupt them), so the call fails; the next
        episode relaunches the browser. Before the kill the timer asks the browser itself
        for its version (``Browser.getVersion`` on a browser-level DevTools session, which no
        page's renderer holds up): answered within ``PROBE_S``, only the page hung
        (``PageHang``); unanswered, the browser or host stalled (``BrowserStall``). ``proc``,
        ``browser``: the browser to probe and kill (default: the current one)."""
        proc = proc or self._proc
        browser = browser if browser is not None else self._browser
        driver = self._driver
        fired, stalled, ended, abandoned = threading.Event(), threading.Event(), threading.Event(), threading.Event()

        def fire() -> None:
            if proc is not None and proc.poll() is None:
                if not self._answers(browser):
                    stalled.set()
                fired.set()
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            # a call that neither the kill nor a browser already gone ends (its Playwright
            # connection wedged) is not waited for
            if not ended.wait(self.abandon_s) and driver is not None:
                abandoned.set()
                driver.abandon(f"{what} did not end {self.abandon_s:g} s after its {seconds:g} s watchdog fired "
                               f"(browser pid {proc.pid if proc else None} killed or already gone); its "
                               "Playwright driver was abandoned and the next episode starts a new one")

        timer = threading.Timer(seconds, fire)
        timer.daemon = True
        timer.start()
        try:
            yield
        except Exception as exc:
            if abandoned.is_set() and isinstance(exc, DriverGone):
                raise  # infra whatever the page did: the call outlived its browser's kill, not a page hang
            if fired.is_set():
                raise self._overran(what, seconds, proc, stalled.is_set()) from exc
            raise
        finally:
            ended.set()
            timer.cancel()
            if timer.is_alive():  # fired: let it finish its probe and kill before judging
                timer.join()
        if fired.is_set():
            raise self._overran(what, seconds, proc, stalled.is_set())

    @staticmethod
    def _overran(what: str, seconds: float, proc: subprocess.Popen[bytes] | None,
                 stalled: bool) -> errors.InfraError:
        pid = proc.pid if proc else None
        if stalled:
            return BrowserStall(f"{what} did not finish within {seconds:g} s and the browser (pid {pid}) did not "
                                f"answer a DevTools call within {PROBE_S:g} s either (a stalled host); it was "
                                "killed and restarts next episode")
        return PageHang(f"{what} did not finish within {seconds:g} s while the browser still answered; the "
                        f"browser (pid {pid}) was killed and restarts next episode")

    def _answers(self, browser: Any) -> bool:
        """Whether ``browser`` answers ``Browser.getVersion`` within ``PROBE_S`` (from any thread)."""
        from envh_webarena.aio import unwrap

        driver = self._driver
        if driver is None or browser is None:
            return False
        target = unwrap(browser)

        async def ask() -> None:
            cdp = await target.new_browser_cdp_session()
            try:
                await cdp.send("Browser.getVersion")
            finally:
                await cdp.detach()

        try:
            driver.submit(ask).result(timeout=PROBE_S)
        except Exception:  # noqa: BLE001 - no answer, for whatever reason: the browser did not answer
            return False
        return True

    def _stop_browser(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            spare.discard()
        browser, self._browser = self._browser, None
        if browser is not None:
            try:
                browser.close()
            except Exception:  # noqa: BLE001 - already gone: nothing left to close
                pass
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc is not None:
            proc.wait(timeout=10)
            if proc.stderr is not None:
                proc.stderr.close()
        if self._profile:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None

    def close(self) -> None:
        """Close the browser (and any replaced one) and the Playwright driver. Idempotent."""
        self._stop_browser()
        retired, self._retired, self._live = self._retired, {}, {}
        for proc, browser, profile in retired.values():
            _stop(proc, browser, profile)
        driver, self._driver = self._driver, None
        if driver is not None:
            driver.stop()


def _stop(proc: subprocess.Popen[bytes], browser: Any, profile: str | None) -> None:
    """Stop a replaced browser: its connection, its process group, its profile."""
    try:
        browser.close()
    except Exception:  # noqa: BLE001 - already gone: nothing left to close
        pass
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=10)
    if proc.stderr is not None:
        proc.stderr.close()
    if profile:
        shutil.rmtree(profile, ignore_errors=True)


async def _close_quietly(context: Any) -> None:
    try:
        await context.close()
    except Exception:  # noqa: BLE001 - a dead browser took the context with it
        pass


def _memory_hint() -> str:
    """Why a launch may have failed when this process's writable memory is capped (a pool
    worker's ``--memory-mb``): Playwright's driver dies at start under about 512 MiB."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_DATA)[0]
    if soft == resource.RLIM_INFINITY:
        return ""
    return (f" (this process's private writable memory is capped at {soft >> 20} MiB: RLIMIT_DATA, "
            "`envh run --memory-mb`; Playwright's driver and Chromium need about 1 GiB)")


def _host_part(entry: str) -> str:
    """``host`` of a ``host[:port]`` entry (``[v6]`` kept in brackets), lower case."""
    host = entry.strip().lower()
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _host_names(hosts: tuple[str, ...]) -> frozenset[str]:
    """The allowed hosts the resolver rules must let through (a launch fixes them)."""
    return frozenset(_host_part(h) for h in hosts if _host_part(h))


class _Process:
    """The browser's main process (a child of Playwright's driver, not of this process):
    ``poll``/``wait`` like ``subprocess.Popen``'s, by its pid and start time."""

    stderr = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._start = _start_time(pid)

    def poll(self) -> int | None:
        return None if self._start is not None and _start_time(self.pid) == self._start else -9

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"chromium (pid {self.pid})", timeout or 0)
            time.sleep(0.02)
        return -9


def _start_time(pid: int) -> str | None:
    """The process's start time (its identity with the pid), None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _find_browser(marker: str) -> int | None:
    """Pid of the browser process (not a renderer or helper) whose command line has ``marker``."""
    want = marker.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if want in argv and not any(a.startswith(b"--type=") for a in argv):
            return int(name)
    return None


def _devtools_port(pid: int) -> int | None:
    """The DevTools port Chromium chose (its profile's ``DevToolsActivePort`` file)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
        profile = next(a.split("=", 1)[1] for a in argv if a.startswith("--user-data-dir="))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with open(os.path.join(profile, "DevToolsActivePort"), encoding="ascii") as f:
                    return int(f.readline().strip())
            except (OSError, ValueError):
                time.sleep(0.05)
    except (OSError, StopIteration):
        pass
    return None


# (pid, thread id) -> the thread and its runtime: a thread id is reused once its thread
# ended, so the thread itself is kept (weakly) to tell the two apart
_RUNTIMES: dict[tuple[int, int], tuple[weakref.ref[threading.Thread], BrowserRuntime]] = {}
_LOCK = threading.Lock()


def shared_runtime(*, extra_hosts: tuple[str, ...] = ()) -> BrowserRuntime:
    """The runtime of this worker (process and thread): every bridge in it shares one browser.

    Hosts asked for by a later caller widen the allow-list of contexts opened from then on
    (a host name relaunches the browser; episodes open on the old one finish on it).
    Runtimes of threads that ended are closed here (their browsers stopped).
    """
    me = threading.current_thread()
    key = (os.getpid(), threading.get_ident())
    stale: list[BrowserRuntime] = []
    try:
        with _LOCK:
            ended = [k for k, (ref, _) in _RUNTIMES.items()
                     if k[0] == key[0] and (ref() is None or not ref().is_alive() or (k == key and ref() is not me))]
            stale = [_RUNTIMES.pop(k)[1] for k in ended]
            entry = _RUNTIMES.get(key)
            if entry is None:  # may raise (a bad $ENVH_PAGE_HEAP_MB): the stale ones still close
                entry = _RUNTIMES[key] = (weakref.ref(me), BrowserRuntime())
            rt = entry[1]
            missing = tuple(h for h in extra_hosts if h not in rt.extra_hosts)
            if missing:
                rt.extra_hosts += missing
    finally:
        for old in stale:
            old.close()
    return rt


def close_shared_runtimes() -> None:
    """Close every runtime this process made (at exit, or in a test's teardown)."""
    with _LOCK:
        keys = [k for k in _RUNTIMES if k[0] == os.getpid()]
        runtimes = [_RUNTIMES.pop(k)[1] for k in keys]
    for rt in runtimes:
        rt.close()


atexit.register(close_shared_runtimes)
