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
import functools
import inspect
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from envh import errors


class DriverGone(errors.InfraError):
    """The driver's thread ended (its loop stopped): nothing more can reach the browser
    through it; the runtime starts a new driver with the next browser."""


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
        try:
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
        """Stop Playwright (its driver process) and the loop's thread. Idempotent."""
        pw, self.playwright = self.playwright, None
        if pw is not None and self._running():  # an abandoned one's node process is still to end
            try:
                self._schedule(unwrap(pw).stop, abandoned_too=True).result(timeout=30 if self.alive() else 5)
            except Exception:  # noqa: BLE001 - the driver may already be gone at exit
                pass
        self._stop_loop()

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
