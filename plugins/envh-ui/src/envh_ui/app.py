"""``envh ui``: a local web app to play, edit and inspect environments.

Starlette behind uvicorn, bound to 127.0.0.1 by default; every request needs the random
access token printed in the URL (it is then kept in a cookie). Cookies ignore ports, so the
cookie is never set on a loopback address any other local service shares: each server has
its own host name, ``envh-<random>.localhost`` (browsers resolve ``*.localhost`` to the
loopback address themselves), and the cookie is bound to that name alone. Two servers side
by side keep their own cookies, and a listener on another port of 127.0.0.1 or localhost is
sent nothing. Runs are read-only (``RunDirs``); the playground builds specs with contract
code in the untrusted tier.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import secrets
import sqlite3
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envh import errors
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import compare as cmp
from . import editor, pages, rigpage, steps
from .playground import DEFAULT_SPEC, MAX_SPEC, Playground
from .reader import PAGE, RunDirs

if TYPE_CHECKING:
    from envh.plugins.manager import Registry

COOKIE = "envh_ui_token"
#: every page's Content-Security-Policy: scripts and styles only from the app's own
#: static files, no inline code, no plugins, not framed, forms only back to the app
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
STATIC = Path(__file__).parent / "static"
#: seconds a playground call (build, reset, step, check) may run before the page is told
PLAY_TIMEOUT = 120.0


#: Host headers the app answers: a page another site's name resolves to 127.0.0.1 (DNS
#: rebinding) carries that name, and gets nothing
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
#: bytes of a POST body read at most (a spec is at most 100,000 characters, JSON-escaped)
MAX_BODY = 2_000_000


class BodyTooLarge(ValueError):
    """A POST body over ``MAX_BODY``."""


#: characters of report.md the rig page shows
MAX_REPORT = 1_000_000
#: the largest page number honoured (an OFFSET beyond SQLite's 64-bit integers is a crash)
MAX_PAGE = 10**9


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    return value if isinstance(value, str) else "" if value is None else str(value)


def _same(given: str, token: str) -> bool:
    """Constant-time comparison that also takes non-ASCII text (str compare_digest raises)."""
    return secrets.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode())


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return host
        rest = host[end + 1:]
        # only a port may follow the literal: "[::1]evil.example" is not the loopback
        return host[: end + 1] if rest == "" or re.fullmatch(r":\d{1,5}", rest) else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def server_name() -> str:
    """A fresh host name for one server: a random label under ``localhost``, which browsers
    (Chromium, Firefox) and curl resolve to the loopback address without asking DNS."""
    return f"envh-{secrets.token_hex(8)}.localhost"


def create_app(dirs: Sequence[str | Path], *, token: str | None = None, host: str | None = None,
               registry: Registry | None = None, play_timeout: float = PLAY_TIMEOUT,
               name: str | None = None) -> Starlette:
    """The app over ``dirs``; ``app.state.token`` is the access token and ``app.state.name``
    the server's own host name (``name``, default a fresh ``server_name()``): the token URL
    opened on a loopback address is sent on to that name, and only there is the cookie set.
    Only requests whose Host header names a loopback address, the server's name (or
    ``host``, the address it was bound to) are answered, and a POST must come from the app's
    own origin as JSON. ``registry``: the bridges and component kinds the playground offers
    (default: the installed ones); ``play_timeout``: seconds a playground call may take
    before the page is told so."""
    from envh.plugins import get_registry

    runs = RunDirs(dirs)
    play = Playground(registry)
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="envh-ui-play")
    schema: dict[str, Any] = {}
    token = token or secrets.token_urlsafe(18)
    name = (name or server_name()).lower()
    hosts = LOCAL_HOSTS | {name} | ({_host_name(host)} if host and host not in ("0.0.0.0", "::") else set())

    def _dir_of(raw: str) -> int:
        index = int(raw)
        if not 0 <= index < len(runs.dirs):
            raise LookupError(index)
        return index

    def _dir(request: Request) -> int:
        index = int(request.path_params["d"])
        if not 0 <= index < len(runs.dirs):
            raise LookupError(index)
        return index

    def _choices() -> list[tuple[int, str, str]]:
        """Every run of every directory, for a compare form: ``(index, name, run id)``."""
        out = []
        for i, d in enumerate(runs.dirs):
            try:  # a damaged store offers no runs; the page still opens
                out += [(i, d.name, r) for r in runs.run_ids(i)]
            except sqlite3.Error:
                continue
        return out

    # the read routes are plain functions: Starlette runs them on its thread pool, so a store
    # a writer keeps locked (up to SQLite's busy timeout) or a large report stalls only its
    # own page, not the event loop every other page and the playground answer on
    def home(request: Request) -> Response:
        listed: list[tuple[Any, ...]] = []
        for i, d in enumerate(runs.dirs):
            try:  # one directory's damaged store (empty, not SQLite, not envh's) leaves the others listed
                listed.append((i, str(d), runs.runs(i), runs.listing(i)))
            except sqlite3.Error as exc:
                listed.append((i, str(d), [], runs.listing(i), f"the trajectory store cannot be read: {exc}"))
        return HTMLResponse(pages.runs_page(listed))

    def run(request: Request) -> Response:
        # the run id is a query value, never a path segment: ids with '/', '?', '#', '%'
        # or '..' survive the round trip through the browser unchanged
        q = request.query_params
        index, run_id = _dir(request), q.get("id", "")
        filters = {k: q[k] for k in ("outcome", "task", "spec") if q.get(k)}
        page = min(max(int(q.get("page", "0") or 0), 0), MAX_PAGE)
        rows, total = runs.episodes(index, run_id, page=page, **filters)
        return HTMLResponse(pages.episodes_page(index, run_id, rows, total, page, PAGE, filters))

    def trajectory(request: Request) -> Response:
        index, seq, q = _dir(request), int(request.path_params["seq"]), request.query_params
        data = runs.data(index, seq)
        if data is None:
            return PlainTextResponse("no such episode", 404)
        # ``step``: the page that shows that step (0-based, as numbered on the page)
        page = int(q["step"]) // steps.STEPS if q.get("step") else int(q.get("page", "0") or 0)
        picker = pages.compare_picker(index, seq, _choices(), "compare with the same task in run")
        return HTMLResponse(pages.trajectory_page(steps.steps_page(data, min(max(page, 0), MAX_PAGE)), index, seq,
                                                  picker))

    def prompt(request: Request) -> Response:
        data = runs.data(_dir(request), int(request.path_params["seq"]))
        if data is None:
            return PlainTextResponse("no such episode", 404)
        whole = request.query_params.get("whole") == "1"
        return JSONResponse(steps.prompt(data, int(request.path_params["step"]), whole=whole))

    def compare(request: Request) -> Response:
        # ``bd``: the right episode's directory when it is another one's (two runs' stores)
        q = request.query_params
        index, seqs = _dir(request), (int(request.path_params["a"]), int(request.path_params["b"]))
        other = _dir_of(q["bd"]) if q.get("bd") else index
        a, b = runs.data(index, seqs[0]), runs.data(other, seqs[1])
        if a is None or b is None:
            return PlainTextResponse("no such episode", 404)
        total = max(steps.step_count(a), steps.step_count(b))
        pages_n = max((total + steps.STEPS - 1) // steps.STEPS, 1)
        page = min(max(int(q.get("page", "0") or 0), 0), pages_n - 1)
        left = cmp.side(a, page * steps.STEPS, index, seqs[0])
        right = cmp.side(b, page * steps.STEPS, other, seqs[1])
        picker = pages.compare_picker(index, seqs[0], _choices(), "right side: the same task in run",
                                      (other, right.trajectory.run_id))
        return HTMLResponse(pages.compare_page(left, right, page, pages_n, picker))

    def compare_task(request: Request) -> Response:
        index, seq = _dir(request), int(request.path_params["seq"])
        d, _, run_id = request.query_params.get("with", "").partition(":")
        other = _dir_of(d)
        found = runs.same_task(index, seq, other, run_id)
        if found is None:
            return PlainTextResponse(f"run {run_id!r} has no episode on this episode's task", 404)
        where = f"/compare/{index}/{seq}/{found}" + (f"?bd={other}" if other != index else "")
        return RedirectResponse(where, status_code=303)

    def file(request: Request) -> Response:
        path = runs.file(_dir(request), request.path_params["name"])
        return FileResponse(path) if path else PlainTextResponse("not found", 404)

    def rig(request: Request) -> Response:
        index = _dir(request)
        path = runs.file(index, "report.md")
        text = "(no report.md in this directory)"
        if path:
            with path.open(encoding="utf-8", errors="replace") as f:
                text = f.read(MAX_REPORT + 1)
            if len(text) > MAX_REPORT:  # the page shows the start; the file link serves it whole
                text = text[:MAX_REPORT] + f"\n\n(report.md goes on: {path.stat().st_size:,} bytes; open it from the runs page)"
        images = [f for f in runs.listing(index) if f.endswith((".png", ".svg"))]
        pool = runs.pool(index)
        rounds = rigpage.rounds_html(index, runs.rig_rounds(index), {p["spec_id"] for p in pool})
        title = "Experiment report" if runs.file(index, "experiment.json") else "Rig report"
        return HTMLResponse(pages.text_page(title, text, images, index, pool, rounds))

    def training(request: Request) -> Response:
        index = _dir(request)
        return HTMLResponse(pages.training_page(str(runs.dirs[index]), runs.metrics_runs(index)))

    def playground(request: Request) -> Response:
        spec = DEFAULT_SPEC
        if request.query_params.get("spec"):  # an accepted spec from a rig directory's pool
            import yaml

            text = runs.pool_spec(_dir_of(request.query_params.get("d", "")), request.query_params["spec"])
            if text is None:
                return PlainTextResponse("no such spec in the pool", 404)
            if len(text) > MAX_SPEC or editor.too_deep(text):  # json would recurse, YAML take seconds (on the loop)
                return PlainTextResponse(f"this pool spec is longer than {MAX_SPEC} characters or nested deeper "
                                         f"than {editor.MAX_DEPTH} levels: the playground does not open it", 413)
            spec = yaml.safe_dump(json.loads(text), sort_keys=False)
        return HTMLResponse(pages.playground_page(sorted((registry or get_registry()).bridges()), spec))

    async def _body(request: Request) -> dict[str, Any]:
        raw = bytearray()
        async for chunk in request.stream():  # read as it comes: a huge body is refused, not held
            raw += chunk
            if len(raw) > MAX_BODY:
                raise BodyTooLarge(f"the request body is over {MAX_BODY} bytes")
        body = json.loads(raw)
        if not isinstance(body, dict):
            raise ValueError("the request body must be a JSON object")
        return body

    async def on_worker(fn: Any, *args: Any, **kwargs: Any) -> Any:
        # envs, jails and specs are built and stepped on one thread (some bridges' engines,
        # a browser's for one, answer only the thread that made them), off the event loop,
        # so pages and completions keep answering while a spec builds
        call = asyncio.get_running_loop().run_in_executor(worker, functools.partial(fn, *args, **kwargs))
        try:
            return await asyncio.wait_for(asyncio.shield(call), play_timeout)
        except TimeoutError:  # a thread cannot be stopped: the call goes on, the page hears now
            error = errors.EnvError(f"The environment did not answer within {play_timeout:g} s and is still busy; "
                                    "later playground actions wait for it to finish.")
            return {"error": f"EnvError: {error}", "error_type": "EnvError", "ok": False}

    async def play_new(request: Request) -> Response:
        body = await _body(request)
        return JSONResponse(await on_worker(play.new, _text(body, "spec"), _text(body, "task")))

    async def play_step(request: Request) -> Response:
        body = await _body(request)
        return JSONResponse(await on_worker(play.step, request.path_params["sid"], _text(body, "action")))

    async def spec_check(request: Request) -> Response:
        body = await _body(request)
        return JSONResponse(await on_worker(play.check, _text(body, "spec"), build=body.get("build", True) is not False))

    def _schema() -> dict[str, Any]:
        if not schema:
            from .schema import spec_schema

            schema.update(spec_schema(registry or get_registry()))
        return schema

    async def spec_schema_route(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(_schema))

    async def spec_complete(request: Request) -> Response:
        body = await _body(request)
        offset, text = body.get("offset"), body.get("spec")
        if not isinstance(offset, int) or isinstance(offset, bool) or not isinstance(text, str):
            return JSONResponse({"error": "give 'spec' as text and 'offset' as an integer"}, 400)
        return JSONResponse(await run_in_threadpool(editor.complete, text, offset, await run_in_threadpool(_schema)))

    def favicon(request: Request) -> Response:  # asked for by documents without a link to one (a served file)
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    routes = [
        Route("/favicon.ico", favicon), Route("/", home), Route("/run/{d:int}", run), Route("/traj/{d:int}/{seq:int}", trajectory),
        Route("/api/traj/{d:int}/{seq:int}/prompt/{step:int}", prompt),
        Route("/compare/{d:int}/{a:int}/{b:int}", compare), Route("/compare-task/{d:int}/{seq:int}", compare_task),
        Route("/file/{d:int}/{name}", file),
        Route("/rig/{d:int}", rig), Route("/training/{d:int}", training), Route("/playground", playground),
        Route("/api/play/new", play_new, methods=["POST"]),
        Route("/api/play/{sid}/step", play_step, methods=["POST"]),
        Route("/api/spec/check", spec_check, methods=["POST"]),
        Route("/api/spec/complete", spec_complete, methods=["POST"]), Route("/api/spec/schema", spec_schema_route),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await on_worker(play.close)
        worker.shutdown(wait=False)

    async def guard(request: Request, call_next: Any) -> Response:
        response = await _guarded(request, call_next)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    async def _guarded(request: Request, call_next: Any) -> Response:
        if _host_name(request.headers.get("host", "")) not in hosts:
            return PlainTextResponse("envh ui answers only on its loopback address.", 403)
        if request.method not in ("GET", "HEAD"):
            # SameSite does not separate ports: another local site is "same-site", so the
            # origin is checked, and JSON is required (a cross-origin form cannot send it)
            origin = request.headers.get("origin")
            if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
                return PlainTextResponse("envh ui: cross-origin request refused.", 403)
            if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
                return PlainTextResponse("envh ui: the API takes application/json.", 415)
        given = request.query_params.get("token")
        if given is not None and _same(given, token):
            if _host_name(request.headers.get("host", "")) in LOCAL_HOSTS:
                # a cookie set here would go to every port of this address: on to the
                # server's own name (the port is kept, so a forwarded port still works)
                return RedirectResponse(request.url.replace(hostname=name), status_code=303)
            response: Response = RedirectResponse(request.url.remove_query_params("token"), status_code=303)
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
            return response
        if not _same(request.cookies.get(COOKIE, ""), token):
            return PlainTextResponse("envh ui: open the URL with the access token that `envh ui` printed.", 403)
        try:
            return await call_next(request)  # type: ignore[no-any-return]
        except BodyTooLarge as exc:
            return PlainTextResponse(f"envh ui: {exc}.", 413)
        except (LookupError, FileNotFoundError, ValueError, OverflowError) as exc:  # 2**80 overflows SQLite
            return PlainTextResponse(f"not found: {exc}", 404)
        except sqlite3.Error as exc:  # a damaged store, or a file by the store's name that is none
            return PlainTextResponse(f"envh ui: the trajectory store cannot be read: {exc}", 500)

    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard)])
    app.state.token = token
    app.state.name = name
    return app


def serve(dirs: list[str], *, host: str = "127.0.0.1", port: int = 0) -> None:
    """Run the app until interrupted, printing the URL with its access token (on the
    server's own ``*.localhost`` name when it answers on loopback)."""

    import uvicorn

    for d in dirs:
        if not Path(d).is_dir():
            raise errors.EnvhError(f"Run directory {d!r} does not exist.")
    app = create_app(dirs, host=host)
    socks = bind_sockets(host, port)
    local = _host_name(host) in LOCAL_HOSTS | {"0.0.0.0", "::"}  # all addresses: loopback too
    shown = app.state.name if local else (f"[{host}]" if ":" in host else host)
    url = f"http://{shown}:{socks[0].getsockname()[1]}/?token={app.state.token}"
    print(f"envh ui: {url}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=socks)


def bind_sockets(host: str, port: int = 0, *, tries: int = 20) -> list[Any]:
    """Listening sockets for ``host``:``port``. On a loopback (or every) address the server
    holds the port on *both* loopbacks, 127.0.0.1 and ::1: browsers try ``*.localhost`` on
    ::1 first and fall back to 127.0.0.1 only when ::1 refuses, so a port held on 127.0.0.1
    alone lets any local process listen on [::1] at it and receive the token URL. A port
    whose ::1 side is taken is refused (``--port P``) or another is picked (port 0). Only a
    machine without an IPv6 loopback gets the IPv4 socket alone."""
    import errno
    import socket

    def listen(family: int, address: str, at: int) -> socket.socket:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, at))
            sock.listen(2048)  # before the URL is printed: a bound socket not yet listening can be shared
        except BaseException:
            sock.close()
            raise
        return sock

    name = _host_name(host).strip("[]")
    if name not in {"127.0.0.1", "localhost", "::1", "0.0.0.0", "::"}:
        family = socket.AF_INET6 if ":" in name else socket.AF_INET
        return [listen(family, name, port)]
    first = ("::" if name == "::" else "0.0.0.0" if name == "0.0.0.0" else "127.0.0.1")
    for _ in range(tries if port == 0 else 1):
        v4 = listen(socket.AF_INET6 if first == "::" else socket.AF_INET, first, port)
        at = v4.getsockname()[1]
        if first == "::":  # every IPv6 address (V6ONLY): every IPv4 one beside it
            try:
                return [v4, listen(socket.AF_INET, "0.0.0.0", at)]
            except OSError:
                v4.close()
                if port:
                    raise
                continue
        try:
            return [v4, listen(socket.AF_INET6, "::1", at)]
        except OSError as exc:
            v4.close()
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or not socket.has_ipv6:
                return [listen(socket.AF_INET if first != "::" else socket.AF_INET6, first, at)]
            if exc.errno != errno.EADDRINUSE:
                raise
            if port:
                raise errors.EnvhError(
                    f"Port {port} is free on 127.0.0.1 but taken on ::1 by another process: a browser "
                    "would send the access token there. Pick another port (or leave --port out).") from None
    raise errors.EnvhError(f"No port free on both 127.0.0.1 and ::1 after {tries} tries.")
