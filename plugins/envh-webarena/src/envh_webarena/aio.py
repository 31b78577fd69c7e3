"""Playwright's public async API on an event loop of its own thread, called synchronously.

The bridges are synchronous (a reset, a step: one call each), and so is everything they call
on a page. Playwright's own sync API runs its event loop only while one of its calls is in
progress and only in the thread that started it, so nothing can go on in the browser between
two calls: the next episode's context and page cannot be made (or its task page loaded) while
the policy thinks without reaching into Playwright's internals, and a sync Playwright refuses
to start in a thread where another one (or any asyncio loop) already runs.

``Driver`` runs ``playwright.async_api`` on a loop in a daemon thread instead. Its objects are
handed out wrapped (``Sync``): a method call runs on the loop and the caller waits for its
result, so ``page.goto(url)`` reads as with the sync API; a property is read on the loop too
(Playwright objects are touched by that thread only). Work of the runtime's own (the context
made ahead, ``spare.py``) is a coroutine ``submit``-ted to the loop: it goes on while nobody
waits. Event handlers (``page.on("crash", f)``) are not run on the loop: their calls are
queued and run in the calling thread when its current call returns, as the sync API runs
them during its calls, so a handler never runs beside the code that registered it.

Only Playwright's public API is used here (``async_playwright``, the classes
``playwright.async_api`` exports). Not offered: the ``expect_*`` context managers and route
handlers (nothing here uses them).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import inspect
import os
import signal
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from envh import errors


class DriverGone(errors.InfraError):
    """The driver's thread ended (its loop stopped): nothing more can reach the browser
    through it; the runtime starts a new driver with the next browser."""


#: Driver starts one at a time, so that the child process a start adds is its own.
_STARTING = threading.Lock()


def _children() -> dict[int, str]:
    """This process's child processes: pid -> start time (``/proc``'s clock ticks)."""
    me, out = os.getpid(), {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == me:
                out[int(name)] = fields[19]
    return out


def _is_driver(pid: int) -> bool:
    """Whether ``pid`` runs Playwright's driver (``node .../cli.js run-driver``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"run-driver" in f.read().split(b"\0")
    except OSError:
        return False


def _same_process(pid: int, started: str, *, zombie: bool = False, parent: int | None = None) -> bool:
    """Whether ``pid`` is still the process that started at ``started`` (not a reused pid),
    a child of ``parent`` if given, running (or, with ``zombie``, also ended but not yet
    reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return False
    return (fields[19] == started and (zombie or fields[0] != "Z")
            and (parent is None or int(fields[1]) == parent))


@functools.cache
def _api_classes() -> tuple[type, ...]:
    """The classes of Playwright's async API (Page, BrowserContext, Locator, CDPSession...)."""
    import playwright.async_api as api

    return tuple(c for c in vars(api).values()
                 if isinstance(c, type) and c.__module__.startswith("playwright.async_api"))


