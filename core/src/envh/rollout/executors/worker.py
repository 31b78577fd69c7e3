"""The pool's episode worker process: ``python -m envh.rollout.executors.worker``.

It talks to its parent over stdin/stdout in length-prefixed JSON frames (never pickle:
the worker runs untrusted code and must not be able to hand the parent executable
data). Its file descriptor 1 is re-pointed at stderr so stray prints from env or policy
code cannot corrupt the protocol. It applies its resource limits before loading any
plugin, keeps envs and policies warm across episodes, and exits at end of input (so it
dies with its parent).

Messages in: ``{"op": "config", ...}`` first, then ``run`` (a request), ``check`` (build a
policy: the run's preflight), ``ping``, ``exit``. Messages out: ``ready`` (after the
config), ``result`` (a trajectory), ``checked``, ``pong``.
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


def undumpable() -> None:
    """Close this process's /proc entries (environ, mem, root, fds) to other processes of
    its uid: every fenced worker and Ray actor is ``nobody``, and a Ray actor shares the
    host's PID namespace, so it could read another worker's key from its environ."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """The worker loop: configure, then run episodes until end of input. Nothing an
    episode raises ends the loop: the runner turns it into a typed trajectory, and what
    escapes even that (or cannot be serialised) is sent as an ``infra_error`` one."""
    from .. import runner
    from ..trajectory import request_from_data, trajectory_to_data
    from ..warm import Warm
    from .base import WorkerConfig, apply_memory_limit, make_worker_registry

    first = read_message(inp)
    if first is None:
        return
    config = WorkerConfig(memory_mb=first.get("memory_mb"), cpu_s=first.get("cpu_s"),
                          plugins=tuple(first.get("plugins") or ()),
                          entry_points=bool(first.get("entry_points", True)))
    apply_memory_limit(config)
    undumpable()

    def over_cpu(_signum: int, _frame: Any) -> None:
        raise runner._Deadline(f"the episode used its CPU budget of {config.cpu_s:g} s")

    signal.signal(signal.SIGXCPU, over_cpu)
    warm = Warm(make_worker_registry(config))
    out.write(encode({"op": "ready", "pid": os.getpid(), "uid": os.getuid()}))
    out.flush()
    try:
        while (message := read_message(inp)) is not None:
            op = message.get("op")
            if op == "run":
                reply = _run(message, warm, config)
            elif op == "check":
                reply = _check(message, warm)
            elif op == "ping":
                reply = {"op": "pong", "payload": message.get("payload")}
            elif op == "exit":
                break
            else:
                reply = {"op": "error", "message": f"unknown op {op!r}"}
            try:
                frame = encode(reply)
            except BaseException as exc:  # noqa: BLE001 - e.g. a MemoryError under the rlimit
                if op != "run":
                    raise
                request = request_from_data(message["request"])
                frame = encode({"op": "result", "trajectory": trajectory_to_data(runner.infra_failure(
                    request, f"the trajectory could not be sent: {runner.describe(exc)}", final=True,
                    worker=f"pool:{os.getpid()}", detail=runner.format_traceback(exc)))})
            out.write(frame)
            out.flush()
    finally:
        warm.close()


def _run(message: dict[str, Any], warm: Any, config: Any) -> dict[str, Any]:
    from .. import runner
    from ..trajectory import request_from_data, trajectory_to_data
    from .base import arm_cpu_budget

    request = request_from_data(message["request"])
    try:
        arm_cpu_budget(config)
        trajectory = runner.run_episode(request, warm)
        return {"op": "result", "trajectory": trajectory_to_data(trajectory)}
    except BaseException as exc:  # noqa: BLE001 - the worker outlives whatever the episode did
        warm.close()
        failed = runner.infra_failure(request, f"the worker failed running the episode: {runner.describe(exc)}",
                                      final=True, worker=f"pool:{os.getpid()}", detail=runner.format_traceback(exc))
        return {"op": "result", "trajectory": trajectory_to_data(failed)}


def preflight(warm: Any, policy: str, options: dict[str, Any], spec: dict[str, Any] | None = None,
              spec_id: str | None = None, trust: str = "untrusted",
              data: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """Build the policy and the env stack a run will use (both stay warm for its first
    episode; ``data``: the host paths granted, as its requests carry them); ``None``, or
    what failed (``what``: policy or env), its message and traceback."""
    from .. import runner

    try:
        warm.policy(policy, dict(options))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the command
        return {"what": "policy", "error": runner.describe(exc), "traceback": runner.format_traceback(exc)}
    if spec is not None and spec_id:
        try:
            warm.env(spec_id, spec, trust, data)
        except BaseException as exc:  # noqa: BLE001
            warm.drop_env(spec_id, trust, data)
            return {"what": "env", "error": runner.describe(exc), "traceback": runner.format_traceback(exc)}
    return None


def preflight_error(policy: str, problem: dict[str, Any], where: str) -> Exception:
    """The command's error for a failed preflight."""
    from ... import errors

    tail = str(problem.get("traceback") or "")[-3000:]
    if problem.get("what") == "env":
        return errors.EnvError(f"The env cannot be built {where}: {problem['error']}\n{tail}")
    return errors.PolicyError(f"Policy {policy!r} cannot be built {where}: {problem['error']}\n{tail}")


def _check(message: dict[str, Any], warm: Any) -> dict[str, Any]:
    problem = preflight(warm, message["policy"], dict(message.get("options") or {}), message.get("spec"),
                        message.get("spec_id"), "trusted" if message.get("trust") == "trusted" else "untrusted",
                        tuple(str(p) for p in message.get("data") or ()))
    return {"op": "checked", "error": None, **(problem or {})}


def main() -> None:
    import faulthandler

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    faulthandler.enable()  # a crash in C still leaves its Python stack in the parent's report
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a person's Ctrl-C is the parent's to handle
    inp = sys.stdin.buffer
    try:
        serve(inp, out)
    except BrokenPipeError:  # the parent went away: nothing left to report to
        pass


if __name__ == "__main__":
    main()
