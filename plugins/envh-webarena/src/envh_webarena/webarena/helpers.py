"""The helper functions WebArena's ``program_html`` targets name after ``func:``.

A ``func:`` string is parsed, never evaluated: it must be one call of a helper listed in
``HELPERS`` whose arguments are literals, ``__last_url__`` (the agent page's URL) or
``__page__`` (the page). The Magento helpers call the shopping site's REST API as
WebArena's do (admin token from ``WA_SHOPPING_ADMIN_USER``/``_PASSWORD``, default
WebArena's ``admin``/``admin1234``).
"""

from __future__ import annotations

import ast
import json
import os
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

from envh import errors


def reddit_get_post_url(url: str) -> str:
    """The post URL (``/f/<forum>/<id>/``) of a post or comment URL; other URLs unchanged."""
    parts = urlsplit(url)
    path = parts.path.split("/")
    if len(path) < 4 or path[1] != "f":
        return url
    return f"{parts.scheme}://{parts.netloc}/f/{path[2]}/{path[3]}/"


def gitlab_get_project_memeber_role(page: Any, account_name: str) -> str:  # WebArena's spelling
    """The role shown for ``@account_name`` on a GitLab project members page ('' if absent)."""
    return str(page.evaluate("""(name) => {
      const accounts = [...document.querySelectorAll("td[data-label='Account'] span.gl-avatar-labeled-sublabel")];
      const i = accounts.findIndex(e => e.outerText === '@' + name);
      const roles = document.querySelectorAll("td.col-max-role span");
      return i >= 0 && roles[i] ? roles[i].outerText : '';
    }""", account_name))


def _shopping() -> str:
    url = os.environ.get("WA_SHOPPING", "").rstrip("/")
    if not url:
        raise errors.EnvError("This program_html helper needs WA_SHOPPING (the Magento shop).")
    return url


def _json(url: str, *, data: dict[str, Any] | None = None, token: str | None = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = None if data is None else json.dumps(data).encode()
    req = urllib.request.Request(url, data=body, headers=headers, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - the configured site
            return json.loads(resp.read().decode())
    except (OSError, ValueError) as exc:
        raise errors.InfraError(f"Magento REST call {url} failed: {exc}") from exc


def _token() -> str:
    return str(_json(f"{_shopping()}/rest/default/V1/integration/admin/token", data={
        "username": os.environ.get("WA_SHOPPING_ADMIN_USER", "admin"),
        "password": os.environ.get("WA_SHOPPING_ADMIN_PASSWORD", "admin1234")}))


def shopping_get_latest_order_url() -> str:
    params = urlencode({"searchCriteria[sortOrders][0][field]": "created_at",
                        "searchCriteria[sortOrders][0][direction]": "DESC", "searchCriteria[pageSize]": "1"})
    order = _json(f"{_shopping()}/rest/V1/orders?{params}", token=_token())["items"][0]
    return f"{_shopping()}/sales/order/view/order_id/{int(order['increment_id'])}/"


def shopping_get_sku_latest_review_author(sku: str) -> str:
    reviews = _json(f"{_shopping()}/rest/V1/products/{sku}/reviews", token=_token())
    return str(reviews[-1]["nickname"]) if reviews else ""


def shopping_get_sku_latest_review_rating(sku: str) -> str:
    reviews = _json(f"{_shopping()}/rest/V1/products/{sku}/reviews", token=_token())
    return str(reviews[-1]["ratings"][0]["percent"]) if reviews else ""


HELPERS: dict[str, Callable[..., Any]] = {f.__name__: f for f in (
    reddit_get_post_url, gitlab_get_project_memeber_role, shopping_get_latest_order_url,
    shopping_get_sku_latest_review_author, shopping_get_sku_latest_review_rating)}


LAST_URL, PAGE = "__last_url__", "__page__"


_Arg = tuple[str, Any]  # ("last_url", None) | ("page", None) | ("literal", value)


def parse(expression: str) -> tuple[str, list[_Arg]]:
    """The helper a ``func:`` expression calls and its arguments, checked against the
    helper's signature: a ``str`` parameter takes a string literal or ``__last_url__``, the
    ``page`` parameter takes ``__page__``. Raises ``SpecError`` naming what is wrong."""
    import inspect

    shown = repr(expression[:100])
    try:
        node = ast.parse(expression.strip(), mode="eval").body
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte
        raise errors.SpecError(f"program_html func {shown} is not a call: {exc}") from exc
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.keywords \
            or node.func.id not in HELPERS:
        raise errors.SpecError(f"program_html func {shown} must call one of: " + ", ".join(sorted(HELPERS)))
    args: list[_Arg] = []
    for arg in node.args:
        if isinstance(arg, ast.Name) and arg.id in (LAST_URL, PAGE):
            args.append(("last_url" if arg.id == LAST_URL else "page", None))
            continue
        try:
            args.append(("literal", ast.literal_eval(arg)))
        except (ValueError, TypeError) as exc:  # TypeError: an unhashable set or dict key
            raise errors.SpecError(f"program_html func {shown}: arguments must be literals, "
                                   f"{LAST_URL} or {PAGE}") from exc
    params = list(inspect.signature(HELPERS[node.func.id]).parameters.values())
    if len(args) != len(params):
        raise errors.SpecError(f"program_html func {shown}: {node.func.id} takes {len(params)} argument(s) "
                               f"({', '.join(p.name for p in params)}), got {len(args)}")
    for param, (kind, value) in zip(params, args, strict=True):
        wants_page = param.name == "page"
        ok = kind == "page" if wants_page else kind == "last_url" or isinstance(value, str)
        if not ok:
            raise errors.SpecError(f"program_html func {shown}: argument {param.name} must be "
                                   + (PAGE if wants_page else f"a string or {LAST_URL}"))
    return node.func.id, args


def call(expression: str, *, last_url: str, page: Any) -> Any:
    """Run one allowed helper call written as in WebArena's configs (``parse``).

    The placeholders are replaced in the parsed call, never in its text: WebArena's
    ``'__last_url__'`` (quoted) or a bare ``__last_url__`` becomes the page's URL and
    ``__page__`` the page. So the URL, which the policy chose, stays one string whatever
    it contains (a ``'`` or ``__last_url__`` itself)."""
    name, parsed = parse(expression)
    args: list[Any] = []
    for kind, value in parsed:
        if kind != "literal":
            args.append(last_url if kind == "last_url" else page)
        else:  # one pass over the literal as written: the URL put in is not searched again
            args.append(value.replace(LAST_URL, last_url) if isinstance(value, str) else value)
    return HELPERS[name](*args)
