"""The jail process: loads contract programs into ``envh.sandbox`` and answers hook calls
over its stdin/stdout pipe. Started by ``envh.jail.Jail`` (under bubblewrap, with no
environment); never imported by the host.

It sets its own hard resource limits before it reads the first program, after importing
everything a program can reach (so nothing is imported, and no file opened, later). Every
limit is set with hard == soft, so code that got out of the sandbox cannot raise one;
per call, CPU time is bounded by the ``ITIMER_PROF`` timer armed for each message, and
between calls the host keeps this process stopped (``Jail``), so nothing it left behind
(a signal handler, a timer) runs until the next call, under that call's limits.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from typing import Any

DECODE_S = 1.0  # CPU seconds to decode a call before its own budget is known (32 MB: ~50 ms)


def _limit(which: int, value: int) -> None:
    """Set ``which`` to ``value`` (or the lower limit already there), hard and soft alike:
    a soft limit below its hard one is only advice to code that can call ``setrlimit``.
    A limit that cannot be set ends the jail before it runs anything."""
    _, hard = resource.getrlimit(which)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (value, value))


def main(memory_mb: int, cpu_total_s: int) -> None:
    from envh import capabilities, sandbox
    from envh.errors import ContractCodeError
    from envh.jail import wire
    from envh.stateview import freeze
    from envh.types import EnvResponse

    capabilities.build_modules(iter)  # import re2 and every capability module now
    rin, wout = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    os.close(devnull)
    _limit(resource.RLIMIT_AS, memory_mb << 20)
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_NPROC, 0)
    _limit(resource.RLIMIT_NOFILE, 8)
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_CPU, cpu_total_s)
    # each message arms a CPU timer whose signal ends the process (SIGPROF's default
    # action): the only thing that stops one C call that never returns
    signal.signal(signal.SIGPROF, signal.SIG_DFL)
    arm = signal.setitimer
    programs: dict[int, tuple[sandbox.Sandbox, dict[str, Any]]] = {}
    names = capabilities.record_factories()

    def error(exc: BaseException) -> dict[str, Any]:
        if isinstance(exc, ContractCodeError):
            return {"error": {"message": exc.message, "lineno": exc.lineno, "col": exc.col, "hook": exc.hook}}
        return {"error": {"message": f"{type(exc).__name__}: {exc}"[:2000]}}

    while True:
        try:
            body = wire.recv_body(rin)
        except EOFError:
            return
        # decoding the call (its memo and state) is the call's cost too: a provisional
        # budget while decoding, then what is left of the call's own
        start = time.process_time()
        arm(signal.ITIMER_PROF, DECODE_S)
        msg = json.loads(body)
        budget = msg.get("cpu_limit")
        budget = float(budget) if type(budget) in (int, float) and budget > 0 else DECODE_S
        arm(signal.ITIMER_PROF, max(budget - (time.process_time() - start), 0.001))
        op = msg.get("op")
        try:
            if op == "load":
                sb = sandbox.Sandbox(msg["source"], names=names, time_limit=msg["time_limit"],
                                     max_ops=msg["max_ops"], allowed_functions=msg["hooks"],
                                     clock=time.process_time)
                fns = {h: sb.function(h) for h in msg["hooks"] if sb.function(h) is not None}
                programs[msg["id"]] = (sb, fns)
                reply: dict[str, Any] = {"hooks": sorted(fns)}
            elif op == "call":
                sb, fns = programs[msg["id"]]
                hook, memo = msg["hook"], msg["memo"]
                args = [wire.decode(a) for a in msg["args"]]
                state = msg["state"]
                if state is not None:
                    state = freeze(state)
                fn = fns[hook]
                assert fn is not None, hook
                out = sb.call_function(fn, hook, *args, state, memo)
                reply = {"out": wire.encode(out), "memo": memo}
                then = msg.get("then")
                if then is not None:  # filter_observation after modify_transition: one round trip
                    obs = _observation_after(out, args[1], EnvResponse)
                    second = fns[then]
                    if obs is not None and second is not None:
                        arm(signal.ITIMER_PROF, budget)  # each hook its own CPU limit, as apart
                        reply["then"] = wire.encode(sb.call_function(second, then, obs, state, memo))
                reply["cpu_used"] = time.process_time() - start
            elif op == "unload":
                programs.pop(msg["id"], None)
                reply = {}
            else:
                reply = {"error": {"message": f"unknown op {op!r}"}}
        except BaseException as exc:  # noqa: BLE001 - every failure is an answer, never a dead jail
            reply = error(exc)
            if op == "call" and type(msg.get("memo")) is dict:
                # what the hooks changed before failing stays, as in the trusted tier (memo in place)
                reply["memo"] = msg["memo"]
        try:
            data = wire.pack(reply)  # still under the CPU timer: a huge memo is the call's cost
        except (TypeError, ValueError, RecursionError) as exc:  # a memo or record holding non-JSON data
            data = wire.pack(error(ContractCodeError(
                f"returned or stored something that is not JSON data ({exc}); memo and records "
                "hold plain data only", hook=msg.get("hook"))))
        # disarmed before the first byte is written: the host reads a whole answer or none
        arm(signal.ITIMER_PROF, 0)
        wire.write(wout, data)


def _observation_after(out: Any, response: Any, response_type: Any) -> Any:
    """The observation ``filter_observation`` sees after ``modify_transition`` answered
    ``out`` to ``response``, as the host will rebuild it; None where the host refuses the
    answer (the second hook is not run: its call would not have happened)."""
    if out is None:
        return response.observation
    if type(out) is response_type and out.reward == response.reward:
        return out.observation
    return None


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
