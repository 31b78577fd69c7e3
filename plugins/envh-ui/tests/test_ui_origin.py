"""The access secret belongs to one server: cookies ignore ports, so two ``envh ui`` on one
host must not share or overwrite one, and another service on 127.0.0.1 that the browser
visits must be sent nothing that opens the UI. Real servers, real Chromium."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from envh_ui.app import create_app

TOKENS = ("tok-a-" + "a" * 20, "tok-b-" + "b" * 20)
CHECK = ("async () => { const r = await fetch('/api/spec/check', {method: 'POST', "
         "headers: {'content-type': 'application/json'}, body: JSON.stringify({spec: 'bridge: toy24\\n', build: false})});"
         " return [r.status, await r.text()]; }")


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Another local service: answers anything and keeps every request's headers."""

    seen: list[dict[str, str]] = []

    def _record(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.end_headers()
        self.wfile.write(b"<!doctype html><title>other service</title><p>hello")

    do_GET = do_POST = _record

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _recorder() -> Iterator[tuple[int, list[dict[str, str]]]]:
    handler = type("Recorder", (_Recorder,), {"seen": []})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv.server_address[1], handler.seen
    finally:
        srv.shutdown()
        srv.server_close()


def _replay(port: int, host: str, method: str, path: str, headers: dict[str, str]) -> int:
    """Send ``headers`` (as another service received them) to the UI on ``port`` as ``host``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        sent = {k: v for k, v in headers.items() if k not in ("host", "content-length", "origin")}
        sent |= {"host": host, "content-type": "application/json"}
        conn.request(method, path, body=b'{"spec": "bridge: toy24\\n", "build": false}' if method == "POST" else None,
                     headers=sent)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.fixture(scope="module")
def two_uis(serve, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[str, str, int]]]:
    """Two servers side by side: (name URL, token, port) each."""
    apps = [create_app([tmp_path_factory.mktemp(f"ui{i}")], token=t) for i, t in enumerate(TOKENS)]
    with serve(apps[0], named=True) as a, serve(apps[1], named=True) as b:
        yield [(url, token, int(url.rsplit(":", 1)[1])) for url, token in ((a, TOKENS[0]), (b, TOKENS[1]))]


def _open(page, port: int, token: str) -> None:
    """Open the URL as a user pastes it: the loopback address with the token."""
    page.goto(f"http://127.0.0.1:{port}/?token={token}")


def test_two_uis_side_by_side_both_work_in_one_browser(browser, two_uis, watch) -> None:
    context = browser.new_context()
    page = context.new_page()
    problems = watch(page)
    (a, token_a, port_a), (b, token_b, port_b) = two_uis
    _open(page, port_a, token_a)
    assert page.url == f"{a}/"  # sent on to the server's own name, the token gone from the URL
    _open(page, port_b, token_b)  # the second UI's cookie must not replace the first's
    assert page.url == f"{b}/"
    for _ in range(2):  # back and forth: each keeps working
        for base in (a, b):
            response = page.goto(f"{base}/")
            assert response is not None and response.status == 200 and page.locator("h1").inner_text() == "Runs"
            status, text = page.evaluate(CHECK)
            assert status == 200 and '"ok":true' in text.replace(" ", ""), text
    cookies = context.cookies()
    assert {c["domain"] for c in cookies} == {a.split("//")[1].split(":")[0], b.split("//")[1].split(":")[0]}
    assert all(c["httpOnly"] and c["sameSite"] == "Strict" for c in cookies)
    context.close()
    assert problems == []


def test_another_local_service_receives_nothing_that_opens_the_ui(browser, two_uis) -> None:
    (a, token_a, port_a), (b, token_b, port_b) = two_uis
    context = browser.new_context()
    page = context.new_page()
    _open(page, port_a, token_a)
    _open(page, port_b, token_b)
    with _recorder() as (port, seen):
        for host in ("127.0.0.1", "localhost"):  # the names another user's service answers on
            page.goto(f"http://{host}:{port}/visited")
            page.evaluate("u => fetch(u, {method: 'POST', credentials: 'include', body: 'x'})",
                          f"http://{host}:{port}/fetched")
        page.goto(f"{a}/")  # and straight from the UI's own page (its CSP lets no script reach out)
        page.goto(f"http://127.0.0.1:{port}/after")
    context.close()
    assert len(seen) >= 5
    for headers in seen:
        assert not any(t in v for t in TOKENS for v in headers.values()), headers
    # whatever it received, replayed against either UI (as it is, and naming the UI's host): refused
    for headers in seen:
        for base, port_ui in ((a, port_a), (b, port_b)):
            name = base.split("//")[1]
            for host in (headers.get("host", ""), name, f"127.0.0.1:{port_ui}"):
                for method, path in (("GET", "/"), ("GET", "/api/spec/schema"), ("POST", "/api/spec/check")):
                    assert _replay(port_ui, host, method, path, headers) == 403, (host, method, path, headers)
    # the control: the UI's own cookie, replayed the same way, opens it (the replay can see a success)
    assert _replay(port_a, a.split("//")[1], "POST", "/api/spec/check", {"cookie": f"envh_ui_token={token_a}"}) == 200


def test_each_server_has_its_own_unguessable_name(tmp_path: Path) -> None:
    names = {create_app([tmp_path]).state.name for _ in range(20)}
    assert len(names) == 20
    assert all(n.startswith("envh-") and n.endswith(".localhost") and len(n) == len("envh-.localhost") + 16
               for n in names)


def test_envh_ui_prints_a_url_on_its_own_name_that_opens_in_the_browser(browser, tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", "from envh.cli import main; main()", "ui", str(tmp_path)],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            found = re.fullmatch(r"envh ui: http://(envh-[0-9a-f]{16}\.localhost):(\d+)/\?token=(\S+)\n", line)
            assert found, line
            name, port, token = found.groups()
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"http://127.0.0.1:{port}/?token={token}")  # the address works too: on to the name
            assert page.url == f"http://{name}:{port}/" and page.locator("h1").inner_text() == "Runs"
            assert [c["domain"] for c in context.cookies()] == [name]
            context.close()
        finally:
            proc.terminate()
            proc.wait(30)
