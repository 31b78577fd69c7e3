"""Attacks on the per-server secret of ``envh ui`` (the token, the cookie on the server's own
``envh-<hex>.localhost`` name): another local process squatting the address the browser
tries first for that name, cookies tossed from ``localhost``, Host headers a rebinding page
or a sloppy parser lets through, cross-origin requests, two servers on one directory.
Real ``envh ui`` processes, real sockets, real Chromium where the browser's behaviour is
what matters; Starlette's ASGI client for what the server alone must refuse."""

from __future__ import annotations

import contextlib
import errno
import http.client
import http.server
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from envh_ui.app import COOKIE, create_app
from starlette.testclient import TestClient

TOKEN = "t0ken-for-secret-attacks"
URL = re.compile(r"envh ui: http://(envh-[0-9a-f]{16}\.localhost):(\d+)/\?token=(\S+)\n")


@contextlib.contextmanager
def _envh_ui(run_dir: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A real ``envh ui RUN_DIR ARGS`` and the first line it printed ('' if it exited)."""
    proc = subprocess.Popen([sys.executable, "-c", "from envh.cli import main; main()", "ui", str(run_dir), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc, proc.stdout.readline()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _parse(line: str) -> tuple[str, int, str]:
    found = URL.fullmatch(line)
    assert found, line
    return found[1], int(found[2]), found[3]


class _Recorder(http.server.BaseHTTPRequestHandler):
    """The squatter: answers anything with a page and keeps every request line and header."""

    seen: list[dict[str, str]] = []

    def _record(self) -> None:
        self.seen.append({"request-line": self.requestline} | {k.lower(): v for k, v in self.headers.items()})
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.end_headers()
        self.wfile.write(b"<!doctype html><title>squatter</title><h1>not the UI</h1>")

    do_GET = do_POST = do_HEAD = _record

    def log_message(self, *args: object) -> None:
        pass


class _V6Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        super().server_bind()


@contextlib.contextmanager
def _squat_ipv6(port: int) -> Iterator[list[dict[str, str]] | None]:
    """Another local process listening on the IPv6 loopback at ``port`` (on ``::1``, else on
    ``::`` with IPv6 only): yields what it receives, or None when every bind was refused
    (the port is held there already, or the machine has no IPv6 loopback: nothing to squat)."""
    handler: Any = type("Squatter", (_Recorder,), {"seen": []})
    srv = None
    for address in ("::1", "::"):
        try:
            srv = _V6Server((address, port), handler)
            break
        except OSError as exc:
            assert exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EACCES), exc
    if srv is None:
        yield None
        return
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler.seen
    finally:
        srv.shutdown()
        srv.server_close()


def _get(port: int, host: str, path: str = "/", cookie: str | None = None) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"host": host} | ({"cookie": cookie} if cookie else {}))
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


# --- findings: these fail on the code as it stands ------------------------------------------------


def test_a_squatter_on_the_ipv6_loopback_of_the_ui_port_receives_nothing(browser, tmp_path: Path) -> None:
    """Attack: ``envh ui`` listens on 127.0.0.1:P only. Any local process (another user
    included) can bind [::1]:P, which is free. Browsers resolve ``*.localhost`` (and
    ``localhost``) to ::1 first and fall back to 127.0.0.1 only when ::1 refuses, so the very
    URL ``envh ui`` prints, ``http://envh-<hex>.localhost:P/?token=...``, and every later
    request with the cookie, go to the squatter: it learns the token, the name and the cookie
    (and can proxy on to the real UI unnoticed). Opening ``http://127.0.0.1:P/?token=...``
    does not help: the redirect to the name lands on the squatter too.
    Expected: the squatter receives nothing (``envh ui`` also holds [::1]:P, so the bind is
    refused, or otherwise makes sure the browser never reaches another listener), and the
    printed URL opens the UI."""
    with _envh_ui(tmp_path) as (proc, line):
        name, port, token = _parse(line)
        with _squat_ipv6(port) as seen:
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"http://{name}:{port}/?token={token}")  # as printed
            title = page.title()
            page.goto(f"http://127.0.0.1:{port}/?token={token}")  # the loopback address: on to the name
            context.close()
            if seen is not None:
                assert seen == [], f"the squatter on [::1]:{port} received: {seen}"
            assert title == "Runs · envh", title


def test_envh_ui_on_a_port_whose_ipv6_loopback_is_taken_leaks_nothing(browser, tmp_path: Path) -> None:
    """Attack: the squatter binds [::1]:P *before* the UI starts (``--port P``, or a port it
    holds in advance; with ``--port 0`` it can hold many). ``envh ui`` binds 127.0.0.1:P without
    noticing and prints a URL whose token the browser sends to the squatter.
    Expected: ``envh ui`` refuses the port (exits with an error, printing no token) or picks
    one it holds on both loopbacks; either way the squatter receives nothing."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with _squat_ipv6(port) as seen:
        if seen is None:
            return  # no IPv6 loopback here: nothing to squat
        with _envh_ui(tmp_path, "--port", str(port)) as (proc, line):
            if not line:  # refused to start: fine, as long as it said why and printed no token
                assert proc.wait(30) != 0
                return
            name, printed_port, token = _parse(line)
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"http://{name}:{printed_port}/?token={token}")
            title = page.title()
            context.close()
            assert seen == [], f"the squatter on [::1]:{port} received: {seen}"
            assert title == "Runs · envh", title


