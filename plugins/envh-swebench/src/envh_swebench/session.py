"""Host side of the in-container runner (see ``_runner.py``): one attached exec socket.

Requests and replies are JSON lines over the exec's stdin/stdout; Docker multiplexes
stdout and stderr on the socket in frames (8-byte header: stream, 3 pad bytes, size).
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator
from importlib import resources
from typing import Any

import attrs

_SOURCE: str | None = None


def _runner_source() -> str:
    global _SOURCE
    if _SOURCE is None:
        _SOURCE = resources.files("envh_swebench").joinpath("_runner.py").read_text()
    return _SOURCE


@attrs.define
class RunnerSession:
    """An attached ``python3 -u -c <runner>`` exec inside a container."""

    sock: socket.socket
    handle: Any  # keeps the SDK's response object (and so the socket) alive
    _stdout: bytearray = attrs.Factory(bytearray)
    _stderr: bytearray = attrs.Factory(bytearray)

    keep: list[int] = attrs.Factory(list)  # the container's own processes, as the runner found them

    @classmethod
    def open(cls, client: Any, container_id: str, *, timeout: float = 30,
             keep: list[int] | None = None) -> RunnerSession | None:
        """Start the runner; ``None`` when the image has no ``python3`` to run it.
        ``keep``: the processes the sweep spares, from the first runner of the container
        (a runner started again, after a command killed the last one, must not take what
        that command left running for the container's own)."""
        exec_id = client.api.exec_create(
            container_id, ["python3", "-u", "-c", _runner_source()], stdin=True,
            stdout=True, stderr=True, tty=False,
            environment=None if keep is None else {"ENVH_RUNNER_KEEP": " ".join(map(str, keep))})["Id"]
        handle = client.api.exec_start(exec_id, socket=True)
        raw = getattr(handle, "_sock", handle)
        raw.settimeout(timeout)
        session = cls(sock=raw, handle=handle)
        try:
            hello = json.loads(session._read_line())
        except (EOFError, ValueError, OSError):
            # python3 missing (the runtime prints its exec error, not our hello) or too
            # old to run the runner: the sandbox falls back to one exec per command.
            session.close()
            return None
        if not isinstance(hello, dict) or not hello.get("ready"):
            session.close()
            return None
        session.keep = [int(p) for p in hello.get("keep") or []]
        return session

    def request(self, payload: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        """Send one request and wait for its reply; EOFError when the runner died."""
        self.sock.settimeout(timeout)
        self.sock.sendall(json.dumps(payload).encode() + b"\n")
        reply: dict[str, Any] = json.loads(self._read_line())
        if "runner_error" in reply:
            raise OSError(f"runner error: {reply['runner_error']}")
        return reply

    def _read_exact(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError("runner exec closed its output: "
                               + self._stderr.decode("utf-8", "replace")[-500:])
            data += chunk
        return bytes(data)

    def frames(self) -> Iterator[bytes]:
        """Payloads of the exec's output frames (stdout and stderr) until it ends."""
        while True:
            header = self.sock.recv(8)
            if not header:
                return
            if len(header) < 8:
                header += self._read_exact(8 - len(header))
            _stream, size = struct.unpack(">BxxxL", header)
            yield self._read_exact(size)

    def _read_line(self) -> bytes:
        while b"\n" not in self._stdout:
            stream, size = struct.unpack(">BxxxL", self._read_exact(8))
            data = self._read_exact(size)
            (self._stderr if stream == 2 else self._stdout).extend(data)
        line, _, rest = bytes(self._stdout).partition(b"\n")
        self._stdout[:] = rest
        return line

    def close(self) -> None:
        """Close stdin so the runner exits, then the socket."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        close = getattr(self.handle, "close", None)
        if close is not None:
            try:
                close()
            except OSError:
                pass
