"""A browser context with one blank page, made ahead for the next episode.

Opening a context is cheap; its first page is not: Chromium starts a renderer process for
it (0.2–0.5 s on a busy machine), which was most of a reset. So when an episode takes its
context, the runtime asks the browser for the next one without waiting for the answer.
Playwright's sync API has no call that returns before its answer, so the request is queued
as a task on the sync API's own event loop (what every sync call does, minus the wait):
it goes out on the next call the episode makes, and Chromium starts the renderer in its own
processes while the episode runs. The next reset takes the finished context.

Isolation is that of any fresh context: nothing but its own blank page was ever in it,
nothing outside this module holds it before it is taken, and it is taken at most once.
A spare made with other options (a task with a storage state, a widened host list), one
whose page closed, crashed or left ``about:blank``, or one from a browser that has since
died is thrown away (closed in the background) and a context is made on the spot.

This reaches into Playwright's implementation objects (``_impl_obj``, ``_loop``, ``_sync``);
if a Playwright release moves them, ``Spare.make`` returns None and every reset makes its
context on the spot, as before: slower, never wrong.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any


def options_key(options: dict[str, Any]) -> str:
    """Contexts made with equal keys are interchangeable."""
    return json.dumps(options, sort_keys=True, default=repr)


class Spare:
    """One context + blank page being made (or made) on ``browser``; see the module doc."""

    def __init__(self, browser: Any, key: str, task: asyncio.Task[Any]) -> None:
        self.browser, self.key, self.task = browser, key, task
        self.crashed = False
        self._context_made: asyncio.Future[None] = task.get_loop().create_future()
        task.add_done_callback(_retrieve)
        task.add_done_callback(lambda _: _settle(self._context_made))

    @classmethod
    def make(cls, browser: Any, key: str, options: dict[str, Any]) -> Spare | None:
        """Queue the requests for a context with ``options`` and its first page."""
        try:
            impl, loop = browser._impl_obj, browser._loop
            params = inspect.signature(impl.new_context).parameters
        except (AttributeError, TypeError, ValueError):
            return None
        if set(options) - set(params):
            return None  # an option this Playwright does not know: let the sync call say so
        kwargs = {name: options.get(name) for name in params}
        spare: Spare

        async def build() -> tuple[Any, Any]:
            try:
                context = await impl.new_context(**kwargs)
            finally:
                _settle(spare._context_made)
            try:
                page = await context.new_page()
            except BaseException:
                await _close(context)
                raise
            page.once("crash", lambda *_: setattr(spare, "crashed", True))
            return context, page

        spare = cls(browser, key, loop.create_task(build()))
        return spare

    def send(self) -> None:
        """Wait for the context (a few milliseconds), so the page request goes out now and
        Chromium starts the page's renderer while the policy thinks, not during its next step."""
        try:
            self.browser._sync(self._context_made)
        except Exception:  # noqa: BLE001 - the spare's own failure shows when it is taken
            pass

    def take(self) -> tuple[Any, Any] | None:
        """The context and its page (sync API objects), waiting for them if need be;
        None when they cannot be used (closed, crashed, navigated, failed)."""
        from playwright._impl._sync_base import mapping

        try:
            context_impl, page_impl = self.browser._sync(self.task)
            # one round trip into the page: a renderer that died while nobody called
            # Playwright shows only now (its crash event comes with the next message)
            self.browser._sync(page_impl.title())
        except Exception:  # noqa: BLE001 - a failed spare is only a slower reset
            self.discard()
            return None
        if self.crashed or page_impl.is_closed() or page_impl.url != "about:blank" \
                or len(context_impl.pages) != 1:
            self.discard()
            return None
        return mapping.from_impl(context_impl), mapping.from_impl(page_impl)

    def discard(self) -> None:
        """Close the spare's context in the background (on the event loop's next turn)."""
        task = self.task

        async def close() -> None:
            try:
                context, _ = await task
            except BaseException:  # noqa: BLE001 - nothing was made, nothing to close
                return
            await _close(context)

        try:
            self.browser._loop.create_task(close()).add_done_callback(_retrieve)
        except RuntimeError:  # the loop is closed: the browser and its contexts are gone
            pass


async def _close(context: Any) -> None:
    try:
        await context.close(None)
    except Exception:  # noqa: BLE001 - the browser may be gone already
        pass


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a failure as seen (asyncio would log an unretrieved one at exit)."""
    if not task.cancelled():
        task.exception()
