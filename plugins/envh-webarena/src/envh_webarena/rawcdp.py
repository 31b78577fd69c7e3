"""A DevTools connection of the runtime's own to one page, for an observation's large reads.

An observation reads the page's whole DOM and accessibility tree (a MiniWoB flight form:
1.3 MB of JSON). Through Playwright's CDP session each message crosses Playwright's driver
process, which parses and re-encodes it; Chromium's DevTools endpoint (127.0.0.1, the one
Playwright attached to) answers the same requests to a connection of our own directly, in
about half the time. Requests are sent together and their answers gathered (a pipeline).

Used for reads only (``DOM.getDocument``, ``Accessibility.getFullAXTree``, then
``DOM.disable`` so the page's DOM changes are not streamed to us between observations);
anything that fails here is read through Playwright's session instead.
"""

from __future__ import annotations

import json
from typing import Any


class RawCDP:
    """One page's own DevTools connection (lives on the driver's loop; see the module doc)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self._next = 0

    @classmethod
    async def open(cls, port: int, target_id: str) -> RawCDP:
        from websockets.asyncio.client import connect

        ws = await connect(f"ws://127.0.0.1:{port}/devtools/page/{target_id}", max_size=None,
                           ping_interval=None, compression=None, open_timeout=10)
        return cls(ws)

    async def send_all(self, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        """Send every ``(method, params)`` at once; each answer's result, or an ``Error``
        (Playwright's class, as its session would raise) for a request Chromium refused."""
        from playwright.async_api import Error

        ids = []
        for method, params in calls:
            self._next += 1
            ids.append(self._next)
            await self.ws.send(json.dumps({"id": self._next, "method": method, "params": params}))
        answers: dict[int, dict[str, Any]] = {}
        wanted = set(ids)
        while len(answers) < len(ids):
            message = json.loads(await self.ws.recv())
            if message.get("id") in wanted:  # events (none once DOM is disabled) are dropped
                answers[message["id"]] = message
        out: list[Any] = []
        for i in ids:
            answer = answers[i]
            if "error" in answer:
                out.append(Error(f"Protocol error: {answer['error'].get('message', answer['error'])}"))
            else:
                out.append(answer.get("result", {}))
        return out

    async def close(self) -> None:
        try:
            await self.ws.close()
        except Exception:  # noqa: BLE001 - the browser may be gone: nothing to close
            pass


async def open_channels(context: Any, page: Any, port: int | None,
                        closers: Any = None) -> tuple[Any, RawCDP | None]:
    """A Playwright CDP session of ``page`` and, when the DevTools ``port`` is known, a
    connection of our own to it (None if it cannot be made: the session does all then),
    added to ``closers`` (the driver's: closed if its loop ends first)."""
    cdp = await context.new_cdp_session(page)
    if port is None:
        return cdp, None
    try:
        target = (await cdp.send("Target.getTargetInfo"))["targetInfo"]["targetId"]
        raw = await RawCDP.open(port, target)
    except Exception:  # noqa: BLE001 - an observation is then read through the session alone
        return cdp, None
    if closers is not None:
        closers.add(raw)
    return cdp, raw
