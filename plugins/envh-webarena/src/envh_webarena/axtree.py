"""Accessibility-tree observations with BrowserGym's ``bid`` element ids.

Every element of the page gets a ``bid`` attribute the first time it is seen (a per-page
counter, so ids stay stable while the element lives and are the same for the same page and
the same actions). Chromium's own accessibility tree (CDP ``Accessibility.getFullAXTree``)
is then joined to the DOM by backend node id to label each node with its element's bid,
and printed one node a line, BrowserGym style::

    RootWebArea 'Click Button Task', focused
        StaticText 'Click on the "Ok" button.'
        [14] button 'Ok'

Nodes without a role or name (``generic``, ``none``, ignored nodes) are not printed;
their children are, one level up. The text is bounded (``max_chars``).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from typing import Any

MARK_JS = """(prefix) => {
  let next = window.__envhNextBid || 0;
  // a bid seen before in this pass is a copy (cloneNode copies attributes; a page may copy
  // one on purpose): the later element gets a new bid, so each bid names one element
  const seen = new Set();
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      let bid = el.getAttribute('bid');
      if (bid === null || seen.has(bid)) { bid = prefix + String(next++); el.setAttribute('bid', bid); }
      seen.add(bid);
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  window.__envhNextBid = next;
  return next;
}"""

# a page can open frames without end: only this many are looked into for out-of-process
# ones, and only this many of those are read (each costs a CDP session per observation)
MAX_FRAMES = 100
MAX_REMOTE_FRAMES = 10
_BID = re.compile(r"^[a-z]{0,4}[0-9]{1,9}$")
_SKIP_ROLES = frozenset({"generic", "none", "presentation", "InlineTextBox", "LineBreak", "ignored"})
_PROPS = ("focused", "checked", "selected", "expanded", "disabled", "required", "pressed", "readonly")


def _bid_map(dom_root: dict[str, Any]) -> dict[int, str]:
    out: dict[int, str] = {}
    # (node, inside a closed shadow root): MARK_JS cannot enter a closed shadow root, so a
    # bid there is the page's own, and may copy one of ours
    stack = [(dom_root, False)]
    while stack:
        node, closed = stack.pop()
        attrs = node.get("attributes")
        if attrs and not closed:
            for i in range(0, len(attrs) - 1, 2):
                if attrs[i] == "bid":
                    if _BID.match(attrs[i + 1]):  # a page may write its own bid attributes: only ours count
                        out[node["backendNodeId"]] = attrs[i + 1]
                    break
        stack.extend((child, closed) for child in node.get("children", ()))
        stack.extend((root, closed or root.get("shadowRootType") == "closed") for root in node.get("shadowRoots", ()))
        if node.get("contentDocument"):
            stack.append((node["contentDocument"], False))
    return out


def _iframes(dom_root: dict[str, Any]) -> dict[str, int]:
    """Frame id → backend node id of the <iframe> element holding it."""
    out: dict[str, int] = {}
    stack = [dom_root]
    while stack:
        node = stack.pop()
        if node.get("frameId") and node.get("nodeName") in ("IFRAME", "FRAME"):
            out[node["frameId"]] = node["backendNodeId"]
        stack.extend(node.get("children", ()))
        stack.extend(node.get("shadowRoots", ()))
        if node.get("contentDocument"):
            stack.append(node["contentDocument"])
    return out


class _Prefixes:
    """The bid prefixes given out on one page: a frame keeps its prefix while it lives, and
    a prefix is never given to another frame of the page."""

    def __init__(self) -> None:
        self.of: dict[Any, str] = {}
        self.count = 0


_PAGE_PREFIXES: weakref.WeakKeyDictionary[Any, _Prefixes] = weakref.WeakKeyDictionary()


def frame_prefixes(page: Any) -> list[tuple[Any, str]]:
    """Each frame of the page with its bid prefix: '' for the main frame, then a, b, ... in
    the order the frames were first seen. Not the frame's position: an iframe removed (an
    ad slot reloading) would otherwise hand its prefix, and so its bids, to the next one."""
    known = _PAGE_PREFIXES.get(page)
    if known is None:
        known = _PAGE_PREFIXES[page] = _Prefixes()
    frames = page.frames
    out = [(frames[0], "")]
    for frame in frames[1:]:
        prefix = known.of.get(frame)
        if prefix is None:
            known.count += 1
            prefix = known.of[frame] = frame_prefix(known.count)
        out.append((frame, prefix))
    if len(known.of) > 2 * len(frames):  # forget frames that are gone (their prefixes stay used)
        live = {id(f) for f in frames}
        known.of = {f: p for f, p in known.of.items() if id(f) in live}
    return out


def frame_prefix(index: int) -> str:
    """Bid prefix of the page's ``index``-th frame: '' for the main frame, then a, b, ..., aa."""
    if index == 0:
        return ""
    out = ""
    while index > 0:
        index, rest = divmod(index - 1, 26)
        out = chr(97 + rest) + out
    return out


