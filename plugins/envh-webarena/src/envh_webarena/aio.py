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
        self.thread.start()
        self.playwright: Any = None
        try:
            self.playwright = self.call(async_playwright().start)
        except BaseException:
            self._stop_loop()
            raise

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def on_loop(self) -> bool:
        return threading.get_ident() == self.thread.ident

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

        coro = invoke()
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except RuntimeError as exc:  # the loop is closed: the runtime was closed
            coro.close()
            raise RuntimeError("The browser runtime was closed.") from exc
        try:
            return self.wrap(future.result())
        finally:
            self.drain()

    def submit(self, coro: Awaitable[Any]) -> concurrent.futures.Future[Any]:
        """Start ``coro`` on the loop and return at once (its future; failures are marked seen)."""
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        except RuntimeError:  # the loop is closed
            coro.close()  # type: ignore[attr-defined]
            raise
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
        if pw is not None and self.thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(unwrap(pw).stop(), self.loop).result(timeout=30)
            except Exception:  # noqa: BLE001 - the driver may already be gone at exit
                pass
        self._stop_loop()

    def _stop_loop(self) -> None:
        if self.thread.is_alive():
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
