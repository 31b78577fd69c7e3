"""A browser context made ahead for the next episode, its page already loaded.

Opening a context is cheap; its first page is not: Chromium starts a renderer process for it
(0.2–0.5 s on a busy machine), and loading the task page costs as much again. So once an
episode's first observation is out, the runtime starts making the next one on the Playwright
driver's own loop (``aio.py``): a context, its page, and — when the bridge names one — the
page the next episode most likely starts on (the task it just started: GRPO groups and
benchmarks repeat tasks), loaded up to its ``load`` event, then the files the task's start
loads into frames fetched into the context's cache (a reset may take the context before the
fetch ends). This goes on while the policy thinks; the next reset takes it and only starts
the episode. After a preloaded page went unused (the reset asked for another task), the
runtime makes blank spares until a task repeats.

Isolation is that of any fresh context: nothing but its own page was ever in it, nothing
outside this module holds it before it is taken, and it is taken at most once. A spare is
used only when it was made with the same options and preloaded with the same URL the reset
asks for; one made with others (another task, a storage state, a widened host list), one
whose page closed, crashed, failed to load or is no longer at the URL it loaded, one holding
more than its one page, or one from a browser that has since died is thrown away (closed in
the background) and a context is made on the spot.

What the preloaded page ran is only what loading it runs, which a reset would have run too:
a page whose load already starts the episode must not be preloaded (MiniWoB's pages only
show their START cover on load; the episode starts with the reset's seed). A bridge may add
a ``warm`` step, run in the page once it loaded: work the start would do that draws nothing
and depends on no seed (MiniWoB's flight tasks load the same form into a frame at every
start; ``miniwob.py`` loads it ahead and its start then keeps it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from typing import Any

from envh import errors

from envh_webarena.aio import Driver, unwrap
from envh_webarena.rawcdp import open_channels


def options_key(options: dict[str, Any]) -> str:
    """Contexts made with equal keys are interchangeable."""
    return json.dumps(options, sort_keys=True, default=repr)


class Spare:
    """One context + page being made (or made) on ``browser``; see the module doc.

    :param url: load this page into it (``None``: the page stays ``about:blank``).
    :param prefetch: then fetch these files into the context's cache (same origin as ``url``;
        what the episode's start will load into frames).
    :param warm: then run this JavaScript function in the page (see the module doc); a reset
        may take the context while it runs. When it returns ``true`` (it did the start's frame
        loading) the prefetch is skipped.
    """

    def __init__(self, driver: Driver, browser: Any, key: str, options: dict[str, Any],
                 url: str | None = None, prefetch: tuple[str, ...] = (), port: int | None = None,
                 warm: str | None = None) -> None:
        self.driver, self.browser, self.key, self.url = driver, browser, key, url
        self.crashed = False
        self.channels: tuple[Any, Any] | None = None  # the page's CDP channels, wrapped once taken
        self._raw_channels: tuple[Any, Any] | None = None
        # the context and its loaded page, as soon as they are (the prefetch may still run);
        # ``future``: the whole build, prefetch included
        self.made: concurrent.futures.Future[tuple[Any, Any]] = concurrent.futures.Future()
        raw_browser = unwrap(browser)
        self.future = driver.submit(lambda: self._build(raw_browser, dict(options), url, prefetch, port, warm))

    async def _build(self, browser: Any, options: dict[str, Any], url: str | None,
                     prefetch: tuple[str, ...], port: int | None, warm: str | None = None) -> tuple[Any, Any]:
        try:
            context = await browser.new_context(**options)
        except BaseException as exc:
            self.made.set_exception(exc)
            raise
        try:
            page = await context.new_page()
            page.once("crash", lambda *_: setattr(self, "crashed", True))
            if url is not None:
                response = await page.goto(url, wait_until="load")
                if response is None or not response.ok:  # the reset's own goto says what is wrong
                    raise RuntimeError(f"preloading {url} answered {response and response.status}")
            self._raw_channels = await open_channels(context, page, port, self.driver.closers)  # 1st observation's
        except BaseException as exc:
            self.made.set_exception(exc)
            if not isinstance(exc, GeneratorExit):  # (a coroutine being closed may not await)
                await _close(context)
            raise
        self.made.set_result((context, page))
        warmed = False
        if warm is not None and url is not None:  # sent before a reset's start can be
            try:
                warmed = await page.evaluate(warm) is True
            except Exception:  # noqa: BLE001 - a miss only: the start does the work itself
                pass
        # a warm step that ran loads the frames itself: fetching their files too is the same
        # requests twice
        if prefetch and not warmed:  # a reset may take the context meanwhile: the files then arrive beside its start
            try:
                await page.evaluate(_PREFETCH_JS, list(prefetch))
            except Exception:  # noqa: BLE001 - a miss only: the start loads the files itself
                pass
        return context, page

    def ready(self) -> bool:
        """Whether it is made (or failed): taking it would not wait."""
        return self.made.done()

    def take(self) -> tuple[Any, Any] | None:
        """The context and its page (wrapped for sync use), waiting for them if need be;
        None when they cannot be used (failed, closed, crashed, navigated, more pages)."""
        try:
            context, page = self.driver.wait(self.made)
            # one round trip into the page: a renderer that died while idle shows only now
            usable = self.driver.call(self._check, context, page)
        except Exception:  # noqa: BLE001 - a failed spare is only a slower reset
            usable = False
        if not usable:
            self.discard()
            return None
        if self._raw_channels is not None:
            cdp, raw = self._raw_channels
            self.channels = (self.driver.wrap(cdp), raw)
        return self.driver.wrap(context), self.driver.wrap(page)

    async def _check(self, context: Any, page: Any) -> bool:
        await page.title()
        want = "about:blank" if self.url is None else self.url
        return not self.crashed and not page.is_closed() and page.url == want and len(context.pages) == 1

    def discard(self) -> None:
        """Close the spare's context in the background, once it is made."""
        future = self.future

        async def close() -> None:
            try:
                context, _ = await asyncio.wrap_future(future)
            except BaseException:  # noqa: BLE001 - nothing was made, nothing to close
                return
            if self._raw_channels is not None and self._raw_channels[1] is not None:
                await self._raw_channels[1].close()
            await _close(context)

        try:
            self.driver.submit(close)
        except (RuntimeError, errors.InfraError):  # the driver is gone: the browser and its contexts with it
            pass


# fetch and read each file (a response only read in part may not be cached); a failure is
# only a miss: the episode's start loads the file itself
_PREFETCH_JS = """async (urls) => { await Promise.all(urls.map(u =>
  fetch(u, {credentials: 'same-origin'}).then(r => r.arrayBuffer()).catch(() => null))); return true; }"""


async def _close(context: Any) -> None:
    try:
        await context.close()
    except Exception:  # noqa: BLE001 - the browser may be gone already
        pass
