"""The jail fails closed even for code that got out of the sandbox inside it (issue 24).

The break is simulated the way the attacker did it: the real jail process under
bubblewrap, with its worker's sandbox replaced by plain ``exec`` (every builtin, any
module), so the code can do whatever a Python process with the jail's limits can. What
stays must be what the process, the kernel and the host enforce: no new process, no CPU
between calls, a bounded read of every answer, one spec's jails apart from another's.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import envh
import pytest
from envh import Action, Block, TaskRef
from envh.errors import ContractCodeError
from envh.jail import Jail, bwrap_path, process, stacks, wire
from proctools import alive, descendants

TASK = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})
UPPER = "def filter_observation(observation, state, memo):\n    return observation.text.upper()\n"

pytestmark = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                reason="bubblewrap not installed (dev/setup.d/jail.sh)")

def load(jail: Jail, source: str, time_limit: float = 0.25) -> int:
    return jail.load(source, ("filter_action",), time_limit=time_limit, max_ops=10_000)


def call(jail: Jail, program: int, time_limit: float = 0.25) -> object:
    out, _ = jail.call(program, "filter_action", [wire.encode(ADD)], None, {}, time_limit)
    return out


def python_of(jail: Jail) -> int:
    """The host pid of the jail's Python (below bubblewrap's processes)."""
    assert jail.pid is not None
    found = [p for p in [jail.pid, *descendants(jail.pid)] if _cmd(p).startswith(b"/") and b"python" in _cmd(p)]
    assert len(found) == 1, found
    return found[0]


def _cmd(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().split(b"\0")[0]
    except OSError:
        return b""


def cpu_s(pid: int) -> float:
    """CPU seconds the process has used (user + system), as the kernel counts them."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_limits(pid: int) -> tuple[str, str]:
    with open(f"/proc/{pid}/limits") as fh:
        line = next(li for li in fh if li.startswith("Max cpu time"))
    soft, hard = line.split()[3:5]
    return soft, hard


# -- 1. no new process, even for code out of the sandbox ---------------------------------------
FORK = """import os
def filter_action(action, state, memo):
    try:
        child = os.fork()
    except OSError as exc:
        return Block(reason='refused: ' + type(exc).__name__)
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    return Block(reason='forked')
"""


def test_code_out_of_the_sandbox_cannot_fork(broken: Jail) -> None:
    """RLIMIT_NPROC 0 binds only a process whose host uid is not root: the jail's Python
    runs as an unprivileged host uid, and its fork fails."""
    out = call(broken, load(broken, FORK))
    assert isinstance(out, Block) and out.reason.startswith("refused"), out
    with open(f"/proc/{python_of(broken)}/status") as fh:
        uids = next(li for li in fh if li.startswith("Uid:")).split()[1:]
    assert "0" not in uids, uids


# -- 2. no CPU between calls, no raising the CPU limit ----------------------------------------
RAISE_CPU = """import resource
def filter_action(action, state, memo):
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
    except (ValueError, OSError):
        pass
    return None
"""


def test_the_jails_cpu_limit_is_hard(broken: Jail) -> None:
    """The lifetime CPU limit is set with hard == soft: code cannot raise it."""
    program = load(broken, RAISE_CPU)
    pid = python_of(broken)
    soft, hard = cpu_limits(pid)
    assert soft == hard == str(broken.cpu_total_s), (soft, hard)
    assert call(broken, program) is None
    assert cpu_limits(pid) == (str(broken.cpu_total_s),) * 2


BURN = """import signal
def _burn(signum, frame):
    while True:
        pass
def filter_action(action, state, memo):
    signal.signal(signal.SIGALRM, _burn)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    return None
"""


def test_a_signal_handler_burns_no_cpu_between_calls(broken: Jail) -> None:
    """A handler that fires after its call has answered gets no CPU until the next call,
    and that call is still ended at its limit."""
    program = load(broken, BURN)
    assert call(broken, program, time_limit=0.1) is None
    pid = python_of(broken)
    before = cpu_s(pid)
    time.sleep(1.0)
    used = cpu_s(pid) - before
    assert used < 0.05, f"the jail used {used:.2f} s of CPU between calls"
    t0 = time.monotonic()
    with pytest.raises(ContractCodeError, match="limit"):
        call(broken, program, time_limit=0.1)
    assert time.monotonic() - t0 < 60 and broken.restarts == 1


# -- 3. every read of an answer has a deadline for the whole message ---------------------------
TORN = """import os, struct, time
def filter_action(action, state, memo):
    for fd in range(3, 8):
        try:
            os.write(fd, {start!r})
        except OSError:
            pass
    time.sleep(3600)
"""


@pytest.mark.parametrize("start", [b"\x00\x00", b"\x00\x00\x00\x64x"], ids=["half-header", "header-and-a-byte"])
def test_an_answer_that_stops_midway_ends_at_the_wall_clock_limit(broken: Jail, start: bytes) -> None:
    """Only the first byte of an answer had a deadline: a jail that sent part of one and
    went silent held the host forever."""
    program = load(broken, TORN.format(start=start))
    outcome = bounded(broken, lambda: call(broken, program, time_limit=0.1))
    assert isinstance(outcome, ContractCodeError) and "wall-clock" in outcome.message, outcome
    assert broken.restarts == 1