def test_a_host_header_with_text_after_an_ipv6_literal_is_refused(tmp_path: Path) -> None:
    """Attack: ``_host_name`` keeps whatever is between '[' and ']' and drops the rest, so
    ``Host: [::1]evil.example`` (or ``[::1]anything:80``) counts as the loopback ``[::1]``. No
    browser sends such a Host today, but the check is meant to let through only the server's
    own names (DNS rebinding); a parser that accepts trailing junk is one URL-parser quirk
    away from a bypass. Expected: 403 for anything after ']' other than ':port'."""
    c = TestClient(create_app([tmp_path], token=TOKEN), base_url="http://127.0.0.1:8765")
    c.cookies.set(COOKIE, TOKEN)
    assert c.get("/", headers={"host": "[::1]:8765"}).status_code == 200  # the control
    for host in ("[::1]evil.example", "[::1]evil.example:8765", "[::1].evil.example", "[::1]@evil.example"):
        assert c.get("/", headers={"host": host}).status_code == 403, host


# --- what held (not covered by the other UI tests) -------------------------------------------------


def test_host_headers_near_the_servers_own_names_are_refused(tmp_path: Path) -> None:
    """DNS rebinding and look-alikes: the name with a trailing dot, the name under another
    domain, another server's name, loopback names with a trailing dot; all refused, even
    with the token (no redirect, no cookie)."""
    app = create_app([tmp_path], token=TOKEN)
    name = app.state.name
    c = TestClient(app, base_url="http://127.0.0.1:8765")
    c.cookies.set(COOKIE, TOKEN)
    for host in (f"{name}.", f"{name}.:8765", f"{name}.evil.example", f"{name}.evil.example:8765",
                 f"evil.example.{name}", "envh-0123456789abcdef.localhost:8765", "localhost.:8765", "127.0.0.1.:8765",
                 f"{name}:8765:1", f"evil.example@{name}"):
        r = c.get("/", params={"token": TOKEN}, headers={"host": host}, follow_redirects=False)
        assert r.status_code == 403 and "set-cookie" not in r.headers and "location" not in r.headers, host
        assert c.get("/", headers={"host": host}).status_code == 403, host


def test_cross_origin_requests_from_another_port_of_the_name_are_refused(tmp_path: Path) -> None:
    """CSRF from the UI's own name on another port (same site, so SameSite lets the cookie
    through), from the name under another domain, a preflight from another origin, the token
    in the query of a cross-origin POST, and GET on the endpoints that run code: all refused,
    nothing built."""
    app = create_app([tmp_path], token=TOKEN)
    name = app.state.name
    c = TestClient(app, base_url=f"http://{name}:8765")
    c.cookies.set(COOKIE, TOKEN)
    body = {"spec": "bridge: toy24\n"}
    for origin in (f"http://{name}:9999", f"http://{name}", f"http://{name}.evil.example:8765",
                   f"https://{name}:8765", "http://127.0.0.1:8765"):
        assert c.post("/api/play/new", json=body, headers={"origin": origin}).status_code == 403, origin
    pre = c.options("/api/play/new", headers={"origin": "http://127.0.0.1:9999", "access-control-request-method": "POST",
                                              "access-control-request-headers": "content-type"})
    assert pre.status_code == 403 and not any(k.startswith("access-control-") for k in pre.headers)
    anon = TestClient(app, base_url=f"http://{name}:8765")
    r = anon.post("/api/play/new", params={"token": TOKEN}, content=b"{}",
                  headers={"origin": "http://127.0.0.1:9999", "content-type": "application/json"}, follow_redirects=False)
    assert r.status_code == 403 and "set-cookie" not in r.headers
    for path in ("/api/play/new", "/api/spec/check", "/api/play/x/step", "/api/spec/complete"):
        assert c.get(path).status_code == 405, path


