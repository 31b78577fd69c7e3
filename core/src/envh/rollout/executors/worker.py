"""The pool's episode worker process: ``python -m envh.rollout.executors.worker``.

It talks to its parent over stdin/stdout in length-prefixed JSON frames (never pickle:
the worker runs untrusted code and must not be able to hand the parent executable
data). Its file descriptor 1 is re-pointed at stderr so stray prints from env or policy
code cannot corrupt the protocol. It applies its resource limits before loading any
plugin, keeps envs and policies warm across episodes, and exits at end of input (so it
dies with its parent).

Messages in: ``{"op": "config", ...}`` first, then ``run`` (a request), ``ping``, ``exit``.
Messages out: ``ready`` (after the config), ``result`` (a trajectory), ``pong``.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import sys
from typing import IO, Any

HEADER = struct.Struct(">I")
MAX_FRAME = 512 * 1024 * 1024


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=repr).encode()
    return HEADER.pack(len(body)) + body


def read_exact(stream: IO[bytes], n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_message(stream: IO[bytes]) -> dict[str, Any] | None:
    header = read_exact(stream, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes exceeds the {MAX_FRAME} byte limit")
    body = read_exact(stream, size)
    if body is None:
        return None
    message: dict[str, Any] = json.loads(body)
    return message


class FrameReader:
    """Incremental decoder for the parent side (non-blocking pipe reads)."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self.buffer += data
        out = []
        while len(self.buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self.buffer)
            if size > MAX_FRAME:
                raise ValueError(f"frame of {size} bytes exceeds the {MAX_FRAME} byte limit")
            if len(self.buffer) < HEADER.size + size:
                break
            body = bytes(self.buffer[HEADER.size:HEADER.size + size])
            del self.buffer[:HEADER.size + size]
            out.append(json.loads(body))
        return out


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """The worker loop: configure, then run episodes until end of input."""
    from .. import runner
    from ..trajectory import request_from_data, trajectory_to_data
    from ..warm import Warm
    from .base import WorkerConfig, apply_memory_limit, arm_cpu_budget, make_worker_registry

    first = read_message(inp)
    if first is None:
        return
    config = WorkerConfig(memory_mb=first.get("memory_mb"), cpu_s=first.get("cpu_s"),
                          plugins=tuple(first.get("plugins") or ()),
                          entry_points=bool(first.get("entry_points", True)))
    apply_memory_limit(config)

    def over_cpu(_signum: int, _frame: Any) -> None:
        raise runner._Deadline(f"the episode used its CPU budget of {config.cpu_s:g} s")

    signal.signal(signal.SIGXCPU, over_cpu)
    warm = Warm(make_worker_registry(config))
    out.write(encode({"op": "ready", "pid": os.getpid()}))
    out.flush()
    try:
        while (message := read_message(inp)) is not None:
            op = message.get("op")
            if op == "run":
                arm_cpu_budget(config)
                trajectory = runner.run_episode(request_from_data(message["request"]), warm)
                reply = {"op": "result", "trajectory": trajectory_to_data(trajectory)}
            elif op == "ping":
                reply = {"op": "pong", "payload": message.get("payload")}  # type: ignore[dict-item]
            elif op == "exit":
                break
            else:
                reply = {"op": "error", "message": f"unknown op {op!r}"}
            out.write(encode(reply))
            out.flush()
    finally:
        warm.close()


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    try:
        serve(inp, out)
    except BrokenPipeError:  # the parent went away: nothing left to report to
        pass


if __name__ == "__main__":
    main()
