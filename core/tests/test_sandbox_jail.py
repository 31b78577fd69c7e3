"""The untrusted tier: contract code in the jail process, and what the jail's process
cannot see or do even if code got past the sandbox inside it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import envh
import pytest
from envh import Action, TaskRef
from envh.components.contract import CodeContract, check_contract_code
from envh.errors import ContractCodeError
from envh.jail import Jail, bwrap_path, sandboxed_command
from envh.jail.bwrap import python_paths
from proctools import descendants

TASK = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})
UPPER = "def filter_observation(observation, state, memo):\n    return observation.text.upper()\n"

pytestmark = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                reason="bubblewrap not installed (dev/setup.d/jail.sh)")


def contract_layer(code: str, **extra: object) -> dict:
    return {"kind": "contract", "code": code, **extra}


def test_both_tiers_give_the_same_answers() -> None:
    code = ("import re\n"
            "def filter_action(action, state, memo):\n"
            "    memo['n'] = memo.get('n', 0) + 1\n"
            "    if action.args['op'] == 'sub':\n        return Block(reason='no subtraction')\n"
            "def modify_transition(action, response, state, memo):\n"
            "    return evolve(response, info={**response.info, 'numbers': len(state['numbers'])})\n"
            "def filter_observation(observation, state, memo):\n"
            "    return re.sub('[0-9]', '#', observation.text) + ' ' + str(memo.get('n', 0))\n")
    plays = []
    for trust in ("trusted", "untrusted"):
        env = envh.make({"bridge": "toy24", "layers": [contract_layer(code)]}, trust=trust)
        env.reset(task=TASK, seed=0)
        out = [env.step(a) for a in (ADD, Action(tool="combine", args={"i": 0, "j": 1, "op": "sub"}))]
        plays.append([(r.observation, r.reward, r.info["envh"], r.info.get("numbers")) for r in out])
        assert env.layer_state() == {"n": 2}
        env.close()
    assert plays[0] == plays[1]
    assert plays[0][0][0].text.endswith(" 1") and "#" in plays[0][0][0].text
    assert plays[0][1][2][-1]["action"] == "blocked"


def test_spec_trust_reaches_every_contract_and_chain_leg() -> None:
    leg = {"bridge": "toy24", "layers": [contract_layer(UPPER)]}
    spec = {"bridge": "toy24", "trust": "untrusted",
            "layers": [contract_layer(UPPER), {"kind": "chain", "legs": [leg]}]}
    env = envh.make(spec)
    try:
        contracts = [env.inner, env.legs[1]]
        assert all(isinstance(c, CodeContract) and c.trust == "untrusted" and c.sandbox is None
                   for c in contracts)
    finally:
        env.close()
    trusted = envh.make({"bridge": "toy24", "layers": [contract_layer(UPPER)]}, trust="trusted")
    assert trusted.trust == "trusted" and trusted.sandbox is not None
    assert envh.make({"bridge": "toy24", "layers": [contract_layer(UPPER)]}).trust == "untrusted"  # the default
    layer_only = envh.make({"bridge": "toy24", "layers": [contract_layer(UPPER, trust="untrusted")]})
    assert layer_only.trust == "untrusted"


def test_c_level_hang_is_killed_typed_and_the_jail_recovers() -> None:
    """A hang in one layer ends the stack's jail process; the next call starts another,
    with every other program of the stack loaded again."""
    env = envh.make({"bridge": "toy24", "layers": [contract_layer(UPPER), contract_layer(
        "import math\ndef filter_action(action, state, memo):\n"
        "    if memo.get('hang'):\n        return math.factorial(10**7)\n")]}, trust="untrusted")
    jail = env._jail
    assert env.inner._jail is jail
    env.reset(task=TASK, seed=0)
    env.memo["hang"] = True
    t0 = time.monotonic()
    with pytest.raises(ContractCodeError, match="wall-clock limit|jail process") as info:
        env.step(ADD)
    assert time.monotonic() - t0 < 5 and info.value.hook == "filter_action"
    assert jail.restarts == 1
    env.memo["hang"] = False  # the other program survives the restart: reloaded in the new jail
    assert env.step(ADD).observation.text.startswith("TARGET: 24")
    env.close()


def test_memory_bomb_is_a_typed_error_and_the_host_stays_small() -> None:
    env = envh.make({"bridge": "toy24", "layers": [contract_layer(
        "def filter_action(action, state, memo):\n    return Block(reason='x'.ljust(6 * 10**8))\n")]},
        trust="untrusted")
    env.reset(task=TASK, seed=0)
    with pytest.raises(ContractCodeError, match="MemoryError|jail process"):
        env.step(ADD)
    env.close()


def test_check_contract_code_runs_the_top_level_in_the_jail() -> None:
    assert check_contract_code(UPPER) == ("filter_observation",)
    with pytest.raises(ContractCodeError, match="MemoryError|jail process|wall-clock"):
        check_contract_code("X = 'x'.ljust(6 * 10**8)\n" + UPPER)
    with pytest.raises(ContractCodeError, match="import of 'os' is not allowed") as info:
        check_contract_code("import os\n" + UPPER)
    assert info.value.lineno == 1


def test_a_memo_that_is_not_json_is_a_typed_error() -> None:
    env = envh.make({"bridge": "toy24", "layers": [contract_layer(
        "def filter_action(action, state, memo):\n    memo['f'] = len\n")]}, trust="untrusted")
    env.reset(task=TASK, seed=0)
    with pytest.raises(ContractCodeError, match="not JSON data"):
        env.step(ADD)
    env.close()


def test_a_lying_jail_cannot_hand_the_host_objects() -> None:
    """Whatever the jail process answers is decoded as checked JSON: no pickle, no types."""
    from envh.jail import wire

    for bad in ({"t": "Action", "tool": 1, "args": {}}, {"t": "EnvResponse", "observation": {"t": "value"}},
                {"t": "os.system"}, ["t"], {"t": "Observation", "text": "x", "data": []}):
        with pytest.raises(TypeError):
            wire.decode(bad)


PROBE = r"""
import os, socket, sys
out = {"uid": os.getuid(), "env": dict(os.environ)}
try:
    out["ppid_environ"] = open(f"/proc/{os.getppid()}/environ", "rb").read().decode(errors="replace")
