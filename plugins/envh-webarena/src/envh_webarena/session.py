"""One episode's browser state: a fresh context, its tabs, the active tab and the last error."""

from __future__ import annotations

import asyncio
from typing import Any

from envh import errors

from envh_webarena import axtree
from envh_webarena.aio import Sync, unwrap
from envh_webarena.runtime import BrowserRuntime, is_browser_gone

#: Seconds a tab's title may take in an observation (``BrowserSession._titles``).
TITLE_WAIT_S = 2.0
#: The title shown for a tab whose renderer did not answer within ``TITLE_WAIT_S``.
BUSY_TITLE = "(not answering)"


class PageCrashed(errors.InfraError):
    """The renderer of a page the policy reached crashed (a script that allocated until it ran
    out of memory, a page that trips a renderer bug) while the browser lives on: an
    ``InfraError`` everywhere but in a policy's step (and the grading of its page), where
    ``BrowserBridge`` ends the episode as the policy's failure (``page_crashed``)."""


class BrowserSession:
    """A browser context opened for one episode; closed (with its pages) by ``close``.

    :param runtime: the worker's browser runtime.
    :param action_timeout_ms: how long an action waits for its element to be actionable.
    :param navigation_timeout_ms: how long a navigation may take.
    :param preload: the URL the episode starts on: a context made ahead may have it loaded
        already (``preloaded`` says whether it has; else the page is blank).
    :param context_options: passed to ``browser.new_context`` (``storage_state``, viewport...).
    """

    def __init__(self, runtime: BrowserRuntime, *, action_timeout_ms: int = 3000,
                 navigation_timeout_ms: int = 15_000, preload: str | None = None, **context_options: Any) -> None:
        self.runtime = runtime
        self.context, first, self.preloaded, channels = runtime.open_context(preload=preload, **context_options)
        # the browser this episode runs on (a relaunch for another bridge leaves it to the episode)
        self.proc, self.browser, self.port = runtime._proc, runtime._browser, runtime.devtools_port
        self.context.set_default_timeout(action_timeout_ms)
        self.context.set_default_navigation_timeout(navigation_timeout_ms)
        self._crashed: list[Any] = []  # the pages whose renderer crashed
        self.probing = False  # the verifier's own pages are not the policy's tabs
        self.pages: list[Any] = []
        self.active = 0
        self._refused_downloads: list[str] = []
        # per page: its Playwright CDP session and a DevTools connection of our own (rawcdp.py)
        self._cdp: dict[int, tuple[Any, Any]] = {}
        self.context.on("page", self._on_page)
        self._on_page(first)
        if channels is not None:  # opened with the context made ahead
            self._cdp[id(first)] = channels

    def _on_page(self, page: Any) -> None:
        if page in self.pages or self.probing:
            return
        page.on("crash", self._on_crash)
        page.on("download", self._on_download)
        self.pages.append(page)
        self.active = len(self.pages) - 1  # a tab the page opened gets the focus, as in BrowserGym

    def _on_crash(self, page: Any) -> None:
        if page not in self._crashed:
            self._crashed.append(page)

    @property
    def crashed(self) -> bool:
        """Whether the active page's renderer crashed (another tab's crash is that tab's)."""
        self._prune()
        return bool(self.pages) and self.pages[self.active] in self._crashed

    def _on_download(self, download: Any) -> None:
        if len(self._refused_downloads) < 20:
            self._refused_downloads.append(str(download.suggested_filename)[:200])

    def take_refused_downloads(self) -> list[str]:
        """The files pages tried to download since the last call (the context refuses
        downloads: ``accept_downloads`` is off)."""
        out, self._refused_downloads = self._refused_downloads, []
        return out

    @property
    def page(self) -> Any:
        self._prune()
        if not self.pages:
            raise errors.InfraError("The episode's browser context has no open page left.")
        return self.pages[self.active]

    def _prune(self) -> None:
        open_pages = [p for p in self.pages if not p.is_closed()]
        if len(open_pages) != len(self.pages):
            current = self.pages[self.active] if self.active < len(self.pages) else None
            self.pages = open_pages
            self.active = open_pages.index(current) if current in open_pages else max(0, len(open_pages) - 1)

    def new_tab(self) -> Any:
        page = self.context.new_page()
        self._on_page(page)
        return page

    def focus(self, index: int) -> None:
        self._prune()
        if not 0 <= index < len(self.pages):
            raise IndexError(f"No tab {index}; open tabs are 0..{len(self.pages) - 1}.")
        self.active = index
        self.pages[index].bring_to_front()

    def close_tab(self) -> None:
        if len(self.pages) <= 1:
            raise IndexError("Cannot close the last open tab.")
        self.page.close()
        self._prune()

    def browser_alive(self) -> bool:
        """Whether the browser this episode runs on is alive."""
        return self.runtime.is_alive(self.proc, self.browser)

    def watchdog(self, seconds: float, what: str) -> Any:
        """``runtime.watchdog`` for this episode's browser."""
        return self.runtime.watchdog(seconds, what, proc=self.proc, browser=self.browser)

    def check_alive(self, error: BaseException | None = None) -> None:
        """Raise ``InfraError`` when the browser died, ``PageCrashed`` when it lives but the
        active page crashed (``error``: a Playwright error that may say so before the page's
        crash event came)."""
        if not self.browser_alive():
            driver = self.runtime._driver
            if driver is not None and not driver.alive():
                raise errors.InfraError("The browser driver's thread ended mid-episode; the next reset "
                                        "starts a new one with a new browser.")
            raise errors.InfraError(f"Chromium (pid {self.proc.pid if self.proc else None}) died mid-episode; "
                                    "the next reset relaunches it.")
        if self.crashed or (error is not None and any(s in str(error) for s in ("Target crashed", "Page crashed"))):
            raise PageCrashed(f"The page at {self.page.url[:300]} crashed (its renderer is gone) while the "
                              "browser lives on.")

    def _channels(self, page: Any, *, fresh: bool = False) -> tuple[Any, Any]:
        from envh_webarena.aio import unwrap
        from envh_webarena.rawcdp import open_channels

        channels = self._cdp.get(id(page))
        if channels is not None and fresh:
            self._close_raw(channels[1])
            channels = None
        if channels is None:
            driver = self.runtime._driver
            assert driver is not None
            channels = self._cdp[id(page)] = driver.call(open_channels, unwrap(self.context), unwrap(page), self.port,
                                                         driver.closers)
        return channels

    def _read(self, page: Any, max_chars: int) -> tuple[str, list[str]]:
        cdp, raw = self._channels(page)
        driver = self.runtime._driver
        send_all = None if raw is None or driver is None else (lambda calls: driver.call(raw.send_all, calls))
        return axtree.snapshot(page, cdp, max_chars=max_chars, raw=send_all)

    def snapshot(self, *, max_chars: int) -> dict[str, Any]:
        """URL, title, tabs and the accessibility tree of the active tab."""
        from playwright.sync_api import Error

        self.check_alive()
        page = self.page
        try:
            tree, bids = self._read(page, max_chars)
        except Error as exc:
            if is_browser_gone(exc) or self.crashed or not self.browser_alive():
                self.check_alive(exc)
                raise errors.InfraError(f"The browser went away while reading the page: {exc}") from exc
            # the page navigated while we read it: read it once more after it settled
            try:
                page.wait_for_load_state("domcontentloaded", timeout=5000)
                self._channels(page, fresh=True)
                tree, bids = self._read(page, max_chars)
            except Error as again:
                if is_browser_gone(again) or self.crashed or not self.browser_alive():
                    self.check_alive(again)
                    raise errors.InfraError(f"Could not read the page at {page.url}: {again}") from again
                # the browser is alive and the page is still busy (a page that opened two
                # hundred windows at once keeps the renderer busy for seconds): the page's
                # doing, not the infrastructure's, so the policy sees it and may act on it
                tree, bids = (f"(the page could not be read yet: {str(again).splitlines()[0][:300]}; "
                              "act on another tab, wait with noop, or go back)"), []
        # the tabs as they are now: a page that opens a window while the titles are read adds
        # a tab (its handler runs after the read), which the next observation lists
        pages = list(self.pages)
        current = pages.index(page) if page in pages else self.active
        titles = self._titles(pages, current)
        tabs = [{"index": i, "url": p.url, "title": titles[i], "active": i == current}
                for i, p in enumerate(pages)]
        active = next((t for t in tabs if t["active"]), None)
        title = active["title"] if active else _title(page)
        return {"url": page.url, "title": title, "tabs": tabs, "axtree": tree, "bids": bids}

    def _titles(self, pages: list[Any], active: int) -> list[str]:
        """Each tab's title, read from its renderer. The active tab was just read, so it
        answers; the others are read all at once, each given ``TITLE_WAIT_S``: a background
        tab busy in JavaScript (spinning, or filling memory until it crashes) answers nothing,
        and its title reads ``BUSY_TITLE`` instead of holding up the observation of the tab
        the policy is on."""
        driver = self.runtime._driver
        others = [p for i, p in enumerate(pages) if i != active]
        if not others or driver is None or not all(isinstance(p, Sync) for p in others):
            return [_title(p) for p in pages]

        async def one(page: Any) -> str:
            try:
                return str(await asyncio.wait_for(page.title(), TITLE_WAIT_S))[:300]
            except TimeoutError:
                return BUSY_TITLE
            except Exception:  # noqa: BLE001 - crashed, closed or mid-navigation: no title
                return ""

        async def every() -> list[str]:
            return list(await asyncio.gather(*(one(unwrap(p)) for p in others)))

        read = iter(driver.call(every))
        return [_title(p) if i == active else next(read) for i, p in enumerate(pages)]

    def _close_raw(self, raw: Any) -> None:
        if raw is not None and self.runtime._driver is not None:
            try:
                self.runtime._driver.submit(raw.close)
            except (RuntimeError, errors.InfraError):  # the driver is gone: the connection went with it
                pass

    def close(self) -> None:
        """Close the context and its pages (in the background: nothing holds them any more)."""
        context, self.context = self.context, None
        channels, self.pages, self._cdp = self._cdp, [], {}
        for _, raw in channels.values():
            self._close_raw(raw)
        if context is not None:
            self.runtime.close_context(context, self.proc.pid if self.proc else None)


def _title(page: Any) -> str:
    try:
        return str(page.title())[:300]
    except Exception:  # noqa: BLE001 - a page mid-navigation has no title yet
        return ""
