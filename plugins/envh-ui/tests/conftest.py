"""Shared parts of the ``envh ui`` browser tests: one system Chromium per module, and
a way to serve an app with uvicorn on 127.0.0.1 for as long as a module needs it. The
helper modules beside them (``ui_long_episodes``) are importable from every test file."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn  # the ui extra and Playwright are installed by setup: a missing one fails, never skips
from playwright import sync_api

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"]


@contextlib.contextmanager
def _serving(app: Any, named: bool = False) -> Iterator[str]:
    """``named``: the URL uses the app's own host name (``app.state.name``, which the
    browser resolves to loopback and on which alone the access cookie is set); otherwise
    127.0.0.1, for clients that do not resolve ``*.localhost`` (urllib, Playwright's
    ``page.request``)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    try:
        yield f"http://{app.state.name if named else '127.0.0.1'}:{port}"
    finally:
        srv.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture(scope="session")
def serve() -> Callable[..., contextlib.AbstractContextManager[str]]:
    """``with serve(app) as base_url:`` runs ``app`` on a free loopback port
    (``serve(app, named=True)``: the base URL on the app's own host name)."""
    return _serving


@pytest.fixture(scope="module")
def browser() -> Iterator[sync_api.Browser]:
    """One Chromium per module, never for the session: while a sync Playwright is open its
    event loop counts as running in this thread, and every later sync Playwright user in
    the same pytest run (envh-webarena's bridges) would be refused."""
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def watch() -> Callable[[sync_api.Page], list[str]]:
    """``problems = watch(page)``: the page's script errors and CSP violations, collected
    as they happen (a page whose own script the CSP blocked would show up here)."""

    def attach(page: sync_api.Page) -> list[str]:
        seen: list[str] = []
        page.on("pageerror", lambda exc: seen.append(f"pageerror: {exc}"))
        page.on("console", lambda msg: seen.append(f"console: {msg.text}")
                if msg.type == "error" and "Content Security Policy" in msg.text else None)
        return seen

    return attach