except OSError as exc:
    out["ppid_environ"] = type(exc).__name__
try:
    out["pid1_environ"] = open("/proc/1/environ", "rb").read().decode(errors="replace")
except OSError as exc:
    out["pid1_environ"] = type(exc).__name__
out["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
out["/root"] = sorted(os.listdir("/root")) if os.path.isdir("/root") else []
for path in ("/work", "/etc/shadow", "/etc/passwd"):
    out[path] = os.path.exists(path)
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1)
    out["net"] = "connected"
except OSError as exc:
    out["net"] = type(exc).__name__
try:
    open("/usr/envh-probe", "w")
    out["write_usr"] = True
except OSError:
    out["write_usr"] = False
print(repr(out))
"""


def test_a_process_in_the_jail_sees_no_parent_secret_process_or_file(monkeypatch) -> None:
    """Even code that escaped the sandbox inside the jail process runs here."""
    monkeypatch.setenv("ENVH_PARENT_SECRET", "s3cret-value")
    cmd = sandboxed_command([os.path.realpath(sys.executable), "-I", "-S", "-c", PROBE], ro_binds=python_paths())
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    seen = eval(proc.stdout)  # noqa: S307 - our own probe's repr of plain data
    assert "s3cret-value" not in proc.stdout
    assert seen["uid"] == 65534 and "ENVH_PARENT_SECRET" not in seen["env"]
    assert "s3cret" not in seen["ppid_environ"] and "s3cret" not in seen["pid1_environ"]
    assert max(seen["pids"]) < 10  # its own pid namespace: no host process is visible
    # only the Python installation is mounted (under /root/.pyenv here): no home, no repo, no /etc
    assert set(seen["/root"]) <= {".pyenv"} and not seen["/work"] and not seen["/etc/shadow"]
    assert seen["net"] != "connected" and seen["write_usr"] is False


def test_the_jail_process_has_no_environment_and_its_limits() -> None:
    jail = Jail(memory_mb=256)
    try:
        pid = jail.load(UPPER, ("filter_observation",), time_limit=0.25, max_ops=1000)
        assert jail.hooks(pid) == ("filter_observation",)
        proc = jail._proc
        assert proc is not None
        children = _descendants(proc.pid)
        assert children, "the jail's python runs under bwrap"
        for pid_ in children:
            with open(f"/proc/{pid_}/environ", "rb") as fh:
                assert b"PATH=" not in fh.read()
            with open(f"/proc/{pid_}/limits") as fh:
                limits = fh.read()
        assert "Max address space         268435456" in limits
        assert "Max processes             0" in limits and "Max file size             0" in limits
    finally:
        jail.close()


def _descendants(pid: int) -> list[int]:
    return [p for p in descendants(pid) if _is_python(p)]


def _is_python(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"python" in fh.read().split(b"\0")[0]
    except OSError:
        return False


def test_binds_under_tmp_are_not_hidden_by_the_fresh_tmp(tmp_path) -> None:
    """A checkout or venv living under /tmp (CI clones there) stays visible in the jail:
    the fresh /tmp is mounted before the binds, which land on top of it."""
    from envh.jail.bwrap import bwrap_path, sandboxed_command

    if bwrap_path() is None:
        pytest.fail("bubblewrap is missing (dev/setup.d/jail.sh installs it)")
    (tmp_path / "marker.txt").write_text("visible")
    cmd = sandboxed_command(["/bin/cat", str(tmp_path / "marker.txt")], ro_binds=[str(tmp_path)])
    assert cmd.index("--tmpfs") < cmd.index(str(tmp_path))
    import subprocess

    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout == "visible", out.stderr