class Driver:
    """One async Playwright on an event loop of its own thread (see the module doc)."""

    def __init__(self) -> None:
        from playwright.async_api import async_playwright

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name="envh-webarena-playwright", daemon=True)
        self._events: collections.deque[tuple[Callable[..., Any], tuple[Any, ...]]] = collections.deque()
        self._wrappers: weakref.WeakValueDictionary[int, Sync] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self._ending = False
        self._abandoned: str | None = None  # why callers stopped waiting on this driver (``abandon``)
        # connections of the runtime's own on this loop (rawcdp.py): closed when the loop ends
        self.closers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.thread.start()
        self.playwright: Any = None
        #: Playwright's node process (pid, start time): killed by ``stop`` if asking it to
        #: stop did not end it (a wedged connection on an abandoned driver).
        self.node: tuple[int, str] | None = None
        self._owner = os.getpid()  # a forked child's stop must not kill its parent's node
        try:
            # a start that hangs holds the lock: the next driver waits 10 s, then starts
            # without knowing its node (it can then not be killed, only asked to stop)
            if _STARTING.acquire(timeout=10):
                try:
                    before = _children()
                    self.playwright = self.call(async_playwright().start)
                    added = {pid: t for pid, t in _children().items() if before.get(pid) != t and _is_driver(pid)}
                finally:
                    _STARTING.release()
                if len(added) == 1:
                    self.node = next(iter(added.items()))
            else:
                self.playwright = self.call(async_playwright().start)
        except BaseException:
            self._stop_loop()
            raise

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        except BaseException:  # noqa: BLE001 - a callback raised SystemExit or the like: the driver is gone
            pass
        finally:
            # the loop stopped (asked to, or a callback ended it): let its unfinished tasks
            # see a cancellation and clean up (a context made ahead closes itself), bounded
            self._ending = True
            try:
                tasks = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                for task in tasks:
                    task.cancel()
                if tasks:
                    self.loop.run_until_complete(asyncio.wait(tasks, timeout=5))
                closing = [self.loop.create_task(c.close()) for c in list(self.closers)]
                if closing:
                    self.loop.run_until_complete(asyncio.wait(closing, timeout=5))
            except BaseException:  # noqa: BLE001 - what cannot end here ends with the process
                pass

    def on_loop(self) -> bool:
        return threading.get_ident() == self.thread.ident

    def alive(self) -> bool:
        """Whether the driver's thread still runs its loop and nobody gave up on it."""
        return self._running() and self._abandoned is None

    def _running(self) -> bool:
        return self.thread.is_alive() and not self._ending and not self.loop.is_closed()

    def abandon(self, why: str) -> None:
        """Give up on this driver from any thread: a call that waits on it raises
        ``DriverGone`` (``why``) within half a second, and it is no longer ``alive``, so the
        runtime starts a new one. For a call that does not return even once its browser is
        dead (a wedged Playwright connection), which would otherwise hold its caller for
        ever."""
        self._abandoned = why

    @property
    def abandoned(self) -> str | None:
        """Why callers gave up on this driver (``abandon``), or None."""
        return self._abandoned

    def _schedule(self, factory: Callable[[], Awaitable[Any]], *,
                  abandoned_too: bool = False) -> concurrent.futures.Future[Any]:
        """Run ``factory()``'s coroutine as a task on the loop. The coroutine is made on the
        loop, so one scheduled on a loop that ends before it runs was never made (nothing
        is left un-awaited). On an abandoned driver only with ``abandoned_too`` (``stop``)."""
        if not self._running():
            raise DriverGone("The browser driver's thread has ended; the next reset starts a new one.")
        if self._abandoned is not None and not abandoned_too:
            raise DriverGone(self._abandoned)
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def done(task: asyncio.Future[Any]) -> None:
            if task.cancelled():
                future.cancel()
            elif task.exception() is not None:
                future.set_exception(task.exception())  # type: ignore[arg-type]
            else:
                future.set_result(task.result())

        def start() -> None:
            try:
                task = self.loop.create_task(factory())  # type: ignore[arg-type]
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                future.set_exception(exc)
                return
            task.add_done_callback(done)

        try:
            self.loop.call_soon_threadsafe(start)
        except RuntimeError as exc:  # the loop was closed meanwhile
            raise DriverGone("The browser driver was closed.") from exc
        return future

    def wait(self, future: concurrent.futures.Future[Any]) -> Any:
        """``future``'s result; ``DriverGone`` if the driver's thread ends first."""
        while True:
            try:
                return future.result(timeout=0.5)
            except concurrent.futures.TimeoutError:
                if not self.thread.is_alive():
                    raise DriverGone("The browser driver's thread ended during a call; "
                                     "the next reset starts a new one.") from None
                if self._abandoned is not None:
                    raise DriverGone(self._abandoned) from None

    # -- calling -------------------------------------------------------------------------
    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on the loop (awaiting it when it returns an awaitable),
        wait for it and return the result, Playwright objects wrapped. Queued event
        handlers run afterwards, in this thread."""
        if self.on_loop():
            raise RuntimeError("A Playwright call from the driver's own thread would wait for itself.")
        args, kwargs = unwrap(args), unwrap(kwargs)

        async def invoke() -> Any:
            out = fn(*args, **kwargs)
            return await out if inspect.isawaitable(out) else out

        future = self._schedule(invoke)
        try:
            return self.wrap(self.wait(future))
        finally:
            self.drain()

    def submit(self, factory: Callable[[], Awaitable[Any]]) -> concurrent.futures.Future[Any]:
        """Start ``factory()``'s coroutine on the loop and return at once (its future;
        failures are marked seen). ``DriverGone`` if the driver has ended."""
        future = self._schedule(factory)
        future.add_done_callback(_seen)
        return future

    def drain(self) -> None:
        """Run the event handlers queued since the last call, in this thread."""
        while self._events:
            try:
                handler, args = self._events.popleft()
            except IndexError:
                return
            handler(*(self.wrap(a) for a in args))

    def relay(self, handler: Callable[..., Any]) -> Callable[..., None]:
        """A handler for the loop that queues ``handler``'s call for the calling thread."""
        events = self._events

        def queued(*args: Any) -> None:
            events.append((handler, args))

        return queued

    # -- wrapping ------------------------------------------------------------------------
    def wrap(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.wrap(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.wrap(v) for v in value)
        if isinstance(value, _api_classes()):
            with self._lock:
                wrapper = self._wrappers.get(id(value))
                if wrapper is None or wrapper._obj is not value:
                    wrapper = Sync(self, value)
                    self._wrappers[id(value)] = wrapper
                return wrapper
        return value

    # -- end -----------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop Playwright (its driver process) and the loop's thread. Idempotent. A node
        process that asking does not end (a wedged connection) is killed, and Playwright's
        stop then waited for again: it ends once the loop has seen the process end (a loop
        stopped before that leaves the process's pipes and transport open)."""
        pw, self.playwright = self.playwright, None
        node, self.node = self.node, None
        mine = node is not None and os.getpid() == self._owner
        stopping: concurrent.futures.Future[Any] | None = None
        if pw is not None and self._running():  # an abandoned one's node process is still to end
            try:
                stopping = self._schedule(unwrap(pw).stop, abandoned_too=True)
                stopping.result(timeout=30 if self.alive() else 5)
            except Exception:  # noqa: BLE001 - the driver may already be gone at exit
                pass
        if mine and node is not None and self._kill(*node):
            with contextlib.suppress(Exception):  # the loop sees the process end
                if stopping is not None and not stopping.done():
                    stopping.result(timeout=10)
                elif self._running():
                    self._schedule(lambda: asyncio.sleep(0.5), abandoned_too=True).result(timeout=10)
        self._stop_loop()

    def _kill(self, pid: int, started: str) -> bool:
        """Kill the driver's node process if it is still the one this driver started (its
        start time, and a child of this process); whether it was killed."""
        try:
            handle = os.pidfd_open(pid)  # the signal reaches this process, even if the pid is reused
        except OSError:
            return False
        try:
            if not _same_process(pid, started, parent=self._owner):
                return False
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        except OSError:
            return False
        finally:
            os.close(handle)
        return True

    def _stop_loop(self) -> None:
        if self.thread.is_alive() and not self._ending and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=30)
        if not self.thread.is_alive() and not self.loop.is_closed():
            self.loop.close()


class Sync:
    """A Playwright async-API object used synchronously through its ``Driver``."""

    __slots__ = ("_obj", "_driver", "_relays", "__weakref__")

    def __init__(self, driver: Driver, obj: Any) -> None:
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_driver", driver)
        object.__setattr__(self, "_relays", {})

    def __getattr__(self, name: str) -> Any:
        obj, driver = self._obj, self._driver
        if name in ("on", "once"):
            return functools.partial(self._listen, name)
        if name == "remove_listener":
            return self._unlisten
        if inspect.isfunction(getattr(type(obj), name, None)):
            return functools.partial(driver.call, getattr(obj, name))
        return driver.call(getattr, obj, name)  # a property: read on the loop

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot set {name!r} on a Playwright object")

    def _listen(self, how: str, event: str, handler: Callable[..., Any]) -> None:
        queued = self._driver.relay(handler)
        self._relays[(event, handler)] = queued
        self._driver.call(getattr(self._obj, how), event, queued)

    def _unlisten(self, event: str, handler: Callable[..., Any]) -> None:
        queued = self._relays.pop((event, handler), None)
        if queued is not None:
            self._driver.call(self._obj.remove_listener, event, queued)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sync) and other._obj is self._obj

    def __hash__(self) -> int:
        return id(self._obj)

    def __repr__(self) -> str:
        return f"<sync {self._obj!r}>"


