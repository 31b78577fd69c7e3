"""Small HTTP servers on 127.0.0.1 in daemon threads (task pages, the WebShop site, test sites)."""

from __future__ import annotations

import functools
import sys
import threading
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietStaticHandler(SimpleHTTPRequestHandler):
    """Static files without a log line per request; text files are declared UTF-8 (the
    MiniWoB pages name no charset, and a browser reads them as windows-1252 otherwise:
    unicode-test's 确定 would show as ç¡®å®š)."""

    def guess_type(self, path: Any) -> str:
        kind = super().guess_type(path)
        if kind.startswith("text/") or kind in ("application/javascript", "application/json"):
            return f"{kind}; charset=utf-8"
        return kind

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


class _Server(ThreadingHTTPServer):
    """A client that went away mid-answer (a context closed while its page loaded: a spare
    thrown away, an episode ended) is normal here, not a traceback on stderr."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class LocalServer:
    """A ``ThreadingHTTPServer`` bound to 127.0.0.1 (port 0: a free one), served in a thread.

    :param handler: the request handler class.
    """

    def __init__(self, handler: type[BaseHTTPRequestHandler] | Any, *, port: int = 0) -> None:
        self.httpd = _Server(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name=f"envh-webarena-http-{self.port}",
                                        kwargs={"poll_interval": 0.2}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving and release the port. Idempotent."""
        if self._thread.is_alive():
            self.httpd.shutdown()
            self._thread.join(timeout=5)
        self.httpd.server_close()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CachedStaticHandler(QuietStaticHandler):
    """Static files a browser may keep for an hour (files that do not change while served)."""

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "max-age=3600")
        super().end_headers()


def serve_directory(directory: str, *, cacheable: bool = False) -> LocalServer:
    """Serve a directory's files read-only on 127.0.0.1 (``cacheable``: with an hour's
    ``Cache-Control``, for files that do not change while served)."""
    handler = CachedStaticHandler if cacheable else QuietStaticHandler
    return LocalServer(functools.partial(handler, directory=directory))
