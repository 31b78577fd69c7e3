"""The host side of the jail: a persistent helper process (one per env stack by
default), fed hook calls over a pipe, killed when a call overruns its limits and restarted
on the next call. Every such failure is a typed ``ContractCodeError`` for the hook that
caused it; the run goes on. Between calls the process is stopped (``pause.Stopper``), so
nothing runs in it but calls, each under its limits.

Two limits end a call. Its CPU time, counted by the kernel from when the jail read the
call (``ITIMER_PROF``: ``time_limit`` plus ``grace_s``), kills a hook stuck in one C call
(a regex, ``sum(itertools.count())``) about ``time_limit + grace_s`` after it began on an
idle machine; a busy machine slows the hook, not its CPU budget, so honest code is not
killed for the machine's load. The wall clock (``wall()``, twice the limit plus
``busy_s``) only backs that up for a jail that gets almost no CPU, and bounds the whole
exchange, sending the call and reading every byte of the answer: a jail that stops
reading or answers halfway is killed at that deadline too.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

from .. import errors
from . import wire
from .bwrap import NOBODY, bwrap_path, python_paths, sandboxed_command
from .failures import broken_jail_error, code_error, death_signal, lost_program
from .pause import Stopper

#: CPU seconds a call may use beyond its time limit (see ``Jail``). What it pays for,
#: measured on a loaded 2-core machine: encoding an answer at the 32 MB message cap takes
#: ~55 ms of CPU (an ordinary call well under 1 ms), and the in-jail clock is read every
#: 256 loop iterations; 0.1 s covers both without letting a hang run much longer.
GRACE_S = 0.1
#: Extra CPU and wall seconds for loading a program (parse, check, compile, top level).
LOAD_S = 1.0
#: Wall seconds beyond twice the limit before a jail that gets no CPU is killed anyway.
BUSY_S = 2.0
#: Wall seconds the first exchange with a freshly started jail gets on top of its call's:
#: the interpreter's start (81 ms on an idle machine) is in it, and on a loaded one (a
#: training node's rollouts, a test suite's parallel workers) it took over 3 s. CPU is not
#: affected: the kernel counts a call's CPU from when the jail has read it.
START_S = 10.0
#: Seconds the host waits for an answer awake before it sleeps on the pipe. A sleeping
#: host takes ~0.1 ms just to wake on a virtual machine, longer than an idle jail takes to
#: answer a light hook (~0.05 ms): one exchange alone fell from ~0.11 to ~0.06 ms, the
#: exchange before an ALFWorld step from 0.15 to 0.11 ms. After a benchmark's step the
#: jail's caches are cold and it answers in ~0.3 ms: spinning that long too gained ~0.05 ms
#: there but, on a loaded machine, takes the CPU the jail or other workers need, so the
#: spin stays short. Only with a second CPU for the jail to run on meanwhile.
SPIN_S = 0.0002 if len(os.sched_getaffinity(0)) > 1 else 0.0
#: Jail processes one host process may run at once (~24 MB each): every env stack with
#: untrusted code has one, and a hostile spec must not start hundreds (a chain of many
#: legs, each with a contract; one spec gets at most ``stacks.MAX_PER_STACK``). Beyond it,
#: building another stack is a ``JailError`` for that stack alone.
MAX_LIVE = 32


def memo_of(exc: BaseException) -> dict[str, Any] | None:
    """The memo a failed call left (what its hooks changed before failing, as the trusted
    tier's in-place memo keeps it), or ``None`` where the jail answered none (it died)."""
    memo = getattr(exc, "memo", None)
    return memo if type(memo) is dict else None


#: ``Jail.call_then``'s second result where the second hook was not run.
NOT_RUN = object()
_live: set[int] = set()  # pids of the jail processes this process started and has not ended
os.register_at_fork(after_in_child=_live.clear)  # a forked child has started none


def live_count() -> int:
    """How many jail processes this process has started and not yet ended (at most
    ``MAX_LIVE``)."""
    return len(_live)


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
    its life (hard limits, which code in it cannot raise; each call also gets a CPU timer
    of its own); it has no environment, at most
    8 open files, cannot create processes or write files, and — under bubblewrap, which
    is required when the host runs as root — runs as an unprivileged host uid and sees no
    host process, network or file beyond the Python installation it runs. It is stopped
    between calls.

    A call may use ``time_limit + grace_s`` seconds of CPU (the grace pays for decoding
    the call and encoding the answer, and for the in-jail clock being read only every
    256 loop iterations); a load also gets ``LOAD_S`` for parsing and compiling. With
    ``idle_exit`` the process ends when its last program is unloaded (and when the
    ``Jail`` is garbage-collected). A program whose reload after a restart fails, or kills
    the new process, is marked broken alone: its calls raise ``ContractCodeError`` saying
    so, and every other program is loaded again.
    """

    def __init__(self, *, memory_mb: int = 512, cpu_total_s: int = 3600, grace_s: float = GRACE_S,
                 busy_s: float = BUSY_S, idle_exit: bool = True) -> None:
        self.memory_mb, self.cpu_total_s, self.grace_s, self.busy_s = memory_mb, cpu_total_s, grace_s, busy_s
        self.idle_exit = idle_exit
        self.isolation = "bwrap" if bwrap_path() else "rlimits"
        self.restarts = 0
        self.last_cpu_s = 0.0  # CPU seconds the last answered call used in the jail
        self._reaper: weakref.finalize | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopper: Stopper | None = None
        self._programs: dict[int, dict[str, Any]] = {}
        self._dropped: list[int] = []  # programs whose owner was collected unclosed (see ``drop``)
        self._next_id = 0
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._booting: int | None = None

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
        # run by root, the jail must not be host root: RLIMIT_NPROC does not bind root
        return sandboxed_command(argv, ro_binds=binds, host_uid=NOBODY)

    def _start(self) -> subprocess.Popen[bytes]:
        if len(_live) >= MAX_LIVE:
            gc.collect()  # stacks dropped without close() but held in a reference cycle
        if len(_live) >= MAX_LIVE:
            raise errors.JailError(
                f"{len(_live)} jail processes are already running in this process (each spec with "
                f"untrusted code runs a few; the limit is {MAX_LIVE}), so this stack gets none: close the "
                "env stacks you no longer use")
        try:
            proc = subprocess.Popen(self._command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env={}, close_fds=True, cwd="/")
        except OSError as exc:
            raise errors.JailError(f"could not start the jail process: {exc}") from exc
        assert proc.stdin is not None
        os.set_blocking(proc.stdin.fileno(), False)  # a jail that stops reading must not block a send
        self._proc, self._stopper = proc, Stopper(proc.pid)
        self._booting = proc.pid  # its first exchange also waits for the interpreter to start
        _live.add(proc.pid)
        # a Jail nobody holds any more (an env stack dropped without close()) ends its process
        self._reaper = weakref.finalize(self, _reap, proc, os.getpid(), self._stopper)
        return proc

    def _kill(self, *, failed: bool = False) -> None:
        proc, self._proc = self._proc, None
        stopper, self._stopper = self._stopper, None
        if self._reaper is not None:
            self._reaper.detach()
            self._reaper = None
        if proc is None:
            return
        self.restarts += failed
        _reap(proc, os.getpid(), stopper)

    @property
    def pid(self) -> int | None:
        """The host pid of the jail's process (bubblewrap's, under bubblewrap), if running."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._pid != os.getpid():  # a forked child must not share its parent's pipe
            self._proc, self._reaper, self._stopper, self._pid = None, None, None, os.getpid()
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._proc is not None:
            self._kill(failed=True)
        while True:  # each pass that fails marks one more program broken: the passes end
            proc = self._start()
            if self._reload(proc):
                return proc

    def _reload(self, proc: subprocess.Popen[bytes]) -> bool:
        """Load every program again into the fresh ``proc``. One whose load fails is marked
        broken; one whose load kills ``proc`` too, and then False: the programs loaded
        before it went with the process, so the caller starts another and loads the rest."""
        for pid, prog in list(self._programs.items()):
            if prog.get("broken") or prog["loading"]:
                continue
            try:
                reply = self._exchange(proc, {**prog["load"], "id": pid}, prog["wall"], "<module>",
                                       prog["cpu"])
            except errors.ContractCodeError as exc:
                prog["broken"] = lost_program(exc.message)
                return False
            if "error" in reply or type(reply.get("hooks")) is not list:
                err = reply.get("error", "the jail answered the load without its hooks")
                prog["broken"] = lost_program(err.get("message") if isinstance(err, dict) else err)
        return True

    def _exchange(self, proc: subprocess.Popen[bytes], msg: dict[str, Any], wall: float, hook: str,
                  cpu: float) -> Any:
        """Send one message and read the whole answer within ``wall`` seconds; the process
        runs only in between (stopped before and after)."""
        assert proc.stdin is not None and proc.stdout is not None
        booting, self._booting = self._booting == proc.pid, None
        deadline = time.monotonic() + wall + (START_S if booting else 0.0)
        try:
            if wire.readable(proc.stdout.fileno()):  # stopped since its last answer, it wrote more
                raise ValueError("the jail wrote after its answer")
            data, fd = wire.pack({**msg, "cpu_limit": cpu}, lenient=True), proc.stdin.fileno()
            # what fits in the pipe is written while the process is still stopped: continued,
            # it reads the call at once instead of waking twice (for SIGCONT, then the data)
            sent = wire.write_some(fd, data)
            if self._stopper is not None:
                self._stopper.cont()
            wire.write(fd, data[sent:], deadline)
            reply = wire.recv(proc.stdout.fileno(), max_items=wire.MAX_ITEMS, deadline=deadline, spin_s=SPIN_S)
            if type(reply) is not dict:  # the worker answers a mapping: anything else was not the worker
                raise ValueError(f"the jail answered a {type(reply).__name__}, not a message")
            if self._stopper is not None:
                self._stopper.stop()
            return reply
        except TimeoutError:
            self._kill(failed=True)
            raise errors.ContractCodeError(
                f"ran longer than its wall-clock limit of {wall * 1000:.0f} ms; the jail "
                "process was killed and restarted", hook=hook) from None
        except errors.JailError:  # it cannot be stopped between calls: it does not run on
            self._kill(failed=True)
            raise
        except (OSError, EOFError, ValueError, RecursionError) as exc:  # a dead or lying jail
            sig = death_signal(proc) if isinstance(exc, (OSError, EOFError)) else None
            self._kill(failed=True)
            raise broken_jail_error(exc, sig, cpu, hook) from None

    def request(self, msg: dict[str, Any], *, wall: float, hook: str, cpu: float) -> Any:
        with self._lock:
            proc = self._ensure()
            return self._exchange(proc, msg, wall, hook, cpu)

    # -- programs --------------------------------------------------------------------------
    def load(self, source: str, hooks: tuple[str, ...], *, time_limit: float, max_ops: int) -> int:
        """Run ``source``'s top level in the jail; the program's id. Raises ``ContractCodeError``."""
        wall, cpu = self.wall(time_limit) + LOAD_S, self.cpu_limit(time_limit) + LOAD_S
        load = {"op": "load", "source": source, "hooks": list(hooks), "time_limit": time_limit,
                "max_ops": max_ops}
        with self._lock:
            self._reap()
            pid = self._next_id = self._next_id + 1
            # registered first: an idle jail must not be ended (by another stack's unload) mid-load
            self._programs[pid] = prog = {"load": load, "wall": wall, "cpu": cpu, "hooks": (), "loading": True}
            try:
                reply = self.request({**load, "id": pid}, wall=wall, hook="<module>", cpu=cpu)
                if "error" in reply:
                    raise code_error(reply["error"])
            except BaseException:
                self.unload(pid)
                raise
            hooks = reply.get("hooks")
            if type(hooks) is not list or not all(type(h) is str for h in hooks):
                self._kill(failed=True)  # the worker answers a load with its hooks: this was not the worker
                self.unload(pid)
                raise errors.ContractCodeError("the jail answered the load without its hooks; the jail "
                                               "process was restarted", hook="<module>")
            prog["hooks"], prog["loading"] = tuple(hooks), False
        return pid

    def hooks(self, pid: int) -> tuple[str, ...]:
        return self._programs[pid]["hooks"]  # type: ignore[no-any-return]

    @property
    def program_count(self) -> int:
        """How many programs are loaded (what ``stacks`` balances a spec's jails by)."""
        with self._lock:
            self._reap()
            return len(self._programs)

    def drop(self, pid: int) -> None:
        """Program ``pid``'s owner is gone without unloading it (a stack dropped unclosed, from
        a finalizer): unloaded at this jail's next use. Only a list append here, as the
        collector may call it anywhere, even inside this jail's own exchange."""
        self._dropped.append(pid)

    def _reap(self) -> None:
        """Unload the dropped programs (the lock held)."""
        while self._dropped:
            self.unload(self._dropped.pop())

    def call(self, pid: int, hook: str, args: list[Any], state: Any, memo: dict[str, Any],
             time_limit: float) -> tuple[Any, dict[str, Any]]:
        """Call ``hook`` of program ``pid``; the decoded result and the new memo."""
        reply = self._call(pid, {"hook": hook, "args": args, "state": state, "memo": memo}, hook, time_limit, 1)
        return self._decode(reply, "out", hook), reply["memo"]

    def call_then(self, pid: int, hook: str, args: list[Any], then: str, state: Any, memo: dict[str, Any],
                  time_limit: float) -> tuple[Any, Any, dict[str, Any]]:
        """``modify_transition`` (``hook``, on ``args`` = [action, response]) and then
        ``filter_observation`` (``then``) on the observation it leaves, in one round trip
        (each call under ``time_limit``): a step's two hooks after the benchmark's own step
        cost one exchange. The results decoded (the second ``NOT_RUN`` where the first's
        answer cannot stand: the host refuses it) and the memo after both."""
        reply = self._call(pid, {"hook": hook, "then": then, "args": args, "state": state, "memo": memo},
                           f"{hook}, {then}", time_limit, 2)  # the jail gives each hook its own CPU limit
        second = self._decode(reply, "then", then) if "then" in reply else NOT_RUN
        return self._decode(reply, "out", hook), second, reply["memo"]

    def _call(self, pid: int, msg: dict[str, Any], hook: str, time_limit: float, calls: int) -> dict[str, Any]:
        with self._lock:
            self._reap()
            prog = self._programs[pid]
            if prog.get("broken"):
                raise code_error({**prog["broken"], "hook": hook})
            # CPU: each hook's limit (the jail arms it afresh per hook); wall: the exchange's
            reply = self.request({"op": "call", "id": pid, **msg}, wall=self.wall(time_limit * calls), hook=hook,
                                 cpu=self.cpu_limit(time_limit))
            if "error" in reply and prog.get("broken"):
                raise code_error({**prog["broken"], "hook": hook})
        used = reply.get("cpu_used")
        self.last_cpu_s = float(used) if type(used) is float else 0.0
        if "error" in reply:
            exc = code_error(reply["error"])
            if type(reply.get("memo")) is dict:  # what the hooks changed before failing (see ``memo_of``)
                exc.memo = reply["memo"]  # type: ignore[attr-defined]
            raise exc
        if type(reply.get("memo")) is not dict:
            raise errors.ContractCodeError("memo must stay a dict", hook=hook)
        return reply

    def _decode(self, reply: dict[str, Any], key: str, hook: str) -> Any:
        try:
            return wire.decode(reply.get(key))
        except RecursionError:
            self._kill(failed=True)  # honest code cannot nest this deep: a lying jail
            raise errors.ContractCodeError("returned a record nested too deeply", hook=hook) from None
        except (TypeError, ValueError) as exc:
            raise errors.ContractCodeError(f"returned a malformed record: {exc}", hook=hook) from None

    def unload(self, pid: int) -> None:
        """Forget program ``pid``; with ``idle_exit``, the last one ends the process."""
        with self._lock:
            if self._programs.pop(pid, None) is None or self._proc is None:
                return
            if self.idle_exit and not self._programs:
                self._kill()  # also closes the pipes of a process that already died
                return
            if self._proc.poll() is not None:
                return
            try:
                self._exchange(self._proc, {"op": "unload", "id": pid}, 5.0, "<unload>", 5.0)
            except (errors.ContractCodeError, errors.JailError):  # the process is gone: so is the program
                pass

    def cpu_limit(self, time_limit: float) -> float:
        """CPU seconds one call may use in the jail before the kernel ends the process."""
        return time_limit + self.grace_s

    def wall(self, time_limit: float) -> float:
        """The wall-clock limit of one call: a backstop for a jail that gets almost no CPU
        on a busy machine (the CPU limit ends a hang first whenever the jail runs)."""
        return 2 * time_limit + self.busy_s

    def close(self) -> None:
        with self._lock:
            self._kill()
            self._programs.clear()


def _reap(proc: subprocess.Popen[bytes], owner: int, stopper: Stopper | None = None) -> None:
    """End a jail process and close its pipes (only in the process that started it: a
    forked child holds a copy of the ``Popen`` but must not kill its parent's jail)."""
    if os.getpid() != owner:
        return
    _live.discard(proc.pid)
    if stopper is not None:
        stopper.close()
    proc.kill()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()
    proc.wait()

