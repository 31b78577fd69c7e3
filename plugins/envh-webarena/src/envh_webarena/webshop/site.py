"""The WebShop-compatible shop: WebShop's routes and pages over a ``Catalogue``.

Routes (as the original Flask app's): ``/<session_id>`` (instruction and search box; a
session ``fixed_<i>`` plays goal ``i``), ``/search_results/<sid>/<keywords>/<page>`` (ten
results a page), ``/item_page/<sid>/<asin>/<keywords>/<page>/<options>`` (options,
Description / Features / Reviews / Attributes tabs, Buy Now),
``/item_sub_page/<sid>/<asin>/<keywords>/<page>/<sub_page>/<options>`` and
``/done/<sid>/<asin>/<options>`` (the score). Keywords travel space-separated and
options as JSON, both URL-quoted. The same ``Route`` values drive the text mode, so text
and browser modes see one shop. The Attributes tab (the very list the reward's attribute
part matches) is shown only when asked (``show_attrs``), as in WebShop, whose app and text
environment hide it by default.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import attrs

from envh_webarena.webshop import reward
from envh_webarena.webshop.data import Catalogue

SEARCH_RETURN_N = 50
PRODUCT_WINDOW = 10
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
ATTRIBUTES = "Attributes"
EPISODE_COOKIE = "envh_episode"  # set by the browser bridge per episode (one browser context each)
_SESSION = re.compile(r"^fixed_(\d{1,7})$")


@attrs.frozen(kw_only=True)
class Route:
    """One page of the shop: ``kind`` is start, results, item, sub or done."""

    kind: str
    session: str
    keywords: str = ""
    page: int = 1
    asin: str = ""
    sub: str = ""
    options: tuple[tuple[str, str], ...] = ()

    @property
    def chosen(self) -> dict[str, str]:
        return dict(self.options)


def _opts(options: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(options.items()))


def sub_pages(show_attrs: bool) -> tuple[str, ...]:
    """The item page's tabs: WebShop's four, or without Attributes (its default)."""
    return SUB_PAGES if show_attrs else tuple(s for s in SUB_PAGES if s != ATTRIBUTES)


class MalformedOptions(ValueError):
    """A done URL naming one option more than once (``size``, ``SIZE``): not a purchase."""


def canonical_options(product: Mapping[str, Any], chosen: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``chosen`` in the product's own spelling: each (name, value) that matches an offered
    option and value ignoring case becomes the product's pair; the others are dropped (a
    typed URL can hold anything, and WebShop's pages only ever send offered pairs). Raises
    :class:`MalformedOptions` when two keys name the same option ignoring case, since a
    purchase has one value per option and which one was meant cannot be told."""
    seen: dict[str, str] = {}
    for key in chosen:
        folded = str(key).lower()
        if folded in seen:
            raise MalformedOptions(f"options {seen[folded]!r} and {key!r} name one option: choose one value per "
                                   "option")
        seen[folded] = str(key)
    offered = {str(n).lower(): (str(n), [str(v) for v in vs]) for n, vs in product.get("options", {}).items()}
    out: dict[str, str] = {}
    for key, value in chosen.items():
        name, values = offered.get(str(key).lower(), ("", []))
        own = next((v for v in values if v.lower() == str(value).lower()), None)
        if own is not None:
            out[name] = own
    return _opts(out)


def route_url(r: Route) -> str:
    q = lambda s: quote(str(s), safe="")  # noqa: E731
    o = q(json.dumps(dict(r.options), sort_keys=True))
    if r.kind == "start":
        return f"/{q(r.session)}"
    if r.kind == "results":
        return f"/search_results/{q(r.session)}/{q(r.keywords)}/{r.page}"
    if r.kind == "item":
        return f"/item_page/{q(r.session)}/{q(r.asin)}/{q(r.keywords)}/{r.page}/{o}"
    if r.kind == "sub":
        return f"/item_sub_page/{q(r.session)}/{q(r.asin)}/{q(r.keywords)}/{r.page}/{q(r.sub)}/{o}"
    return f"/done/{q(r.session)}/{q(r.asin)}/{o}"