def test_a_jail_that_stops_reading_ends_at_the_wall_clock_limit(broken: Jail) -> None:
    """A handler left running when the next call arrives never reads it: a call larger
    than the pipe holds must not block the host's write forever."""
    program = load(broken, BURN)
    assert call(broken, program, time_limit=0.1) is None
    time.sleep(0.2)  # the handler's timer is due: it runs as soon as the jail runs again
    big = {"x": "y" * (4 << 20)}
    outcome = bounded(broken, lambda: broken.call(program, "filter_action", [wire.encode(ADD)], None, big, 0.1))
    assert isinstance(outcome, ContractCodeError) and "wall-clock" in outcome.message, outcome


def bounded(jail: Jail, fn: Callable[[], object], limit: float = 60.0) -> object:
    """``fn()``'s result or exception; a failure if it still runs after ``limit`` seconds
    (then the jail is killed, which ends a stuck read or write)."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            result.append(exc)

    caller = threading.Thread(target=run, daemon=True)
    caller.start()
    caller.join(limit)  # the calls' limits are 2 x 0.1 + 2 s of wall clock: this is a hang
    if caller.is_alive():
        os.kill(python_of(jail), 9)
        caller.join(10)
        pytest.fail(f"the host was still in a call to the jail after {limit:.0f} s")
    return result[0]


# -- 4. one spec cannot take every jail -------------------------------------------------------
def test_one_spec_cannot_take_every_jail_of_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A contract and seven chain legs with contracts would take all eight jails left:
    the spec gets at most its share, still runs, and another stack still gets a jail."""
    monkeypatch.setattr(process, "MAX_LIVE", len(process._live) + 8)
    before = len(process._live)
    leg = {"bridge": "toy24", "layers": [{"kind": "contract", "code": UPPER}]}
    hog = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": UPPER},
                                                   {"kind": "chain", "legs": [leg] * 7}]}, trust="untrusted")
    other = None
    try:
        assert len(process._live) - before < 8
        assert hog.reset(task=TASK, seed=0).observation.text.startswith("TARGET")
        for leg_env in hog.legs[1:]:  # type: ignore[attr-defined]
            assert leg_env.reset(task=TASK, seed=0).observation.text.startswith("TARGET")
        other = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": UPPER}]}, trust="untrusted")
        other.reset(task=TASK, seed=0)
        assert other.step(ADD).observation.text.startswith("TARGET")
        assert len(process._live) - before <= stacks.MAX_PER_STACK + 1
    finally:
        hog.close()
        if other is not None:
            other.close()


def test_jails_are_never_shared_between_specs_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Legs past a spec's share join that spec's own jails, never another spec's (two
    specs differing by a comment are two specs)."""
    monkeypatch.setattr(stacks, "MAX_PER_STACK", 1)
    leg = {"bridge": "toy24", "layers": [{"kind": "contract", "code": UPPER}]}
    spec = {"bridge": "toy24", "layers": [{"kind": "contract", "code": UPPER}, {"kind": "chain", "legs": [leg] * 2}]}
    other = {**spec, "layers": [{"kind": "contract", "code": UPPER + "# another\n"}, spec["layers"][1]]}
    a, b = envh.make(spec, trust="untrusted"), envh.make(other, trust="untrusted")
    try:
        jails_a = {id(env._jail) for env in (a.inner, *a.legs[1:])}  # type: ignore[attr-defined]
        jails_b = {id(env._jail) for env in (b.inner, *b.legs[1:])}  # type: ignore[attr-defined]
        assert len(jails_a) == len(jails_b) == 1 and not jails_a & jails_b
    finally:
        a.close()
        b.close()


# -- 5. a restart during reload keeps every program it can -------------------------------------
KILLED_ON_RELOAD = """import os, signal, time
if time.time() > {deadline!r}:
    os.kill(os.getpid(), signal.SIGKILL)
def filter_action(action, state, memo):
    return Block(reason='b')
"""


def test_a_program_that_kills_its_reload_is_the_only_one_lost(broken: Jail) -> None:
    """A loaded before B, C after it: after a restart, B's reload kills the new process.
    B alone is marked broken; A (reloaded before B) and C still answer."""
    a = load(broken, "def filter_action(action, state, memo):\n    return Block(reason='a')\n")
    deadline = time.time() + 2.0
    b = load(broken, KILLED_ON_RELOAD.format(deadline=deadline))
    c = load(broken, "def filter_action(action, state, memo):\n    return Block(reason='c')\n")
    assert [call(broken, p).reason for p in (a, b, c)] == ["a", "b", "c"]  # type: ignore[attr-defined]
    time.sleep(max(deadline - time.time(), 0) + 0.2)
    old = broken.pid
    assert old is not None
    os.kill(old, 9)
    for _ in range(100):
        if not alive(old):
            break
        time.sleep(0.05)
    assert call(broken, a).reason == "a"  # type: ignore[attr-defined]
    assert call(broken, c).reason == "c"  # type: ignore[attr-defined]
    with pytest.raises(ContractCodeError, match="could not be loaded again after a jail restart"):
        call(broken, b)
    assert call(broken, a).reason == "a"  # type: ignore[attr-defined]
