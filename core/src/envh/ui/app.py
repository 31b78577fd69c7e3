"""``envh ui``: a local web app to play, edit and inspect environments.

Starlette behind uvicorn, bound to 127.0.0.1 by default; every request needs the random
access token printed in the URL (it is then kept in a cookie). Runs are read-only
(``RunDirs``); the playground builds specs with contract code in the untrusted tier.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
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
from starlette.routing import Route

from .. import errors
from . import pages
from .reader import PAGE, RunDirs

DEFAULT_SPEC = """bridge: toy24
layers:
  - kind: contract
    code: |
      def filter_action(action, state, memo):
          if action.tool == "combine" and action.args["op"] == "div":
              return Block(reason="division is disabled in this world")
  - kind: budget
    max_steps: 12
"""
MAX_SESSIONS = 8
COOKIE = "envh_ui_token"


class Playground:
    """Live envs of the playground, at most ``MAX_SESSIONS`` (the oldest is closed)."""

    def __init__(self) -> None:
        self.envs: OrderedDict[str, Any] = OrderedDict()
        self.lock = threading.Lock()

    def _make(self, spec: str) -> Any:
        from ..spec import make

        return make(spec, trust="untrusted")

    def new(self, spec: str, task: str) -> dict[str, Any]:
        from ..play import resolve_task

        env = self._make(spec)
        try:
            result = env.reset(task=resolve_task(env, task.strip() or None), seed=0)
        except BaseException:
            env.close()
            raise
        sid = secrets.token_hex(8)
        with self.lock:
            self.envs[sid] = env
            while len(self.envs) > MAX_SESSIONS:
                _, old = self.envs.popitem(last=False)
                old.close()
        return {"session": sid, **self._view(env, result.observation),
                "tools": [{"name": t.name, "description": t.description} for t in env.tools()]}

    def step(self, sid: str, line: str) -> dict[str, Any]:
        from ..play import parse_action

        try:
            action = parse_action(line)
        except (ValueError, json.JSONDecodeError) as exc:
            return {"error": f"Could not read the action: {exc}"}
        with self.lock:  # looked up under the lock: an eviction cannot close it mid-step
            env = self.envs.get(sid)
            if env is None:
                return {"error": "This playground session is gone (closed or evicted); press Reset."}
            resp = env.step(action)
            out = self._view(env, resp.observation)
        out.update(action=f"{action.tool} {json.dumps(dict(action.args))}", reward=resp.reward,
                   done=bool(resp.terminated or resp.truncated), effects=resp.info.get("envh", []))
        if out["done"]:
            verdict = env.evaluate()
            out["verdict"] = {"success": verdict.success, "score": verdict.score}
        return out

    @staticmethod
    def _view(env: Any, seen: Any) -> dict[str, Any]:
        base = env.unwrapped.observe()
        return {"observation": seen.text, "base_observation": None if base.text == seen.text else base.text}

    def close(self) -> None:
        with self.lock:
            for env in self.envs.values():
                env.close()
            self.envs.clear()


def _error(exc: BaseException) -> JSONResponse:
    return JSONResponse({"error": f"{type(exc).__name__}: {exc}"})


#: Host headers the app answers: a page another site's name resolves to 127.0.0.1 (DNS
#: rebinding) carries that name, and gets nothing
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
#: the largest page number honoured (an OFFSET beyond SQLite's 64-bit integers is a crash)
MAX_PAGE = 10**9


def _same(given: str, token: str) -> bool:
    """Constant-time comparison that also takes non-ASCII text (str compare_digest raises)."""
    return secrets.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode())


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def create_app(dirs: Sequence[str | Path], *, token: str | None = None, host: str | None = None) -> Starlette:
    """The app over ``dirs``; ``app.state.token`` is the access token. Only requests whose
    Host header names a loopback address (or ``host``, the address it was bound to) are
    answered, and a POST must come from the app's own origin as JSON."""
    runs = RunDirs(dirs)
    play = Playground()
    token = token or secrets.token_urlsafe(18)
    hosts = LOCAL_HOSTS | ({_host_name(host)} if host and host not in ("0.0.0.0", "::") else set())

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

    async def home(request: Request) -> Response:
        listed = [(i, str(d), runs.runs(i), runs.listing(i)) for i, d in enumerate(runs.dirs)]
        return HTMLResponse(pages.runs_page(listed))

    async def run(request: Request) -> Response:
        index, run_id = _dir(request), request.path_params["run_id"]
        q = request.query_params
        filters = {k: q[k] for k in ("outcome", "task", "spec") if q.get(k)}
        page = min(max(int(q.get("page", "0") or 0), 0), MAX_PAGE)
        rows, total = runs.episodes(index, run_id, page=page, **filters)
        return HTMLResponse(pages.episodes_page(index, run_id, rows, total, page, PAGE, filters))

    async def trajectory(request: Request) -> Response:
        t = runs.trajectory(_dir(request), int(request.path_params["seq"]))
        return HTMLResponse(pages.trajectory_page(t)) if t else PlainTextResponse("no such episode", 404)

    async def compare(request: Request) -> Response:
        index = _dir(request)
        a, b = runs.trajectory(index, int(request.path_params["a"])), runs.trajectory(index, int(request.path_params["b"]))
        if a is None or b is None:
            return PlainTextResponse("no such episode", 404)
        return HTMLResponse(pages.compare_page(a, b))

    async def file(request: Request) -> Response:
        path = runs.file(_dir(request), request.path_params["name"])
        return FileResponse(path) if path else PlainTextResponse("not found", 404)

    async def rig(request: Request) -> Response:
        index = _dir(request)
        path = runs.file(index, "report.md")
        text = path.read_text(errors="replace") if path else "(no report.md in this directory)"
        images = [f for f in runs.listing(index) if f.endswith((".png", ".svg"))]
        return HTMLResponse(pages.text_page("Rig report", text, images, index, runs.pool(index)))

    async def training(request: Request) -> Response:
        path = runs.file(_dir(request), "metrics.jsonl")
        rows = []
        for line in (path.read_text(errors="replace").splitlines() if path else []):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
        return HTMLResponse(pages.training_page(rows))

    async def playground(request: Request) -> Response:
        from ..plugins import get_registry

        spec = DEFAULT_SPEC
        if request.query_params.get("spec"):  # an accepted spec from a rig directory's pool
            import yaml

            text = runs.pool_spec(_dir_of(request.query_params.get("d", "")), request.query_params["spec"])
            if text is None:
                return PlainTextResponse("no such spec in the pool", 404)
            spec = yaml.safe_dump(json.loads(text), sort_keys=False)
        return HTMLResponse(pages.playground_page(sorted(get_registry().bridges()), spec))

    async def _body(request: Request) -> dict[str, Any]:
        body = await request.json()
        if not isinstance(body, dict):
            raise ValueError("the request body must be a JSON object")
        return body

    async def play_new(request: Request) -> Response:
        body = await _body(request)
        try:
            return JSONResponse(play.new(str(body.get("spec", "")), str(body.get("task") or "")))
        except (errors.EnvhError, ValueError, TypeError, LookupError) as exc:
            return _error(exc)

    async def play_step(request: Request) -> Response:
        body = await _body(request)
        try:
            return JSONResponse(play.step(request.path_params["sid"], str(body.get("action", ""))))
        except errors.EnvhError as exc:
            return _error(exc)

    async def spec_check(request: Request) -> Response:
        from ..spec import parse_spec, spec_id

        body = await _body(request)
        try:
            parsed = parse_spec(str(body.get("spec", "")))
            play._make(str(body.get("spec", ""))).close()  # builds every layer: contract code is checked too
            return JSONResponse({"ok": True, "spec_id": spec_id(parsed)})
        except (errors.EnvhError, ValueError, TypeError) as exc:
            return JSONResponse({"ok": False, "error": str(exc)})

    routes = [
        Route("/", home), Route("/run/{d:int}/{run_id}", run), Route("/traj/{d:int}/{seq:int}", trajectory),
        Route("/compare/{d:int}/{a:int}/{b:int}", compare), Route("/file/{d:int}/{name}", file),
        Route("/rig/{d:int}", rig), Route("/training/{d:int}", training), Route("/playground", playground),
        Route("/api/play/new", play_new, methods=["POST"]),
        Route("/api/play/{sid}/step", play_step, methods=["POST"]),
        Route("/api/spec/check", spec_check, methods=["POST"]),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        play.close()

    async def guard(request: Request, call_next: Any) -> Response:
        response = await _guarded(request, call_next)
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
            response: Response = RedirectResponse(request.url.remove_query_params("token"), status_code=303)
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
            return response
        if not _same(request.cookies.get(COOKIE, ""), token):
            return PlainTextResponse("envh ui: open the URL with the access token that `envh ui` printed.", 403)
        try:
            return await call_next(request)  # type: ignore[no-any-return]
        except (LookupError, FileNotFoundError, ValueError, OverflowError) as exc:  # 2**80 overflows SQLite
            return PlainTextResponse(f"not found: {exc}", 404)

    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard)])
    app.state.token = token
    return app


def serve(dirs: list[str], *, host: str = "127.0.0.1", port: int = 0) -> None:
    """Run the app until interrupted, printing the URL with its access token."""
    import socket

    import uvicorn

    for d in dirs:
        if not Path(d).is_dir():
            raise errors.EnvhError(f"Run directory {d!r} does not exist.")
    app = create_app(dirs, host=host)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    url = f"http://{host}:{sock.getsockname()[1]}/?token={app.state.token}"
    print(f"envh ui: {url}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