def parse_route(path: str) -> Route | None:
    """The route of a URL path, or None when it is not one of the shop's pages."""
    parts = [unquote(p) for p in urlsplit(path).path.split("/")[1:]]
    try:
        if len(parts) == 1 and parts[0]:
            return Route(kind="start", session=parts[0])
        head, rest = parts[0], parts[1:]
        if head == "search_results" and len(rest) == 3:
            return Route(kind="results", session=rest[0], keywords=rest[1], page=max(1, int(rest[2])))
        if head == "item_page" and len(rest) == 5:
            return Route(kind="item", session=rest[0], asin=rest[1], keywords=rest[2], page=int(rest[3]),
                         options=_opts(_load_options(rest[4])))
        if head == "item_sub_page" and len(rest) == 6:
            return Route(kind="sub", session=rest[0], asin=rest[1], keywords=rest[2], page=int(rest[3]),
                         sub=rest[4], options=_opts(_load_options(rest[5])))
        if head == "done" and len(rest) == 3:
            return Route(kind="done", session=rest[0], asin=rest[1], options=_opts(_load_options(rest[2])))
    except (ValueError, TypeError):
        return None
    return None


def _load_options(text: str) -> dict[str, str]:
    value = json.loads(text) if text else {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError("options must be an object of strings")
    return value


class WebshopSite:
    """Search, pages and scores over one catalogue (shared by the server and text mode)."""

    def __init__(self, catalogue: Catalogue) -> None:
        import bm25s

        self.catalogue = catalogue
        self.asins = list(catalogue.products)
        # (session, the episode's cookie) -> the first done route the server was asked for:
        # the purchase, counted when the request arrives, whether or not the browser got to
        # show the page; the cookie (one per browser context) keeps apart episodes of the
        # same goal played at once
        self.purchases: dict[tuple[str, str], Route] = {}
        # the episode cookies of the browser episodes under way -> their session: a done page
        # is scored (and recorded) only for the session its cookie opened, so no other
        # request (another host name for the server, another session, no cookie) can show
        # the score of an option that was not bought
        self.episodes: dict[str, str] = {}
        self.attrs_shown: set[str] = set()  # the episode cookies whose pages show the Attributes tab
        corpus = [" ".join([p["Title"], p["Description"], " ".join(p["BulletPoints"]),
                            " ".join(v for vs in p["options"].values() for v in vs)]).lower()
                  for p in catalogue.products.values()]
        self._retriever = bm25s.BM25()
        self._retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)

    def open_episode(self, cookie: str, session: str, show_attrs: bool = False) -> None:
        self.episodes[cookie] = session
        if show_attrs:
            self.attrs_shown.add(cookie)

    def close_episode(self, cookie: str) -> None:
        self.episodes.pop(cookie, None)
        self.attrs_shown.discard(cookie)

    def shows_attrs(self, cookie: str) -> bool:
        """Whether the episode ``cookie`` opened shows the Attributes tab (no episode: hidden)."""
        return cookie in self.attrs_shown and cookie in self.episodes

    def canonical(self, route: Route) -> Route:
        """``route`` with its options in the product's spelling (:func:`canonical_options`);
        unchanged when the product is unknown. Raises :class:`MalformedOptions`."""
        product = self.catalogue.products.get(route.asin)
        return route if product is None else attrs.evolve(route, options=canonical_options(product, route.chosen))

    def buy(self, route: Route, cookie: str) -> Route | None:
        """The purchase a done request from the episode ``cookie`` stands for: the first done
        route of the cookie's own session (recorded on the first request), or None when the
        cookie opened no episode or another session."""
        if not cookie or self.episodes.get(cookie) != route.session:
            return None
        return self.purchases.setdefault((route.session, cookie), route)

    def goal_of(self, session: str) -> dict[str, Any] | None:
        m = _SESSION.match(session)
        if not m or int(m.group(1)) >= len(self.catalogue.goals):
            return None
        return self.catalogue.goals[int(m.group(1))]

    def search(self, keywords: str) -> list[str]:
        """ASINs of the best BM25 matches (at most 50, WebShop's SEARCH_RETURN_N)."""
        import bm25s

        tokens = bm25s.tokenize([keywords.lower()], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        k = min(SEARCH_RETURN_N, len(self.asins))
        docs, scores = self._retriever.retrieve(tokens, k=k, show_progress=False)
        return [self.asins[int(d)] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def score(self, route: Route) -> dict[str, Any]:
        """The reward of the purchase a done route describes."""
        goal = self.goal_of(route.session)
        product = self.catalogue.products.get(route.asin)
        if goal is None or product is None:
            return {"reward": 0.0, "error": "unknown session or product"}
        # a done URL is typed by whoever drives the browser: grade only options the product
        # offers, in its own spelling (colour normalisation is case-sensitive, as WebShop's),
        # one value per option (an invented name or a second spelling would add option credit)
        try:
            chosen = dict(canonical_options(product, route.chosen))
        except MalformedOptions as exc:
            return {"reward": 0.0, "error": str(exc)}
        return reward.score(product, goal, self.catalogue.prices[route.asin], chosen)

    # -- pages -------------------------------------------------------------------------
    def clickables(self, r: Route, show_attrs: bool = False) -> list[str]:
        """The buttons of a page, lower-cased, as WebShop's text mode lists them (an option
        value offered under several names once, at its first place)."""
        if r.kind == "start":
            return ["search"]
        if r.kind == "results":
            hits = self.search(r.keywords)
            out = ["back to search"] + (["< prev"] if r.page > 1 else [])
            out += ["next >"] if r.page * PRODUCT_WINDOW < len(hits) else []
            return out + [a.lower() for a in hits[(r.page - 1) * PRODUCT_WINDOW: r.page * PRODUCT_WINDOW]]
        if r.kind == "item":
            product = self.catalogue.products[r.asin]
            opts = [v for vs in product["options"].values() for v in vs]
            return ["back to search", "< prev", *[s.lower() for s in sub_pages(show_attrs)], "buy now",
                    *dict.fromkeys(opts)]
        if r.kind == "sub":
            return ["back to search", "< prev"]
        return []

    def render(self, r: Route, show_attrs: bool = False) -> tuple[int, str]:
        """Status and HTML of a page (a tab the item page does not show is not found)."""
        goal = self.goal_of(r.session)
        if goal is None:
            return 404, _doc("Not found", f"<p>No goal for session {html.escape(r.session)}.</p>")
        if r.kind != "start" and r.asin and r.asin not in self.catalogue.products:
            return 404, _doc("Not found", f"<p>No product {html.escape(r.asin)}.</p>")
        if r.kind == "sub" and r.sub not in sub_pages(show_attrs):
            return 404, _doc("Not found", f"<p>No tab {html.escape(r.sub)} here.</p>")
        head = f'<div id="instruction-text"><h4>Instruction:<br>{html.escape(goal["instruction_text"])}</h4></div>'
        back = _button("Back to Search", route_url(Route(kind="start", session=r.session)))
        if r.kind == "start":
            body = (f'<form method="post" action="{route_url(r)}"><input type="text" name="search_query" '
                    'placeholder="Search..." aria-label="Search"><button type="submit">Search</button></form>')
            return 200, _doc("WebShop", f"<h1>WebShop</h1>{head}{body}")
        if r.kind == "results":
            return 200, _doc("Results", head + back + self._results(r))
        if r.kind == "done":
            s = self.score(r)
            chosen = ", ".join(f"{k}: {v}" for k, v in r.options) or "none"
            body = (f"<h1>Thank you for shopping with us!</h1><p>Your code: {html.escape(r.asin)}</p>"
                    f'<p>Options: {html.escape(chosen)}</p><h3 id="reward">Your score (min 0.0, max 1.0): '
                    f'<span id="score">{s["reward"]:.4f}</span></h3>')
            return 200, _doc("Done", head + body)
        prev = _button("< Prev", route_url(Route(kind="results", session=r.session, keywords=r.keywords,
                                                 page=r.page)) if r.kind == "item" else
                       route_url(attrs.evolve(r, kind="item", sub="")))
        product = self.catalogue.products[r.asin]
        if r.kind == "sub":
            return 200, _doc(r.sub, head + back + prev + self._sub(product, r.sub))
        return 200, _doc(product["Title"][:80], head + back + prev + self._item(product, r, show_attrs))

    def _results(self, r: Route) -> str:
        hits = self.search(r.keywords)
        out = [f"<h3>Page {r.page} (Total results: {len(hits)})</h3>"]
        if r.page > 1:
            out.append(_button("< Prev", route_url(attrs.evolve(r, page=r.page - 1))))
        if r.page * PRODUCT_WINDOW < len(hits):
            out.append(_button("Next >", route_url(attrs.evolve(r, page=r.page + 1))))
        out.append("<ul>")
        for asin in hits[(r.page - 1) * PRODUCT_WINDOW: r.page * PRODUCT_WINDOW]:
            p = self.catalogue.products[asin]
            url = route_url(Route(kind="item", session=r.session, asin=asin, keywords=r.keywords, page=r.page))
            out.append(f'<li><a class="product-link" href="{url}">{html.escape(asin)}</a> '
                       f'<h4>{html.escape(p["Title"])}</h4><h5>{html.escape(p["Price"])}</h5></li>')
        return "".join(out) + "</ul>"

    def _item(self, product: dict[str, Any], r: Route, show_attrs: bool) -> str:
        out = []
        for name, values in product["options"].items():
            out.append(f'<fieldset><legend>{html.escape(name)}</legend>')
            for value in values:
                chosen = dict(r.options)
                url = route_url(attrs.evolve(r, options=_opts({**chosen, name: value})))
                checked = " checked" if chosen.get(name) == value else ""
                out.append(f'<label><input type="radio" name="{html.escape(name)}" value="{html.escape(value)}"'
                           f'{checked} onclick="window.location.href={html.escape(json.dumps(url))}">'
                           f'{html.escape(value)}</label>')
            out.append("</fieldset>")
        out.append(f'<h2>{html.escape(product["Title"])}</h2><h4>Price: {html.escape(product["Price"])}</h4>'
                   f'<h4>Rating: {html.escape(str(product["Rating"]))}</h4>')
        for sub in sub_pages(show_attrs):
            out.append(_button(sub, route_url(attrs.evolve(r, kind="sub", sub=sub))))
        out.append(_button("Buy Now", route_url(Route(kind="done", session=r.session, asin=r.asin,
                                                      options=r.options))))
        return "".join(out)

    def _sub(self, product: dict[str, Any], sub: str) -> str:
        if sub == "Description":
            return f"<p>{html.escape(product['Description'])}</p>"
        if sub == "Features":
            return "<ul>" + "".join(f"<li>{html.escape(b)}</li>" for b in product["BulletPoints"]) + "</ul>"
        if sub == "Reviews":
            return "".join(f"<div><h4>{html.escape(str(v['title']))} ({html.escape(str(v['score']))})</h4>"
                           f"<p>{html.escape(str(v['body']))}</p></div>" for v in product["Reviews"]) or "<p>No reviews.</p>"
        if sub != ATTRIBUTES:  # render() lets through only the tabs of sub_pages()
            raise ValueError(f"no tab {sub!r}")
        return "<ul>" + "".join(f"<li>{html.escape(a)}</li>" for a in product["Attributes"]) + "</ul>"


def _button(label: str, url: str) -> str:
    return (f'<form method="get" action="{html.escape(url)}" style="display:inline">'
            f'<button type="submit">{html.escape(label)}</button></form>')


def _doc(title: str, body: str) -> str:
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>'
            f"<body>{body}</body></html>")


def handler_for(site: WebshopSite) -> type[BaseHTTPRequestHandler]:
    """A request handler serving ``site`` (GET pages; POST on the start page searches)."""

    class Handler(BaseHTTPRequestHandler):
        timeout = 10  # a client announcing more body than it sends cannot hold a thread

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass

        def _send(self, status: int, body: str, location: str | None = None) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            if location:
                self.send_header("Location", location)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            r = parse_route(self.path)
            if r is None:
                self._send(404, _doc("Not found", "<p>No such page.</p>"))
                return
            cookie = self._cookie()
            if r.kind == "done":
                try:
                    r = site.canonical(r)
                except MalformedOptions as exc:
                    self._send(400, _doc("No purchase", f"<h1>No purchase</h1><p>{html.escape(str(exc))}: nothing "
                                         "was bought or scored.</p>"))
                    return
                bought = site.buy(r, cookie)
                if bought is None:
                    self._send(403, _doc("No purchase", "<h1>No purchase</h1><p>This browser has no shopping "
                                         "episode for this session here: nothing was bought or scored.</p>"))
                    return
                r = bought
            self._send(*site.render(r, show_attrs=site.shows_attrs(cookie)))

        def _cookie(self) -> str:
            jar = SimpleCookie()
            try:
                jar.load(self.headers.get("Cookie") or "")
            except CookieError:
                pass
            return jar[EPISODE_COOKIE].value if EPISODE_COOKIE in jar else ""

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            r = parse_route(self.path)
            if r is not None and r.kind != "start":  # only the search box posts: the page as a GET
                self._send(303, "", location=route_url(r))
                return
            size = min(int(self.headers.get("Content-Length") or 0), 100_000)
            form = parse_qs(self.rfile.read(size).decode("utf-8", "replace"))
            query = " ".join((form.get("search_query") or [""])[0].lower().split())[:500]
            if r is None or r.kind != "start" or not query:
                self._send(*site.render(r) if r else (404, _doc("Not found", "")))
                return
            target = route_url(Route(kind="results", session=r.session, keywords=query, page=1))
            self._send(303, "", location=target)

    return Handler
