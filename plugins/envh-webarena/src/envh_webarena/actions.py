"""BrowserGym's high-level action set as envh tools, and their execution on a session.

Elements are named by ``bid`` (see ``axtree``). A policy mistake (an unknown bid, an element
that cannot take the action, a bad key name, a URL scheme other than http(s)) raises
``ActionError``, which the bridge turns into an error observation; a dead browser raises
``envh.errors.InfraError``.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from envh import ToolSpec, errors

from envh_webarena.runtime import is_browser_gone
from envh_webarena.session import BrowserSession

_BID = {"type": "string", "maxLength": 32, "description": "the element's bid, the [number] in the tree"}
_COORD = {"type": "number", "minimum": 0, "maximum": 10000, "description": "CSS pixels from the viewport's top left"}
_BUTTON = {"type": "string", "enum": ["left", "middle", "right"], "description": "mouse button (default left)"}


def _tool(name: str, description: str, props: dict[str, Any] | None = None,
          required: tuple[str, ...] = ()) -> ToolSpec:
    return ToolSpec(name=name, description=description, parameters={
        "type": "object", "properties": props or {}, "required": list(required), "additionalProperties": False})


BROWSER_TOOLS: tuple[ToolSpec, ...] = (
    _tool("click", "Click an element.", {"bid": _BID, "button": {
        "type": "string", "enum": ["left", "middle", "right"], "description": "mouse button (default left)"}},
        ("bid",)),
    _tool("dblclick", "Double-click an element.", {"bid": _BID}, ("bid",)),
    _tool("fill", "Clear a text field and type a value into it.", {"bid": _BID, "value": {
        "type": "string", "maxLength": 5000, "description": "the text to enter"}}, ("bid", "value")),
    _tool("clear", "Clear a text field.", {"bid": _BID}, ("bid",)),
    _tool("select_option", "Select option(s) of a <select> element by label or value.", {"bid": _BID, "options": {
        "type": ["string", "array"], "items": {"type": "string", "maxLength": 500}, "maxLength": 500,
        "maxItems": 50, "description": "one option or a list of options"}}, ("bid", "options")),
    _tool("hover", "Move the mouse over an element.", {"bid": _BID}, ("bid",)),
    _tool("press", "Focus an element and press a key combination, e.g. 'Enter', 'Control+a'.", {
        "bid": _BID, "key_comb": {"type": "string", "maxLength": 60, "description": "Playwright key name(s)"}},
        ("bid", "key_comb")),
    _tool("focus", "Focus an element.", {"bid": _BID}, ("bid",)),
    _tool("scroll", "Scroll the page by a number of pixels.", {
        "delta_x": {"type": "number", "minimum": -100000, "maximum": 100000},
        "delta_y": {"type": "number", "minimum": -100000, "maximum": 100000}}, ("delta_x", "delta_y")),
    _tool("goto", "Open a URL in the current tab.", {"url": {
        "type": "string", "maxLength": 2048, "description": "an http(s) URL"}}, ("url",)),
    _tool("drag_and_drop", "Press the mouse on one element, move it onto another and release it.",
          {"from_bid": _BID, "to_bid": _BID}, ("from_bid", "to_bid")),
    _tool("mouse_move", "Move the mouse to a point of the viewport (CSS pixels, as in a screenshot).",
          {"x": _COORD, "y": _COORD}, ("x", "y")),
    _tool("mouse_down", "Move the mouse to a point and press a button there.",
          {"x": _COORD, "y": _COORD, "button": _BUTTON}, ("x", "y")),
    _tool("mouse_up", "Move the mouse to a point and release a button there.",
          {"x": _COORD, "y": _COORD, "button": _BUTTON}, ("x", "y")),
    _tool("mouse_click", "Move the mouse to a point and click.",
          {"x": _COORD, "y": _COORD, "button": _BUTTON}, ("x", "y")),
    _tool("mouse_dblclick", "Move the mouse to a point and double-click.",
          {"x": _COORD, "y": _COORD, "button": _BUTTON}, ("x", "y")),
    _tool("mouse_drag_and_drop", "Press the mouse at one point, move it to another and release it.",
          {"from_x": _COORD, "from_y": _COORD, "to_x": _COORD, "to_y": _COORD}, ("from_x", "from_y", "to_x", "to_y")),
    _tool("go_back", "Go back in the tab's history."),
    _tool("go_forward", "Go forward in the tab's history."),
    _tool("new_tab", "Open a new, empty tab and focus it."),
    _tool("tab_focus", "Focus the tab with this index.", {"index": {"type": "integer", "minimum": 0, "maximum": 50}},
          ("index",)),
    _tool("tab_close", "Close the current tab."),
    _tool("noop", "Do nothing for a while (let the page update).", {"wait_ms": {
        "type": "number", "minimum": 0, "maximum": 5000}}),
    _tool("send_msg_to_user", "Send a message (your answer) to the user.", {"text": {
        "type": "string", "maxLength": 5000}}, ("text",)),
    _tool("stop", "End the episode, optionally with a final answer.", {"answer": {
        "type": "string", "maxLength": 5000, "description": "the answer, if the task asks for one"}}),
)
_BID_RE = re.compile(r"^[a-z]{0,4}[0-9]{1,9}$")
_URL_SCHEMES = ("http", "https")


class ActionError(Exception):
    """A policy mistake while acting on the page; the message is shown to the policy."""


def check_url(url: str, *, devtools_port: int | None = None) -> str:
    """An http(s) URL or ``about:blank``; other schemes (file:, javascript:, chrome:) are
    refused, and so is the browser's DevTools port (``devtools_port``: its HTTP endpoint
    lists, opens and closes every page of the shared browser, other episodes' too)."""
    url = url.strip()
    if url == "about:blank":
        return url
    parts = urlsplit(url)
    if parts.scheme.lower() not in _URL_SCHEMES or not parts.netloc:
        raise ActionError(f"goto needs an http(s) URL with a host, got {url[:200]!r}.")
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError as exc:
        raise ActionError(f"goto needs a valid port, got {url[:200]!r}.") from exc
    if devtools_port is not None and port == devtools_port:
        raise ActionError("goto to the browser's own DevTools port is refused.")
    return url


