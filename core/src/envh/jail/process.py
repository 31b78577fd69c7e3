"""The host side of the jail: one persistent helper process per host process, fed hook
calls over a pipe, killed and restarted when a call overruns its wall-clock limit or the
process dies (a memory bomb, a CPU limit, a crash). Every such failure is a typed
``ContractCodeError`` for the hook that caused it; the run goes on.
"""

from __future__ import annotations

import atexit
import os
import select
import subprocess
import sys
import threading
import time
from typing import Any

from .. import errors
from . import wire
from .bwrap import bwrap_path, python_paths, sandboxed_command

_BOOT = """import sys, types
sys.path[:0] = {paths!r}
pkg = types.ModuleType("envh"); pkg.__path__ = [{envh!r}]; sys.modules["envh"] = pkg
from envh.jail import worker
worker.main({memory_mb}, {cpu_total_s})
"""


def _site_dir(module: str) -> str:
    mod = __import__(module)
    assert mod.__file__ is not None, module
    return os.path.dirname(os.path.dirname(os.path.realpath(mod.__file__)))


class Jail:
    """A helper process that runs contract programs under hard limits.

    ``memory_mb`` caps its address space (RLIMIT_AS), ``cpu_total_s`` its CPU time over
    its life (each call also gets a CPU limit of its own); it has no environment, at most
    8 open files, cannot create processes or write files, and — under bubblewrap, which
    is required when the host runs as root — sees no host process, network or file beyond
    the Python installation it runs.
    """

    def __init__(self, *, memory_mb: int = 512, cpu_total_s: int = 3600, grace_s: float = 2.0) -> None:
        self.memory_mb, self.cpu_total_s, self.grace_s = memory_mb, cpu_total_s, grace_s
        self.isolation = "bwrap" if bwrap_path() else "rlimits"
        self.restarts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._programs: dict[int, dict[str, Any]] = {}
        self._next_id = 0
        self._lock = threading.RLock()
        self._pid = os.getpid()

    # -- process ---------------------------------------------------------------------------
    def _command(self) -> list[str]:
        envh_dir = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        sites = sorted({_site_dir("re2"), _site_dir("attrs"), _site_dir("attr")})
        boot = _BOOT.format(paths=[os.path.dirname(envh_dir), *sites], envh=envh_dir,
                            memory_mb=self.memory_mb, cpu_total_s=self.cpu_total_s)
        python = os.path.realpath(sys.executable)
        argv = [python, "-I", "-S", "-B", "-c", boot]
        if self.isolation == "rlimits":
            if os.geteuid() == 0:
                raise errors.JailError(
                    "untrusted code cannot run as root without bubblewrap: install it "
                    "(dev/setup.d/jail.sh, or apt-get install bubblewrap)")
            return argv
        binds = [*python_paths(), envh_dir]
        for site in sites:
            binds += [os.path.join(site, name) for name in ("re2", "attrs", "attr")]
        return sandboxed_command(argv, ro_binds=binds)

    def _start(self) -> subprocess.Popen[bytes]:
        try:
            proc = subprocess.Popen(self._command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env={}, close_fds=True, cwd="/")
        except OSError as exc:
            raise errors.JailError(f"could not start the jail process: {exc}") from exc
        self._proc = proc
        return proc

    def _kill(self, *, failed: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        self.restarts += failed
        proc.kill()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        proc.wait()

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._pid != os.getpid():  # a forked child must not share its parent's pipe
            self._proc, self._pid = None, os.getpid()
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._proc is not None:
            self._kill(failed=True)
        proc = self._start()
        for pid, prog in list(self._programs.items()):  # a fresh jail: load every program again
            if prog.get("broken"):
                continue
            try:
                reply = self._exchange(proc, {**prog["load"], "id": pid}, prog["wall"], "<module>")
            except errors.ContractCodeError as exc:  # its reload killed the jail: start another
                reply = {"error": {"message": f"could not be loaded again after a jail restart: {exc.message}"}}
                proc = self._proc or self._start()
            if "error" in reply:
                prog["broken"] = reply["error"]
        return self._proc or proc

    def _exchange(self, proc: subprocess.Popen[bytes], msg: dict[str, Any], wall: float, hook: str) -> Any:
        assert proc.stdin is not None and proc.stdout is not None
        out_fd = proc.stdout.fileno()
        try:
            wire.send(proc.stdin.fileno(), msg, lenient=True)
            deadline = time.monotonic() + wall
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([out_fd], [], [], left)[0]:
                    self._kill(failed=True)
                    raise errors.ContractCodeError(
                        f"ran longer than its wall-clock limit of {wall * 1000:.0f} ms; the jail "
                        "process was killed and restarted", hook=hook)
                return wire.recv(out_fd, max_items=wire.MAX_ITEMS)
        except (OSError, EOFError, ValueError, RecursionError) as exc:  # a dead or lying jail
            code = proc.poll()
            self._kill(failed=True)
            why = {-9: "killed (CPU or memory limit)", -24: "killed at its CPU limit"}.get(code or 0, "died")
            if isinstance(exc, wire.TooBig):
                raise errors.ContractCodeError(f"{exc}; the jail process was restarted: keep memo and "
                                               "results small", hook=hook) from None
            raise errors.ContractCodeError(
                f"the jail process {why} while running this code ({type(exc).__name__}); it was "
                "restarted: avoid heavy work and huge allocations in hooks", hook=hook) from None

    def request(self, msg: dict[str, Any], *, wall: float, hook: str) -> Any:
        with self._lock:
            proc = self._ensure()
            return self._exchange(proc, msg, wall, hook)

    # -- programs --------------------------------------------------------------------------
    def load(self, source: str, hooks: tuple[str, ...], *, time_limit: float, max_ops: int) -> int:
        """Run ``source``'s top level in the jail; the program's id. Raises ``ContractCodeError``."""
        wall = self.wall(time_limit)
        load = {"op": "load", "source": source, "hooks": list(hooks), "time_limit": time_limit,
                "max_ops": max_ops}
        with self._lock:
            pid = self._next_id = self._next_id + 1
            reply = self.request({**load, "id": pid}, wall=wall, hook="<module>")
            if "error" in reply:
                raise _code_error(reply["error"])
            self._programs[pid] = {"load": load, "wall": wall, "hooks": tuple(reply["hooks"])}
        return pid

    def hooks(self, pid: int) -> tuple[str, ...]:
        return self._programs[pid]["hooks"]  # type: ignore[no-any-return]

    def call(self, pid: int, hook: str, args: list[Any], state: Any, memo: dict[str, Any],
             time_limit: float) -> tuple[Any, dict[str, Any]]:
        """Call ``hook`` of program ``pid``; the decoded result and the new memo."""
        with self._lock:
            prog = self._programs[pid]
            if prog.get("broken"):
                raise _code_error(prog["broken"])
            reply = self.request({"op": "call", "id": pid, "hook": hook, "args": args, "state": state,
                                  "memo": memo, "cpu_s": max(1, int(time_limit * 4) + 1)},
                                 wall=self.wall(time_limit), hook=hook)
            if "error" in reply and prog.get("broken"):
                raise _code_error(prog["broken"])
        if "error" in reply:
            raise _code_error(reply["error"])
        memo_out = reply.get("memo")
        if type(memo_out) is not dict:
            raise errors.ContractCodeError("memo must stay a dict", hook=hook)
        try:
            return wire.decode(reply.get("out")), memo_out
        except (TypeError, ValueError) as exc:
            raise errors.ContractCodeError(f"returned a malformed record: {exc}", hook=hook) from None

    def unload(self, pid: int) -> None:
        with self._lock:
            if self._programs.pop(pid, None) is not None and self._proc is not None and self._proc.poll() is None:
                try:
                    self._exchange(self._proc, {"op": "unload", "id": pid}, 5.0, "<unload>")
                except errors.ContractCodeError:
                    pass

    def wall(self, time_limit: float) -> float:
        """The wall-clock limit of one call: the code's own limit, twice, plus a grace for
        the round trip and a busy machine (the in-jail checks report ordinary overruns
        first; this kill is for what they cannot stop)."""
        return 2 * time_limit + self.grace_s

    def close(self) -> None:
        with self._lock:
            self._kill()
            self._programs.clear()


def _code_error(err: Any) -> errors.ContractCodeError:
    err = err if isinstance(err, dict) else {"message": repr(err)}
    lineno, col, hook = err.get("lineno"), err.get("col"), err.get("hook")
    return errors.ContractCodeError(str(err.get("message"))[:4000],
                                    lineno=lineno if type(lineno) is int else None,
                                    col=col if type(col) is int else None,
                                    hook=hook if type(hook) is str else None)


_default: Jail | None = None
_default_lock = threading.Lock()


def default_jail() -> Jail:
    """The process-wide jail (started on first use, restarted after a fork)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Jail()
            atexit.register(_default.close)
        return _default