def test_the_token_is_in_no_page_api_answer_or_error(tmp_path: Path) -> None:
    """An XSS-free leak: the token (or cookie) echoed in any HTML, JSON or error body, or a
    header other than the one Set-Cookie on the server's own name."""
    app = create_app([tmp_path], token=TOKEN)
    c = TestClient(app, base_url=f"http://{app.state.name}:8765")
    c.cookies.set(COOKIE, TOKEN)
    answers = [c.get(p) for p in ("/", "/playground", "/api/spec/schema", "/training/0", "/rig/0", "/run/0?id=x",
                                  "/traj/0/1", "/file/0/report.md", "/nope", "/static/playground.js", "/favicon.ico",
                                  "/playground?d=0&spec=x", "/run/9")]
    answers += [c.post("/api/spec/check", json={"spec": "bridge: toy24\n", "build": False}),
                c.post("/api/spec/complete", json={"spec": "b", "offset": 1}),
                c.post("/api/play/nope/step", json={"action": "x"}),
                c.post("/api/play/new", content=b"{bad", headers={"content-type": "application/json"})]
    bare = TestClient(app, base_url="http://127.0.0.1:8765")
    answers += [bare.get("/", params={"token": TOKEN + "x"}), bare.get("/", headers={"host": "evil.example"})]
    for r in answers:
        assert TOKEN not in r.text and TOKEN not in str(r.headers), (r.url, r.status_code)


@pytest.fixture(scope="module")
def two_on_one_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[str, int, str]]]:
    """Two real ``envh ui`` on the same directory: (name, port, token) each."""
    run_dir = tmp_path_factory.mktemp("one-dir")
    with _envh_ui(run_dir) as (_, a), _envh_ui(run_dir) as (_, b):
        yield [_parse(a), _parse(b)]


def test_two_uis_on_one_directory_keep_their_own_secrets(two_on_one_dir) -> None:
    """Two servers on the same directory: different names and tokens, each opens with its own
    cookie and refuses the other's (as cookie or token), on its name and on loopback."""
    (name_a, port_a, token_a), (name_b, port_b, token_b) = two_on_one_dir
    assert name_a != name_b and token_a != token_b and port_a != port_b
    for (name, port, token), other in (((name_a, port_a, token_a), token_b), ((name_b, port_b, token_b), token_a)):
        assert _get(port, f"{name}:{port}", cookie=f"{COOKIE}={token}")[0] == 200
        assert _get(port, f"{name}:{port}", cookie=f"{COOKIE}={other}")[0] == 403
        for host in (f"{name}:{port}", f"127.0.0.1:{port}"):
            status, headers, _ = _get(port, host, f"/?token={other}")
            assert status == 403 and "set-cookie" not in headers and "location" not in headers


def test_the_ipv4_side_of_a_running_ui_cannot_be_squatted(two_on_one_dir) -> None:
    """While ``envh ui`` listens on 127.0.0.1:P (with SO_REUSEADDR), another process binding
    127.0.0.1:P or 0.0.0.0:P, with SO_REUSEADDR too, is refused."""
    _, port, _ = two_on_one_dir[0]
    for address in ("127.0.0.1", "0.0.0.0"):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            with pytest.raises(OSError) as info:
                s.bind((address, port))
                s.listen()
            assert info.value.errno == errno.EADDRINUSE
        finally:
            s.close()


def test_cookies_tossed_from_localhost_do_not_reach_or_shadow_the_ui(browser, two_on_one_dir) -> None:
    """Cookie tossing: a service on localhost:Q (or evil.localhost:Q) sets ``envh_ui_token``
    with ``Domain=localhost`` / ``.localhost`` from a header and from script. Chromium keeps
    them host-only on localhost, so the UI on its own name gets none of them and keeps
    working (its cookie is not shadowed by a later one of the same name)."""
    name, port, token = two_on_one_dir[0]

    class Tosser(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html")
            for value in ("x1; Domain=localhost; Path=/", "x2; Domain=.localhost; Path=/api",
                          f"x3; Domain={name}; Path=/"):
                self.send_header("set-cookie", f"{COOKIE}={value}")
            self.end_headers()
            self.wfile.write(b"<!doctype html><title>tosser</title>")

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Tosser)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{port}/?token={token}")
        for host in ("localhost", "evil.localhost"):
            page.goto(f"http://{host}:{srv.server_address[1]}/")
            page.evaluate("() => { for (const d of ['localhost', '.localhost']) "
                          "document.cookie = 'envh_ui_token=js; domain=' + d + '; path=/'; }")
        mine = [c for c in context.cookies() if c["domain"].lstrip(".") == name]
        assert [c["value"] for c in mine] == [token]
        r = page.goto(f"http://{name}:{port}/")
        assert r is not None and r.status == 200 and page.title() == "Runs · envh"
        status = page.evaluate("async () => (await fetch('/api/spec/schema')).status")
        assert status == 200
        context.close()
    finally:
        srv.shutdown()
        srv.server_close()
