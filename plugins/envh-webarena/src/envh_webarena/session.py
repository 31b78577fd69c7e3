"""One episode's browser state: a fresh context, its tabs, the active tab and the last error."""

from __future__ import annotations

from typing import Any

from envh import errors

from envh_webarena import axtree
from envh_webarena.runtime import BrowserRuntime, is_browser_gone


class BrowserSession:
    """A browser context opened for one episode; closed (with its pages) by ``close``.

    :param runtime: the worker's browser runtime.
    :param action_timeout_ms: how long an action waits for its element to be actionable.
    :param navigation_timeout_ms: how long a navigation may take.
    :param context_options: passed to ``browser.new_context`` (``storage_state``, viewport...).
    """

    def __init__(self, runtime: BrowserRuntime, *, action_timeout_ms: int = 3000,
                 navigation_timeout_ms: int = 15_000, **context_options: Any) -> None:
        self.runtime = runtime
        self.context, first = runtime.open_context(**context_options)
        self.context.set_default_timeout(action_timeout_ms)
        self.context.set_default_navigation_timeout(navigation_timeout_ms)
        self.crashed = False
        self.probing = False  # the verifier's own pages are not the policy's tabs
        self.pages: list[Any] = []
        self.active = 0
        self._cdp: dict[int, Any] = {}
        self.context.on("page", self._on_page)
        self._on_page(first)

    def _on_page(self, page: Any) -> None:
        if page in self.pages or self.probing:
            return
        page.on("crash", self._on_crash)
        self.pages.append(page)
        self.active = len(self.pages) - 1  # a tab the page opened gets the focus, as in BrowserGym

    def _on_crash(self, page: Any) -> None:
        self.crashed = True

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

    def check_alive(self) -> None:
        """Raise ``InfraError`` when the browser died or the active page crashed."""
        if self.crashed:
            raise errors.InfraError("The page crashed (renderer gone); the next episode opens a new one.")
        if not self.runtime.alive():
            raise errors.InfraError(f"Chromium (pid {self.runtime.pid}) died mid-episode; "
                                    "the next reset relaunches it.")

    def snapshot(self, *, max_chars: int) -> dict[str, Any]:
        """URL, title, tabs and the accessibility tree of the active tab."""
        from playwright.sync_api import Error

        self.check_alive()
        page = self.page
        try:
            cdp = self._cdp.get(id(page))
            if cdp is None:
                cdp = self._cdp[id(page)] = self.context.new_cdp_session(page)
            tree, bids = axtree.snapshot(page, cdp, max_chars=max_chars)
            tabs = [{"index": i, "url": p.url, "title": _title(p), "active": i == self.active}
                    for i, p in enumerate(self.pages)]
            return {"url": page.url, "title": _title(page), "tabs": tabs, "axtree": tree, "bids": bids}
        except Error as exc:
            if is_browser_gone(exc) or self.crashed or not self.runtime.alive():
                raise errors.InfraError(f"The browser went away while reading the page: {exc}") from exc
            # the page navigated while we read it: read it once more after it settled
            try:
                page.wait_for_load_state("domcontentloaded", timeout=5000)
                self._cdp.pop(id(page), None)
                cdp = self._cdp[id(page)] = self.context.new_cdp_session(page)
                tree, bids = axtree.snapshot(page, cdp, max_chars=max_chars)
            except Error as again:
                raise errors.InfraError(f"Could not read the page at {page.url}: {again}") from again
            tabs = [{"index": i, "url": p.url, "title": _title(p), "active": i == self.active}
                    for i, p in enumerate(self.pages)]
            return {"url": page.url, "title": _title(page), "tabs": tabs, "axtree": tree, "bids": bids}

    def close(self) -> None:
        context, self.context = self.context, None
        self.pages, self._cdp = [], {}
        if context is not None:
            try:
                context.close()
            except Exception:  # noqa: BLE001 - a dead browser took the context with it
                pass


def _title(page: Any) -> str:
    try:
        return str(page.title())[:300]
    except Exception:  # noqa: BLE001 - a page mid-navigation has no title yet
        return ""