def _namespaced(nodes: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    out = []
    for n in nodes:
        m = dict(n)
        m["nodeId"] = f"{key}:{n['nodeId']}"
        m["childIds"] = [f"{key}:{c}" for c in n.get("childIds", ())]
        if n.get("parentId"):
            m["parentId"] = f"{key}:{n['parentId']}"
        out.append(m)
    return out


def _value(field: Any) -> Any:
    return field.get("value") if isinstance(field, dict) else None


def _quote(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[:limit] + "…"
    return "'" + text.replace("'", "\\'") + "'"


def render(ax_nodes: list[dict[str, Any]], dom_root: dict[str, Any], *, max_chars: int,
           bids: dict[Any, str] | None = None) -> tuple[str, list[str]]:
    """The tree as text (at most ``max_chars``) and the bids it shows, in order."""
    bids = _bid_map(dom_root) if bids is None else bids
    by_id = {n["nodeId"]: n for n in ax_nodes}
    roots = [n for n in ax_nodes if not n.get("parentId")]
    lines: list[str] = []
    shown: list[str] = []
    size, truncated = 0, False
    # (node, depth, parent's name, bid of a skipped generic parent: its text carries that bid,
    # so a clickable <span> of text is reachable as BrowserGym's trees make it)
    stack: list[tuple[dict[str, Any], int, str, str | None]] = [(r, 0, "", None) for r in reversed(roots)]
    seen: set[str] = set()
    while stack:
        node, depth, parent_name, carrier = stack.pop()
        if node["nodeId"] in seen:  # never loop, whatever the trees say
            continue
        seen.add(node["nodeId"])
        role = _value(node.get("role")) or ""
        name = str(_value(node.get("name")) or "")
        printed = not node.get("ignored") and role not in _SKIP_ROLES and not (
            role == "StaticText" and (not name.strip() or name.strip() == parent_name.strip()))
        if printed and role == "generic" and not name:
            printed = False
        child_depth = depth
        if printed:
            bid = bids.get(node.get("backendDOMNodeId", -1)) if role != "StaticText" else carrier
            parts = [f"[{bid}] {role}" if bid is not None else role]
            if name:
                parts[0] += " " + _quote(name)
            value = _value(node.get("value"))
            if value not in (None, "") and role != "StaticText":
                parts.append(f"value={_quote(str(value))}")
            for prop in node.get("properties", ()):
                pname, pval = prop.get("name"), _value(prop.get("value"))
                if pname in _PROPS and pval not in (None, False, "false"):
                    parts.append(pname if pval is True or pval == "true" else f"{pname}={pval}")
            line = "\t" * depth + ", ".join(parts)
            if size + len(line) + 1 > max_chars:
                truncated = True
                break
            lines.append(line)
            size += len(line) + 1
            if bid is not None and bid not in shown:
                shown.append(bid)
            child_depth = depth + 1
        children = [by_id[c] for c in node.get("childIds", ()) if c in by_id]
        own = bids.get(node.get("backendDOMNodeId", -1)) if not printed and role == "generic" else None
        for child in reversed(children):
            stack.append((child, child_depth, name if printed else parent_name, own))
    text = "\n".join(lines)
    if truncated:
        text += f"\n… (accessibility tree cut at {max_chars} characters)"
    return text, shown


def snapshot(page: Any, cdp: Any, *, max_chars: int,
             raw: Callable[[list[tuple[str, dict[str, Any]]]], list[Any]] | None = None) -> tuple[str, list[str]]:
    """Mark the page's elements with bids (frame-prefixed inside iframes, as BrowserGym
    does) and render its accessibility tree with every iframe's tree inside its
    ``Iframe`` node: same-process frames through the page's CDP session, out-of-process
    ones (another site: Chromium isolates it in its own renderer) through a CDP session
    of their own, whose node ids are kept apart by frame id."""
    from playwright.sync_api import Error

    from envh_webarena.aio import call_all

    # 1. bids into every frame, and the frame ids (all requests at once)
    marked = call_all([*((f, "evaluate", (MARK_JS, prefix)) for f, prefix in frame_prefixes(page)),
                       (cdp, "send", ("Page.getFrameTree",))])
    if isinstance(marked[0], Exception):
        raise marked[0]  # the main frame is the page: it must be readable
    child_ids = _frame_ids(marked[-1])[1:MAX_FRAMES + 1]
    # 2. the DOM, the page's tree and each child frame's tree, at once (a frame in another
    # process answers with an error here: it is read through its own session below)
    # (through a connection of our own when there is one: rawcdp.py; then DOM.disable, so
    # the page's DOM changes are not streamed to us until the next observation)
    reads = [("DOM.getDocument", {"depth": -1, "pierce": True}), ("Accessibility.getFullAXTree", {}),
             *(("Accessibility.getFullAXTree", {"frameId": fid}) for fid in child_ids), ("DOM.disable", {})]
    got = None
    if raw is not None:
        try:
            got = raw(reads)
        except Exception:  # noqa: BLE001 - read through Playwright's session instead
            got = None
    if got is None:
        got = call_all([(cdp, "send", (method, params)) for method, params in reads])
    got = got[:-1]
    for answer in got[:2]:
        if isinstance(answer, Exception):
            raise answer
    prefetched = dict(zip(child_ids, got[2:]))
    root = got[0].get("root", {})
    bids: dict[Any, str] = dict(_bid_map(root))
    nodes = _namespaced(got[1].get("nodes", []), "main")
    by_backend = {n.get("backendDOMNodeId"): n for n in nodes}
    remote: dict[str, Any] | None = None  # frame id -> CDP session of an out-of-process frame
    # (document, its session, the prefix its backend ids carry: None in the page's renderer)
    docs: list[tuple[dict[str, Any], Any, str | None]] = [(root, cdp, None)]
    try:
        while docs:
            doc, session, prefix = docs.pop(0)
            for frame_id, element in _iframes(doc).items():
                holder = by_backend.get(element if prefix is None else f"{prefix}:{element}")
                if holder is None:
                    continue
                try:
                    answer = prefetched.pop(frame_id, None) if session is cdp else None
                    if isinstance(answer, Exception):
                        raise answer
                    if answer is None:
                        answer = session.send("Accessibility.getFullAXTree", {"frameId": frame_id})
                    sub = _namespaced(answer.get("nodes", []), frame_id)
                    sub_prefix = prefix
                except Error:
                    if remote is None:
                        remote = _remote_sessions(page)
                    own = remote.get(frame_id)
                    if own is None:
                        continue  # a frame that went away meanwhile
                    try:
                        sub_doc = own.send("DOM.getDocument", {"depth": -1, "pierce": True}).get("root", {})
                        sub = _namespaced(own.send("Accessibility.getFullAXTree").get("nodes", []), frame_id)
                    except Error:
                        continue
                    sub_prefix = frame_id
                    bids.update({f"{frame_id}:{k}": v for k, v in _bid_map(sub_doc).items()})
                    docs.append((sub_doc, own, frame_id))
                if sub_prefix is not None:
                    for n in sub:
                        if "backendDOMNodeId" in n:
                            n["backendDOMNodeId"] = f"{sub_prefix}:{n['backendDOMNodeId']}"
                roots = [n for n in sub if not n.get("parentId")]
                for r in roots:
                    r["parentId"] = holder["nodeId"]
                holder["childIds"] = [*holder.get("childIds", []), *(r["nodeId"] for r in roots)]
                nodes += sub
                by_backend.update((n.get("backendDOMNodeId"), n) for n in sub)
    finally:
        for own in (remote or {}).values():
            try:
                own.detach()
            except Error:
                pass
    return render(nodes, root, max_chars=max_chars, bids=bids)


def _frame_ids(tree: Any) -> list[str]:
    """Frame ids of a ``Page.getFrameTree`` answer, the main frame first (none on an error)."""
    if not isinstance(tree, dict):
        return []
    out: list[str] = []
    stack = [tree.get("frameTree", {})]
    while stack and len(out) <= MAX_FRAMES:
        node = stack.pop()
        fid = node.get("frame", {}).get("id")
        if fid:
            out.append(fid)
        stack.extend(reversed(node.get("childFrames", [])))
    return out


def _remote_sessions(page: Any) -> dict[str, Any]:
    """Frame id -> a CDP session of each out-of-process frame of the page (Playwright
    opens one only for a frame in its own renderer; others refuse, and are skipped)."""
    from playwright.sync_api import Error

    out: dict[str, Any] = {}
    for frame in page.frames[1:MAX_FRAMES + 1]:
        if len(out) >= MAX_REMOTE_FRAMES:
            break
        try:
            session = page.context.new_cdp_session(frame)
        except Error:
            continue  # in the page's renderer: reached through the page's session
        try:
            out[session.send("Page.getFrameTree")["frameTree"]["frame"]["id"]] = session
        except (Error, KeyError, TypeError):
            session.detach()
    return out


def find_bids(text: str, role: str, name: str | None = None) -> list[str]:
    """Bids of the tree lines with this role (and exactly this name), in order; for
    scripted policies and tests."""
    pattern = rf"\[(\w+)\] {re.escape(role)}" + (rf" '{re.escape(name)}'(?:,|$|\n)" if name is not None else r"\b")
    return re.findall(pattern, text, flags=re.M)


def find_bid(text: str, role: str, name: str | None = None) -> str:
    """The first bid ``find_bids`` finds; ``LookupError`` when there is none."""
    found = find_bids(text, role, name)
    if not found:
        raise LookupError(f"no {role} {name!r} in the tree")
    return found[0]
