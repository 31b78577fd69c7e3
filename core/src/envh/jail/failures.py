"""What the host says when a jail fails: the typed ``ContractCodeError`` for a dead, lying
or overrunning jail process, and for a program lost in a restart."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

from .. import errors
from . import wire


def death_signal(proc: subprocess.Popen[bytes]) -> int | None:
    """The signal that ended the jail's Python (bubblewrap exits with 128 + it), or None."""
    try:
        code = proc.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        return None
    return -code if code < 0 else code - 128 if code > 128 else None


def broken_jail_error(exc: BaseException, sig: int | None, cpu: float, hook: str) -> errors.ContractCodeError:
    """The error for a call whose jail process died (``sig``, when known, ended it) or sent
    something it may not (``exc``); the process has been killed and is restarted."""
    if isinstance(exc, wire.TooBig):
        return errors.ContractCodeError(f"{exc}; the jail process was restarted: keep memo and "
                                        "results small", hook=hook)
    if sig == signal.SIGPROF:  # the per-call CPU timer: one operation that never ended
        return errors.ContractCodeError(
            f"used its CPU time limit of {cpu * 1000:.0f} ms in an operation that cannot be "
            "interrupted (huge arithmetic or sorting, or encoding a huge memo or answer); "
            "the jail process was killed and restarted", hook=hook)
    why = {signal.SIGKILL: "killed (CPU or memory limit)",
           signal.SIGXCPU: "killed at its CPU limit"}.get(sig, "died")  # type: ignore[call-overload]
    return errors.ContractCodeError(
        f"the jail process {why} while running this code ({type(exc).__name__}); it was "
        "restarted: avoid heavy work and huge allocations in hooks", hook=hook)


def lost_program(why: Any) -> dict[str, Any]:
    """The error a program keeps when it could not be loaded again after a restart (its
    load failed, or killed the new process); the jail's other programs were loaded again."""
    return {"message": f"could not be loaded again after a jail restart ({str(why)[:2000]}); the "
                       "jail's other programs were; build the env again to retry this one"}


def code_error(err: Any) -> errors.ContractCodeError:
    """The ``ContractCodeError`` for an error the jail reported (checked: the jail is hostile)."""
    err = err if isinstance(err, dict) else {"message": repr(err)}
    lineno, col, hook = err.get("lineno"), err.get("col"), err.get("hook")
    return errors.ContractCodeError(str(err.get("message"))[:4000],
                                    lineno=lineno if type(lineno) is int else None,
                                    col=col if type(col) is int else None,
                                    hook=hook if type(hook) is str else None)