def _locate(session: BrowserSession, bid: str) -> Any:
    if not _BID_RE.match(bid):
        raise ActionError(f"{bid[:40]!r} is not a bid: use the [number] shown before an element.")
    from envh_webarena.axtree import frame_prefixes

    prefix = bid.rstrip("0123456789")
    frame = next((f for f, p in frame_prefixes(session.page) if p == prefix), None)
    if frame is None:
        raise ActionError(f"No element with bid {bid!r} on this page (its frame is gone).")
    loc = frame.locator(f'[bid="{bid}"]')
    count = loc.count()
    if count == 0:
        raise ActionError(f"No element with bid {bid!r} on this page.")
    if count > 1:  # the page copied the bid onto another element since the last observation
        raise ActionError(f"bid {bid!r} names {count} elements on this page now (the page copied it): "
                          "read the page again and use the bid it shows.")
    return loc.first


def run(session: BrowserSession, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Perform one browser action. Returns ``{"message": ...}`` / ``{"stop": answer}`` for
    the user-facing actions, ``{}`` for the rest."""
    from playwright.sync_api import Error
    from playwright.sync_api import TimeoutError as PWTimeout

    session.check_alive()
    try:
        out = _dispatch(session, tool, args)
        _settle(session)
        return out
    except PWTimeout as exc:
        session.check_alive()
        raise ActionError(f"{tool} timed out: {_first_line(exc)}") from exc
    except Error as exc:
        if is_browser_gone(exc) or session.crashed or not session.browser_alive():
            session.check_alive(exc)
            raise errors.InfraError(f"The browser went away during {tool}: {_first_line(exc)}") from exc
        raise ActionError(f"{tool} failed: {_first_line(exc)}") from exc
    except IndexError as exc:
        raise ActionError(str(exc)) from exc


def _dispatch(session: BrowserSession, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    if tool == "click":
        _locate(session, args["bid"]).click(button=args.get("button", "left"))
    elif tool == "dblclick":
        _locate(session, args["bid"]).dblclick()
    elif tool == "fill":
        _locate(session, args["bid"]).fill(args["value"])
    elif tool == "clear":
        _locate(session, args["bid"]).clear()
    elif tool == "select_option":
        options = args["options"]
        _locate(session, args["bid"]).select_option(list(options)[:50] if isinstance(options, list) else options)
    elif tool == "hover":
        _locate(session, args["bid"]).hover()
    elif tool == "press":
        _locate(session, args["bid"]).press(args["key_comb"])
    elif tool == "focus":
        _locate(session, args["bid"]).focus()
    elif tool == "scroll":
        session.page.mouse.wheel(_clamp(args["delta_x"], 100_000), _clamp(args["delta_y"], 100_000))
    elif tool == "goto":
        session.page.goto(check_url(args["url"], devtools_port=session.port))
    elif tool == "drag_and_drop":
        _drag(session, _center(session, args["from_bid"]), _center(session, args["to_bid"]))
    elif tool.startswith("mouse_"):
        _mouse(session, tool, args)
    elif tool == "go_back":  # a page restored from the back-forward cache fires no load event:
        session.page.go_back(wait_until="commit")  # wait for the commit, then settle
    elif tool == "go_forward":
        session.page.go_forward(wait_until="commit")
    elif tool == "new_tab":
        session.new_tab()
    elif tool == "tab_focus":
        session.focus(int(args["index"]))
    elif tool == "tab_close":
        session.close_tab()
    elif tool == "noop":
        session.page.wait_for_timeout(max(0.0, _clamp(args.get("wait_ms", 0), 5000)))
    elif tool == "send_msg_to_user":
        return {"message": args["text"]}
    elif tool == "stop":
        return {"stop": args.get("answer", "")}
    else:  # the bridge validated the tool name against its tools; this is a bug
        raise errors.EnvError(f"Browser action {tool!r} has no implementation.")
    return {}


def _center(session: BrowserSession, bid: str) -> tuple[float, float]:
    """The centre of an element in viewport pixels, scrolled into view first."""
    loc = _locate(session, bid)
    loc.scroll_into_view_if_needed()
    box = loc.bounding_box()
    if not box or box["width"] <= 0 or box["height"] <= 0:
        raise ActionError(f"The element with bid {bid!r} is not visible: it cannot be dragged or dropped on.")
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def _drag(session: BrowserSession, start: tuple[float, float], end: tuple[float, float]) -> None:
    """Press at ``start``, move to ``end`` (in steps: drag libraries follow mousemove
    events, and an element dragged under the pointer must not stop the move), release."""
    mouse = session.page.mouse
    mouse.move(*start)
    mouse.down()
    mouse.move(*end, steps=10)
    mouse.up()


def _mouse(session: BrowserSession, tool: str, args: dict[str, Any]) -> None:
    """BrowserGym's coordinate actions (``mouse_move``, ``mouse_down``... at x, y)."""
    mouse = session.page.mouse
    if tool == "mouse_drag_and_drop":
        _drag(session, (_coord(args["from_x"]), _coord(args["from_y"])), (_coord(args["to_x"]), _coord(args["to_y"])))
        return
    x, y, button = _coord(args["x"]), _coord(args["y"]), args.get("button", "left")
    if tool == "mouse_move":
        mouse.move(x, y)
    elif tool == "mouse_down":
        mouse.move(x, y)
        mouse.down(button=button)
    elif tool == "mouse_up":
        mouse.move(x, y)
        mouse.up(button=button)
    elif tool == "mouse_click":
        mouse.click(x, y, button=button)
    elif tool == "mouse_dblclick":
        mouse.dblclick(x, y, button=button)
    else:  # the bridge validated the tool name against its tools; this is a bug
        raise errors.EnvError(f"Browser action {tool!r} has no implementation.")


def _coord(value: Any) -> float:
    return max(0.0, _clamp(value, 10_000))


def _clamp(value: Any, bound: float) -> float:
    number = float(value)
    if number != number:  # NaN
        raise ActionError("a number is required, got NaN.")
    return max(-bound, min(bound, number))


def _settle(session: BrowserSession) -> None:
    """Let a navigation the action started reach DOMContentLoaded (bounded)."""
    from playwright.sync_api import Error

    try:
        session.page.wait_for_load_state("domcontentloaded", timeout=5000)
    except Error:
        pass


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