def call_all(calls: list[tuple[Any, str, tuple[Any, ...]]]) -> list[Any]:
    """Call ``obj.method(*args)`` for each ``(obj, method, args)``: for wrapped objects all at
    once on their driver's loop (their requests go out together, so one's transfer overlaps
    another's work in the browser), otherwise one after the other. Returns each result or
    the ``Exception`` it raised, in order."""
    drivers = {id(obj._driver): obj._driver for obj, _, _ in calls if isinstance(obj, Sync)}
    if len(drivers) == 1 and all(isinstance(obj, Sync) for obj, _, _ in calls):
        driver = next(iter(drivers.values()))

        async def one(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
            out = fn(*args)
            return await out if inspect.isawaitable(out) else out

        async def every() -> list[Any]:
            return await asyncio.gather(*(one(getattr(obj._obj, name), unwrap(args)) for obj, name, args in calls),
                                        return_exceptions=True)

        return driver.call(every)
    out: list[Any] = []
    for obj, name, args in calls:
        try:
            out.append(getattr(obj, name)(*args))
        except Exception as exc:  # noqa: BLE001 - handed back to the caller, as above
            out.append(exc)
    return out


def unwrap(value: Any) -> Any:
    """The async-API objects inside ``value`` (wrappers replaced, containers copied)."""
    if isinstance(value, Sync):
        return value._obj
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    if isinstance(value, tuple):
        return tuple(unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    return value


def _seen(future: concurrent.futures.Future[Any]) -> None:
    """Mark a failure as seen (asyncio would log an unretrieved one at exit)."""
    if not future.cancelled():
        future.exception()
