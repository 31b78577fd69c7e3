"""A local OpenAI-compatible server that replays recorded chat responses, for tests.

Policies that talk to an LLM endpoint are tested against this server instead of a mock:
the real ``openai`` SDK makes real HTTP requests to ``/v1/chat/completions``, and the
server answers from a script of ``Reply`` records, in order or matched by a key. A reply
can be a function call, plain text, malformed output, an HTTP error (to exercise retries)
or a slow answer (to exercise timeouts). Every request received is recorded in
``server.requests`` (path, JSON body, lower-cased headers, arrival time). ``/v1/embeddings`` answers deterministic hashed vectors and
``/v1/models`` lists the configured model.

Usage in a third party's tests (``envh.testing`` exposes the fixture)::

    def test_my_agent(llm_replay_server):
        llm_replay_server.add(tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}),
                              error_reply(500), text_reply("<action>stop()</action>"))
        client = openai.OpenAI(base_url=llm_replay_server.base_url, api_key="x")
        ...
        assert len(llm_replay_server.requests) == 3

Outside pytest: ``with LLMReplayServer([text_reply("hi")]) as server: ...``.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .testing_replies import Reply, error_reply, load_replies, slow, text_reply, tool_reply

__all__ = ["LLMReplayServer", "Reply", "error_reply", "llm_replay_server", "load_replies", "slow",
           "text_reply", "tool_reply"]


def last_message_text(body: dict[str, Any]) -> str:
    """The default key of a request: the content of its last message, as text."""
    messages = body.get("messages") or []
    if not messages:
        return ""
    content = messages[-1].get("content")
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def hashed_embedding(text: str, dim: int) -> list[float]:
    """A deterministic bag-of-words vector: texts sharing words have a positive cosine."""
    vec = [0.0] * dim
    for word in text.lower().split():
        h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


class LLMReplayServer:
    """OpenAI-compatible HTTP server on 127.0.0.1 (port 0 → a free port) in a thread.

    :param replies: answered in order, one per chat request.
    :param keyed: key → reply (reusable) or list of replies (consumed in order, the last
        one repeats). A keyed reply answers a request whose key equals the dict key, or
        contains it; keyed replies take precedence over the ordered ones.
    :param key: request body → key; by default the text of the last message.
    :param model: the model name ``/v1/models`` lists.
    :param embedding_dim: length of the vectors ``/v1/embeddings`` returns.
    :param max_model_len: the context length ``/v1/models`` reports, as vLLM does (``None``: none).
    """

    def __init__(self, replies: Iterable[Reply] = (), *, keyed: dict[str, Reply | list[Reply]] | None = None,
                 key: Callable[[dict[str, Any]], str] = last_message_text, model: str = "replay-model",
                 embedding_dim: int = 32, max_model_len: int | None = None) -> None:
        self.model, self.embedding_dim, self.key = model, embedding_dim, key
        self.max_model_len = max_model_len
        self.requests: list[dict[str, Any]] = []
        self._queue: list[Reply] = list(replies)
        self._keyed: dict[str, list[Reply]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._served = 0
        for k, v in (keyed or {}).items():
            self.add_keyed(k, v)

    # -- script ----------------------------------------------------------------------
    def add(self, *replies: Reply) -> LLMReplayServer:
        """Append replies to the ordered script."""
        with self._lock:
            self._queue.extend(replies)
        return self

    def add_keyed(self, key: str, reply: Reply | list[Reply]) -> LLMReplayServer:
        """Answer requests whose key equals or contains ``key`` with ``reply``."""
        with self._lock:
            self._keyed[key] = list(reply) if isinstance(reply, list) else [reply]
        return self

    @property
    def remaining(self) -> int:
        """Ordered replies not yet served."""
        with self._lock:
            return len(self._queue)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat-completion requests received, in order."""
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def _choose(self, body: dict[str, Any]) -> tuple[Reply | None, int]:
        """The reply for ``body`` and its serial number (1-based) among the replies served."""
        key = self.key(body)
        with self._lock:
            hit = self._keyed.get(key)
            if hit is None:
                hit = next((v for k, v in self._keyed.items() if k and k in key), None)
            if hit is not None:
                reply: Reply | None = hit.pop(0) if len(hit) > 1 else hit[0]
            else:
                reply = self._queue.pop(0) if self._queue else None
            if reply is not None:
                self._served += 1
            return reply, self._served

    # -- lifecycle ---------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what ``openai.OpenAI(base_url=...)`` takes."""
        if self._server is None:
            raise RuntimeError("LLMReplayServer is not started; use it as a context manager")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> LLMReplayServer:
        handler = type("Handler", (_Handler,), {"replay": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="llm-replay",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # cuts slow replies short
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> LLMReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answers -----------------------------------------------------------------------
    def _chat(self, body: dict[str, Any]) -> tuple[int, Any, float]:
        reply, serial = self._choose(body)
        if reply is None:
            return 400, {"error": {"type": "invalid_request_error", "message": (
                f"LLMReplayServer has no recorded reply left for chat request #{serial + 1} "
                f"(last message: {last_message_text(body)[:200]!r}); add more with server.add(...)")}}, 0.0
        if reply.status != 200:
            message = reply.error or f"replayed HTTP {reply.status}"
            return reply.status, reply.body or {"error": {"type": "server_error", "message": message}}, reply.delay_s
        if reply.body is not None:
            return 200, reply.body, reply.delay_s
        return 200, self._completion(body, reply, serial), reply.delay_s

    def _completion(self, body: dict[str, Any], reply: Reply, serial: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        calls: list[dict[str, Any]] = [{"id": c.get("id") or f"call_{serial}_{n}", "type": "function",
                  "function": {"name": c["name"], "arguments": c["arguments"] if isinstance(c["arguments"], str)
                               else json.dumps(c["arguments"])}}
                 for n, c in enumerate(reply.tool_calls)]
        if calls:
            message["tool_calls"] = calls
        prompt = sum(len(str(m.get("content") or "").split()) for m in body.get("messages") or [])
        completion = len((reply.content or "").split()) + sum(len(c["function"]["arguments"]) // 4 for c in calls)
        usage = reply.usage or {"prompt_tokens": prompt, "completion_tokens": completion,
                                "total_tokens": prompt + completion}
        return {"id": f"chatcmpl-replay-{serial}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model") or self.model,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": reply.finish_reason or ("tool_calls" if calls else "stop")}],
                "usage": usage}

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else [str(x) for x in inputs or []]
        data = [{"object": "embedding", "index": n, "embedding": hashed_embedding(t, self.embedding_dim)}
                for n, t in enumerate(texts)]
        tokens = sum(len(t.split()) for t in texts)
        return {"object": "list", "data": data, "model": body.get("model") or self.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


class _Handler(BaseHTTPRequestHandler):
    replay: LLMReplayServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence the per-request log lines on stderr."""

    def _send(self, status: int, payload: Any, delay_s: float = 0.0) -> None:
        if delay_s and self.replay._stopping.wait(delay_s):
            self.close_connection = True  # stopping: drop the connection, the client sees an error
            return
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing to answer

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        with self.replay._lock:
            self.replay.requests.append({"path": self.path, "body": None, "time": time.time(),
                                         "headers": {k.lower(): v for k, v in self.headers.items()}})
        if self.path.rstrip("/").endswith("/models"):
            entry: dict[str, Any] = {"id": self.replay.model, "object": "model", "created": 0, "owned_by": "envh"}
            if self.replay.max_model_len is not None:
                entry["max_model_len"] = self.replay.max_model_len
            self._send(200, {"object": "list", "data": [entry]})
        else:
            self._send(404, {"error": {"type": "not_found", "message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as exc:
            self._send(400, {"error": {"type": "invalid_request_error", "message": f"bad JSON: {exc}"}})
            return
        with self.replay._lock:
            self.replay.requests.append({"path": self.path, "body": body, "time": time.time(),
                                         "headers": {k.lower(): v for k, v in self.headers.items()}})
        if self.path.rstrip("/").endswith("/chat/completions"):
            if body.get("stream"):
                self._send(400, {"error": {"type": "invalid_request_error",
                                           "message": "LLMReplayServer does not stream"}})
                return
            self._send(*self.replay._chat(body))
        elif self.path.rstrip("/").endswith("/embeddings"):
            self._send(200, self.replay._embeddings(body))
        else:
            self._send(404, {"error": {"type": "not_found", "message": f"no route {self.path}"}})


try:  # the fixture exists only where pytest does; the server works without it
    import pytest
except ImportError:  # pragma: no cover
    pass
else:
    @pytest.fixture
    def llm_replay_server() -> Iterator[LLMReplayServer]:
        """A started ``LLMReplayServer`` with an empty script: add replies with ``.add()``,
        point clients at ``.base_url``, read what they sent in ``.requests``."""
        with LLMReplayServer() as server:
            yield server
