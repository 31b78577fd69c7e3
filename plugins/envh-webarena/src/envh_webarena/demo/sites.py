"""A small shop and forum in WebArena's shape, served on 127.0.0.1 (tests and the README example).

``Shop`` follows the Magento paths WebArena's shopping tasks use (``/customer/account/login/``
with Email/Password and "Sign In", ``/catalogsearch/result/?q=``, product pages, cart,
``/sales/order/view/order_id/<n>/``, ``/sales/order/history/``); ``Forum`` follows Postmill's
(``/login`` with Username/Password and "Log in", ``/f/<forum>``, ``/f/<forum>/<id>/<slug>``,
``/submit``). Both log in with WebArena's accounts, keep sessions in a cookie and offer
``/reset`` (what ``WA_FULL_RESET`` points at) to restore their first state.
"""

from __future__ import annotations

import html
import re
import secrets
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from envh_webarena.httpserve import LocalServer

E = html.escape


def page(title: str, body: str, user: str | None = None) -> str:
    who = f'<span class="user">Signed in as {E(user)}</span>' if user else '<a href="LOGIN">Sign in</a>'
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{E(title)}</title></head><body>'
            f"<header>{who}</header><main><h1>{E(title)}</h1>{body}</main></body></html>")


class Site:
    """Shared plumbing: routing by regex, cookie sessions, forms, the reset endpoint."""

    login_path = "/login"
    accounts: dict[str, str] = {}

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sessions: dict[str, str] = {}
        self.resets = 0
        self.reset_state()
        self.server = LocalServer(self._handler())
        self.url = self.server.url

    def reset_state(self) -> None:
        raise NotImplementedError

    def routes(self) -> list[tuple[str, str, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        self.server.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 10

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def _dispatch(self, method: str) -> None:
                parts = urlsplit(self.path)
                form: dict[str, str] = {}
                if method == "POST":
                    size = min(int(self.headers.get("Content-Length") or 0), 100_000)
                    form = {k: v[0] for k, v in parse_qs(self.rfile.read(size).decode()).items()}
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                cookie = self.headers.get("Cookie") or ""
                sid = next((c.split("=", 1)[1] for c in cookie.split("; ") if c.startswith("sid=")), None)
                with site.lock:
                    user = site.sessions.get(sid or "")
                    if parts.path == "/reset":
                        site.reset_state()
                        site.resets += 1
                        self._reply(200, "reset done")
                        return
                    for m, pattern, fn in site.routes():
                        match = re.fullmatch(pattern, parts.path)
                        if m == method and match:
                            out = fn(user=user, form=form, query=query, **match.groupdict())
                            break
                    else:
                        out = (404, page("Not found", "<p>No such page.</p>", user))
                status, body, *extra = out
                headers = extra[0] if extra else {}
                if "login_as" in headers:
                    token = secrets.token_hex(8)
                    with site.lock:
                        site.sessions[token] = headers.pop("login_as")
                    headers["Set-Cookie"] = f"sid={token}; Path=/; HttpOnly"
                self._reply(status, body.replace('href="LOGIN"', f'href="{site.login_path}"'), headers)

            def _reply(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._dispatch("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._dispatch("POST")

        return Handler

    def _login(self, user: str | None, form: dict[str, str], key: str, fields: tuple[str, str],
               button: str, home: str, **_: Any) -> tuple[Any, ...]:
        if form:
            name, password = form.get(key, ""), form.get("password", "")
            if self.accounts.get(name) == password:
                return 303, "", {"Location": home, "login_as": name}
            error = '<p class="error">Invalid login.</p>'
        else:
            error = ""
        body = (f'{error}<form method="post" action="{self.login_path}">'
                f'<label for="{key}">{fields[0]}</label><input id="{key}" name="{key}" type="text">'
                f'<label for="password">{fields[1]}</label><input id="password" name="password" type="password">'
                f'<button type="submit">{button}</button></form>')
        return 200, page("Login", body, user)


class Shop(Site):
    login_path = "/customer/account/login/"
    accounts = {"emma.lopez@gmail.com": "Password.123"}
    products = {"blue-kettle": ("Blue Kettle", "25.00"), "red-mug": ("Red Mug", "9.50"),
                "green-teapot": ("Green Teapot", "31.00")}

    def reset_state(self) -> None:
        self.orders: list[dict[str, Any]] = []
        self.carts: dict[str, list[str]] = {}

    def routes(self) -> list[tuple[str, str, Any]]:
        return [
            ("GET", "/", self.home), ("GET", "/catalogsearch/result/", self.search),
            ("GET", r"/product/(?P<sku>[a-z-]+)\.html", self.product),
            ("POST", r"/checkout/cart/add/(?P<sku>[a-z-]+)", self.add), ("GET", "/checkout/cart/", self.cart),
            ("POST", "/checkout/place", self.place), ("GET", r"/sales/order/view/order_id/(?P<n>\d+)/", self.order),
            ("GET", "/sales/order/history/", self.history), ("GET", "/customer/account/", self.account),
            ("GET", self.login_path, self.login), ("POST", self.login_path, self.login),
        ]

    def login(self, **kw: Any) -> tuple[Any, ...]:
        return self._login(key="email", fields=("Email", "Password"), button="Sign In",
                           home="/customer/account/", **kw)

    def _links(self, skus: list[str]) -> str:
        return "<ul>" + "".join(f'<li><a href="/product/{s}.html">{E(self.products[s][0])}</a></li>'
                                for s in skus) + "</ul>"

    def home(self, user: str | None, **_: Any) -> tuple[Any, ...]:
        search = ('<form method="get" action="/catalogsearch/result/"><label for="q">Search</label>'
                  '<input id="q" name="q"><button type="submit">Go</button></form>')
        return 200, page("One Stop Market", search + self._links(list(self.products)), user)

    def search(self, user: str | None, query: dict[str, str], **_: Any) -> tuple[Any, ...]:
        q = query.get("q", "").lower()
        hits = [s for s, (name, _) in self.products.items() if q and q in name.lower()]
        return 200, page(f"Search results for: '{q}'", self._links(hits), user)

    def product(self, user: str | None, sku: str, **_: Any) -> tuple[Any, ...]:
        if sku not in self.products:
            return 404, page("Not found", "", user)
        name, price = self.products[sku]
        body = (f'<p class="price">${price}</p><form method="post" action="/checkout/cart/add/{sku}">'
                '<button type="submit">Add to Cart</button></form>')
        return 200, page(name, body, user)

    def add(self, user: str | None, sku: str, **_: Any) -> tuple[Any, ...]:
        if not user:
            return 303, "", {"Location": self.login_path}
        self.carts.setdefault(user, []).append(sku)
        return 303, "", {"Location": "/checkout/cart/"}

    def cart(self, user: str | None, **_: Any) -> tuple[Any, ...]:
        items = self.carts.get(user or "", [])
        body = "<ul>" + "".join(f"<li>{E(self.products[s][0])}</li>" for s in items) + "</ul>"
        if items:
            body += '<form method="post" action="/checkout/place"><button type="submit">Place Order</button></form>'
        return 200, page("Shopping Cart", body, user)

    def place(self, user: str | None, **_: Any) -> tuple[Any, ...]:
        items = self.carts.pop(user or "", [])
        if not user or not items:
            return 303, "", {"Location": "/checkout/cart/"}
        self.orders.append({"user": user, "items": items})
        return 303, "", {"Location": f"/sales/order/view/order_id/{len(self.orders)}/"}

    def order(self, user: str | None, n: str, **_: Any) -> tuple[Any, ...]:
        i = int(n) - 1
        if not user or not 0 <= i < len(self.orders) or self.orders[i]["user"] != user:
            return 404, page("Not found", "", user)
        items = ", ".join(self.products[s][0] for s in self.orders[i]["items"])
        return 200, page(f"Order # {n}", f'<p class="items">{E(items)}</p>', user)

    def history(self, user: str | None, **_: Any) -> tuple[Any, ...]:
        if not user:
            return 303, "", {"Location": self.login_path}
        rows = "".join(f"<tr><td>{i + 1}</td><td>{E(', '.join(self.products[s][0] for s in o['items']))}</td></tr>"
                       for i, o in enumerate(self.orders) if o["user"] == user)
        return 200, page("My Orders", f'<table id="my-orders-table">{rows}</table>', user)

    def account(self, user: str | None, **_: Any) -> tuple[Any, ...]:
        if not user:
            return 303, "", {"Location": self.login_path}
        return 200, page("My Account", f"<p>Welcome, {E(user)}!</p>", user)


class Forum(Site):
    accounts = {"MarvelsGrantMan136": "test1234"}

    def reset_state(self) -> None:
        self.posts: list[dict[str, Any]] = [
            {"forum": "hiking", "title": "Best hiking trails near Pittsburgh", "body": "Try the Laurel Highlands.",
             "author": "alice_hikes"},
            {"forum": "books", "title": "Reading list 2024", "body": "Start with Dune, then Foundation.",
             "author": "bookworm"},
        ]

    def routes(self) -> list[tuple[str, str, Any]]:
        return [
            ("GET", "/", self.home), ("GET", "/forums", self.home), ("GET", r"/f/(?P<forum>\w+)", self.forum),
            ("GET", r"/f/(?P<forum>\w+)/(?P<pid>\d+)/(?P<slug>[\w-]*)", self.post),
            ("GET", "/submit", self.submit), ("POST", "/submit", self.submit),
            ("GET", "/login", self.login), ("POST", "/login", self.login),
        ]

    def login(self, **kw: Any) -> tuple[Any, ...]:
        return self._login(key="_username", fields=("Username", "Password"), button="Log in", home="/", **kw)

    def home(self, user: str | None, **_: Any) -> tuple[Any, ...]:
        forums = sorted({p["forum"] for p in self.posts})
        body = "<ul>" + "".join(f'<li><a href="/f/{f}">{f}</a></li>' for f in forums) + "</ul>"
        return 200, page("Forums", body + '<a href="/submit">Submit</a>', user)

    @staticmethod
    def _slug(title: str) -> str:
        return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")

    def forum(self, user: str | None, forum: str, **_: Any) -> tuple[Any, ...]:
        links = "".join(f'<li><a href="/f/{forum}/{i + 1}/{self._slug(p["title"])}">{E(p["title"])}</a> '
                        f'by {E(p["author"])}</li>' for i, p in enumerate(self.posts) if p["forum"] == forum)
        return 200, page(f"/f/{forum}", f"<ul>{links}</ul>", user)

    def post(self, user: str | None, forum: str, pid: str, **_: Any) -> tuple[Any, ...]:
        i = int(pid) - 1
        if not 0 <= i < len(self.posts) or self.posts[i]["forum"] != forum:
            return 404, page("Not found", "", user)
        p = self.posts[i]
        body = (f'<p class="submission__author">Submitted by {E(p["author"])}</p>'
                f'<div class="submission__body">{E(p["body"])}</div>')
        return 200, page(p["title"], body, user)

    def submit(self, user: str | None, form: dict[str, str], **_: Any) -> tuple[Any, ...]:
        if not user:
            return 303, "", {"Location": "/login"}
        if form.get("title") and form.get("forum"):
            self.posts.append({"forum": form["forum"], "title": form["title"], "body": form.get("body", ""),
                               "author": user})
            return 303, "", {"Location": f"/f/{form['forum']}/{len(self.posts)}/{self._slug(form['title'])}"}
        options = "".join(f'<option value="{f}">{f}</option>' for f in sorted({p["forum"] for p in self.posts}))
        body = ('<form method="post" action="/submit"><label for="forum">Forum</label>'
                f'<select id="forum" name="forum">{options}</select>'
                '<label for="title">Title</label><input id="title" name="title">'
                '<label for="body">Body</label><textarea id="body" name="body"></textarea>'
                '<button type="submit">Create submission</button></form>')
        return 200, page("Create submission", body, user)
