"""Attacks on containment v3 (host bounds and the fail-closed jail) that still get through.

Each test states what the containment promises and FAILS on the current code: it is
marked ``xfail(strict=True)`` with the finding, so the suite stays green until the hole is
closed (then the test passes, the strict xfail turns red, and the mark comes off).

Budgets are in operations (bytes parsed, recursion) where possible; the few wall limits
run the input in a child interpreter, killed at the limit, with at least ~2x between the
current behaviour and a fixed one on either side (interpreter start included).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import envh
import pytest
from envh import Action, Block, errors
from envh.capabilities import record_factories
from envh.components.contract import HOOKS
from envh.errors import ContractCodeError
from envh.jail import Jail, bwrap_path, wire
from envh.limits import MAX_CODE_BYTES
from envh.sandbox import Sandbox, parse_and_check

HOOK = "def filter_action(action, state, memo):\n    return None\n"
ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})
UPPER = "def filter_observation(observation, state, memo):\n    return observation.text.upper()\n"


def _python(script: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter of this venv; a hang past ``timeout`` fails."""
    try:
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        pass
    pytest.fail(f"still running after {timeout:g} s")  # outside the except: no 60 KB command in the report


# == 1. the finally-jump check ===================================================================
# A 'yield' in 'finally' suspends the generator with the time-limit exception in flight (the
# module docstring of envh.sandbox). _Checker pushes a new frame for every FunctionDef and
# Lambda *before* visiting its defaults, keyword defaults and decorators — but those
# expressions are evaluated when the 'def' runs, in the enclosing frame, i.e. inside the
# 'finally'. So a yield there leaves the 'finally' and the check accepts it; Sandbox
# compiles and runs it. (Annotations would be the same, but envh/sandbox.py's compile()
# inherits its 'from __future__ import annotations', which makes a yield there a
# SyntaxError. The runtime 'tripped' flag in Sandbox.call still fails a call that hit its
# limit; the static guarantee "every jump out of 'finally' is refused" does not hold.)
_FINALLY = "def g():\n    try:\n        pass\n    finally:\n{}\n"
DEFINITION_TIME_YIELDS = {
    "default": "        def f(x=(yield 1)):\n            pass",
    "kw-default": "        def f(*, x=(yield 1)):\n            pass",
    "lambda-default": "        f = lambda x=(yield 1): x",
    "decorator": "        @(yield 1)\n        def f():\n            pass",
    "yield-from-default": "        def f(x=(yield from [1])):\n            pass",
}


@pytest.mark.parametrize("shape", sorted(DEFINITION_TIME_YIELDS))
def test_a_yield_evaluated_when_a_def_runs_inside_finally_is_refused(shape: str) -> None:
    code = HOOK + _FINALLY.format(DEFINITION_TIME_YIELDS[shape])
    with pytest.raises(ContractCodeError, match="inside 'finally'"):
        Sandbox(code, names=record_factories(), allowed_functions=HOOKS)  # the trusted tier; the jail's is the same


def test_the_yield_really_leaves_finally() -> None:
    """(Not a finding, the evidence for the one above.) Python runs the default in g's
    frame: the generator suspends inside 'finally' with the exception in flight."""
    ns: dict[str, object] = {}
    exec("def g():\n    try:\n        raise KeyError('limit')\n    finally:\n"
         "        def f(x=(yield 'swallowed')):\n            pass\n", ns)
    gen = ns["g"]()  # type: ignore[operator]
    assert next(gen) == "swallowed"
    gen.close()


# == 2. the static check raises untyped errors on small, deep code ==============================
# parse_and_check promises "ContractCodeError at the first problem". _Checker is a recursive
# NodeVisitor (about three Python frames per AST level) and CPython's parser raises
# MemoryError for deep nesting it cannot hold: a 600-byte expression, or 400 'elif's (code
# a generator might well write), escape as RecursionError / MemoryError from parse_and_check,
# analyse, the Coach and envh.make (trusted and untrusted) — no line, no ContractCodeError.
DEEP = {
    "binop-chain": "x = " + "1+" * 300 + "1\n",                     # 600 bytes, RecursionError
    "elif-chain": "if a:\n    pass\n" + "elif a:\n    pass\n" * 400,  # RecursionError
    "not-chain": "x = " + "not " * 400 + "a\n",                     # RecursionError
    "unary-minus": "x = " + "-" * 20_000 + "1\n",                   # MemoryError from ast.parse
    "brackets-with-error": "x = " + "[" * 199 + "a b" + "]" * 199 + "\n",  # MemoryError from ast.parse
}


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_deeply_nested_code_is_a_contract_code_error(shape: str) -> None:
    code = HOOK + DEEP[shape]
    assert len(code.encode()) < MAX_CODE_BYTES
    with pytest.raises(ContractCodeError):
        parse_and_check(code)


def test_deep_contract_code_fails_make_with_an_envh_error() -> None:
    spec = {"bridge": "toy24", "layers": [{"kind": "contract", "code": HOOK + DEEP["elif-chain"]}]}
    with pytest.raises(errors.EnvhError):
        envh.make(spec)


# == 3. the trusted tier compiles in the host: super-linear compile ==============================
# Sandbox() (the trusted tier, in the host process) compiles the checked code. CPython
# 3.11's compiler is super-linear in the captures of one sequence pattern (each capture
# rotates every earlier one on the stack): 4,000 names (23 KB) compile in ~0.7 s, 8,000
# (47 KB) in ~7 s, 10,500 (62 KB, under the 64 KB cap) in ~13 s. The static check passes
# it. (Untrusted code compiles in the jail, whose load CPU limit ends it: contained there.)
BIG_PATTERN = ('"def filter_action(action, state, memo):\\n    match action.args:\\n        case [" + '
               '",".join(f"a{i}" for i in range(10_500)) + "]:\\n            return None\\n"')  # built in the child


@pytest.mark.xfail(strict=True, reason="finding: a 62 KB match pattern takes >10 s to compile in the host "
                                        "(trusted tier); the static check does not bound it")
def test_trusted_code_with_a_huge_match_pattern_is_refused_or_quick() -> None:
    assert len(eval(BIG_PATTERN).encode()) < MAX_CODE_BYTES
    script = textwrap.dedent(f"""
        from envh import errors
        from envh.capabilities import record_factories
        from envh.components.contract import HOOKS
        from envh.sandbox import Sandbox
        try:
            Sandbox({BIG_PATTERN}, names=record_factories(), allowed_functions=HOOKS)
        except errors.ContractCodeError:
            pass
    """)
    done = _python(script, timeout=5.0)
    assert done.returncode == 0, done.stderr[-2000:]


# == 3b. the trusted tier's time limit: recursion with no deadline check ========================
# _Instrument gives a top-level function no entry check when the code never loads its name
# ("it can only be called from outside"). A decorator is handed the function object without
# loading the name: '@keep' files it in a top-level dict, and a hook calls it from there. It
# recurses through its parameter, twice per level, and no call ever ticks: 2**n calls with
# the 200,000-operation and 250 ms limits never consulted. Measured in the trusted tier (the
# host process): n=26 runs 4.2 s, n=40 would run for hours, on a number the policy sends.
# (In the jail the per-call CPU timer kills it: contained there.)
UNTICKED = """
REG = {}
def keep(f):
    REG["f"] = f
    return f
@keep
def boom(f, n):
    if n == 0:
        return 0
    return f(f, n - 1) + f(f, n - 1)
def filter_action(action, state, memo):
    fn = REG["f"]
    return Block(reason=str(fn(fn, action.args["n"])))
"""


def test_a_decorated_function_cannot_recurse_past_the_limits() -> None:
    script = textwrap.dedent(f"""
        from envh import Action, errors
        from envh.capabilities import record_factories
        from envh.components.contract import HOOKS
        from envh.sandbox import Sandbox
        sb = Sandbox({UNTICKED!r}, names=record_factories(), allowed_functions=HOOKS, time_limit=0.25)
        try:
            sb.call3(sb.function("filter_action"), "filter_action", Action(tool="x", args={{"n": 40}}), None, {{}})
        except errors.ContractCodeError:
            pass
        else:
            raise SystemExit("2**40 calls finished?")
    """)
    done = _python(script, timeout=5.0)
    assert done.returncode == 0, done.stderr[-2000:]


# == 4. YAML: a scalar whose construction is quadratic ==========================================
# load_yaml weighs the composed document (nodes + characters) and then constructs it with
# SafeLoader. YAML 1.1's sexagesimal ints ('1:1:1:...') are built by PyYAML digit by digit
# with a growing bignum 'base *= 60': quadratic in the scalar. One 500 KB scalar — weight
# 500K, far below MAX_SPEC_WEIGHT, an eighth of MAX_SPEC_BYTES — costs the host ~11 s of CPU
# (the same text starting with 'a' loads in 0.2 s); at the 4 MB cap it is ~12 minutes.
# The test reads 700 KB (~20 s now) and allows 6 s, interpreter start included.
# A 5,000-digit decimal scalar escapes as a bare ValueError (int's digit limit) too.
SEXAGESIMAL = '"bridge: toy24\\nconfig: {x: 1" + ":1" * 350_000 + "}\\n"'  # built in the child


def test_a_spec_is_read_in_linear_time_whatever_its_scalars() -> None:
    script = textwrap.dedent(f"""
        from envh import errors
        from envh.spec import load_spec_data
        try:
            load_spec_data({SEXAGESIMAL})
        except errors.SpecError:
            pass
    """)
    done = _python(script, timeout=6.0)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_huge_decimal_scalar_is_a_spec_error() -> None:
    with pytest.raises(errors.SpecError):
        envh.make("bridge: toy24\nconfig: {x: " + "9" * 5000 + "}\n")


# load_spec_data refuses a file over MAX_SPEC_BYTES "before it is read" only when
# path.is_file(): a FIFO, /dev/zero or /dev/urandom named as a spec (a CLI argument, a
# training config's envs[].spec, an experiment arm) is read with read_text() without bound:
# a FIFO blocks the host forever, /dev/zero reads until memory runs out. (A FIFO with no
# writer is the harmless way to show it.)
def test_a_spec_path_that_is_no_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    script = textwrap.dedent(f"""
        from envh import errors
        from envh.spec import load_spec_data
        try:
            load_spec_data({str(fifo)!r})
        except errors.SpecError:
            pass
    """)
    done = _python(script, timeout=4.0)
    assert done.returncode == 0, done.stderr[-2000:]


# == 5. other YAML entry points read without the bounds ==========================================
# envh-grpo's config.load is yaml.safe_load with no size cap, no alias weighing: a config of
# under 1 KB whose envs[0].spec is nine-fold nested aliases loads instantly, and the first
# to_data() (envh train --dry-run, every checkpoint, the metrics header) json.dumps 9**9
# strings (one level fewer is already 350 MB of JSON and ~45 s; x9 per level). (Also unbounded: envh.rollout.policies.scripted.load_script; envh-experiment's
# config refuses aliases but lets deep nesting escape as RecursionError.)
def _laughs(levels: int) -> str:
    out = "      a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
    for i in range(1, levels):
        out += f"      a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]\n"
    return out


def test_a_training_config_is_read_with_the_spec_bounds(tmp_path: Path) -> None:
    if os.environ.get("CI"):  # CI installs every plugin: missing there is a failure, not a skip
        import envh_grpo.config as grpo_config
    else:
        grpo_config = pytest.importorskip("envh_grpo.config")
    from envh.limits import MAX_SPEC_WEIGHT, data_weight

    path = tmp_path / "bomb.yaml"
    path.write_text("envs:\n  - spec:\n      bridge: toy24\n      config:\n" + _laughs(9))
    assert path.stat().st_size < 1000
    try:
        config = grpo_config.load(str(path))
    except errors.SpecError:
        return
    # loaded: what to_data() writes out (9**9 strings, minutes and gigabytes) is far over
    # the spec weight cap. (Computed apart: pytest must not repr the structure.)
    weight = data_weight(config.envs[0].spec, limit=MAX_SPEC_WEIGHT)
    del config
    assert weight <= MAX_SPEC_WEIGHT, f"the config loaded and weighs over {weight:,}"


# == 6. aliases multiply the host's analysis of contract code ====================================
# The weight cap counts a contract's code once per alias, but MAX_SPEC_WEIGHT (8M) is 128
# contracts of 64 KB each: a 61 KB spec (a chain whose legs all alias one leg with 60 KB of
# code) makes the host parse and check ~8 MB of code and load it into the jail ~130 times.
# Measured: 8 legs of 60 KB f-string code build in 7.7 s, so the whole spec takes ~2 min;
# the playground (100 KB text limit, one build thread for every user) runs it too.
def test_aliased_code_is_measured_by_bytes_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """(Helper check, not a finding.) The counter below sees each contract's parse."""
    import envh.sandbox as sandbox

    seen: list[int] = []
    real = sandbox.parse_and_check
    monkeypatch.setattr(sandbox, "parse_and_check", lambda src, **kw: (seen.append(len(src)), real(src, **kw))[1])
    envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": UPPER}]}, trust="trusted").close()
    assert sum(seen) >= len(UPPER)


def test_host_work_on_contract_code_is_bounded_by_the_spec_text(monkeypatch: pytest.MonkeyPatch) -> None:
    import envh.sandbox as sandbox

    code = UPPER + "# " + "x" * 60_000 + "\n"  # cheap to parse here; adversarial code costs ~6 us/byte
    legs = 120
    text = ("bridge: toy24\nlayers:\n- kind: chain\n  legs:\n  - &L\n    bridge: toy24\n    layers:\n"
            "    - kind: contract\n      code: |\n" + "".join(f"        {line}\n" for line in code.splitlines())
            + "  - *L\n" * (legs - 1))
    parsed: list[int] = []
    real = sandbox.parse_and_check
    monkeypatch.setattr(sandbox, "parse_and_check", lambda src, **kw: (parsed.append(len(src)), real(src, **kw))[1])
    loads: list[int] = []
    monkeypatch.setattr(Jail, "load", lambda self, source, *a, **k: loads.append(len(source)) or 1)  # no process
    monkeypatch.setattr(Jail, "unload", lambda self, pid: None)
    try:
        envh.make(text, trust="untrusted").close()
    except errors.EnvhError:
        pass  # refused: fine, as long as little was parsed first
    budget = 2 * len(text) + MAX_CODE_BYTES
    assert sum(parsed) <= budget and sum(loads) <= budget, (len(text), sum(parsed), sum(loads))


# == 7. the jail, with its sandbox broken (the ``broken`` fixture, conftest.py) ===========================
needs_bwrap = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                 reason="bubblewrap not installed (dev/setup.d/jail.sh)")

def _ask(jail: Jail, source: str, time_limit: float = 2.0) -> object:
    """Load ``source`` and call its filter_action once. The limit is generous: a loaded
    machine must not end the call at its wall clock (a restart would hide the finding)."""
    program = jail.load(source, ("filter_action",), time_limit=time_limit, max_ops=10_000)
    out, _ = jail.call(program, "filter_action", [wire.encode(ADD)], None, {}, time_limit)
    return out


# RLIMIT_AS (512 MB) is the jail's memory bound, but its IPC namespace still lets it keep
# System V shared memory: shmget/shmat/touch/shmdt, repeat. Detached segments stay, count
# in no address space, and live as long as the jail (calls do not end it). Measured: 1 GB of
# host shared memory in one 2 s call, more with every call, ~20 GB in one 5 s call. Likewise
# unshare(CLONE_NEWUSER|CLONE_NEWNS) succeeds (no seccomp, no --disable-userns): the code
# becomes root of a user namespace, mounts its own tmpfs and fills it with symlinks (their
# 4 KB targets are not file writes, so RLIMIT_FSIZE does not apply), and reaches the kernel
# surface only user-namespace root has (netfilter, mounts).
SYSV_SHM = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
def filter_action(action, state, memo):
    sid = libc.shmget(0, 1 << 20, 0o1600)
    if sid < 0:
        return Block(reason='refused')
    addr = libc.shmat(sid, None, 0)
    ctypes.memset(addr, 1, 1 << 20)
    libc.shmdt(ctypes.c_void_p(addr))
    return Block(reason='kept 1 MB outside RLIMIT_AS')
"""
USERNS = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def filter_action(action, state, memo):
    if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
        return Block(reason='refused')
    for name, line in (('setgroups', 'deny'), ('uid_map', '0 65534 1'), ('gid_map', '0 65534 1')):
        fd = os.open('/proc/self/' + name, os.O_WRONLY)
        os.write(fd, line.encode())
        os.close(fd)
    if libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) != 0:
        return Block(reason='own user namespace, no mount')
    for i in range(100):
        os.symlink('x' * 4000, '/tmp/s%d' % i)
    return Block(reason='root of its own user namespace, 400 KB written to its own tmpfs')
"""


@needs_bwrap
@pytest.mark.xfail(strict=True, reason="finding: a jail keeps memory outside RLIMIT_AS (System V shm, "
                                        "tmpfs in its own user namespace)")
@pytest.mark.parametrize("attack", ["sysv-shm", "userns"])
def test_code_out_of_the_sandbox_keeps_no_memory_outside_its_limit(broken: Jail, attack: str) -> None:
    out = _ask(broken, {"sysv-shm": SYSV_SHM, "userns": USERNS}[attack])
    assert isinstance(out, Block) and out.reason == "refused", out


# A lying answer: code out of the sandbox writes its own message to the answer pipe before
# the worker's. The host checks records and memo, but not that the answer is an object, and
# decodes Observation.data with recursive freezing: a JSON array or string escapes
# Jail.call/Jail.load as AttributeError/TypeError, data nested ~600 deep (which json.loads
# accepts) as RecursionError. None of them kills the jail, so the worker's real answer stays
# in the pipe and answers the next call (and in _reload, a lying load leaves the programs
# after it never reloaded: their calls fail with KeyError, breaking "a program that kills its
# reload is the only one lost").
LIE = """import os, struct
def filter_action(action, state, memo):
    body = {body!r}
    for fd in range(3, 8):
        try:
            os.write(fd, struct.pack('>I', len(body)) + body)
        except OSError:
            pass
    return None
"""
LIES = {
    "array": b"[1]",
    "string": b'"error"',
    "deep-data": b'{"out":{"t":"Observation","text":"x","data":{"a":' + b"[" * 600 + b"]" * 600
                 + b'}},"memo":{}}',
}


@needs_bwrap
@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_lying_answer_is_a_contract_code_error_and_ends_the_jail(broken: Jail, lie: str) -> None:
    try:
        _ask(broken, LIE.format(body=LIES[lie]))
    except ContractCodeError:
        pass
    except Exception as exc:  # noqa: BLE001 - the finding
        pytest.fail(f"{type(exc).__name__} escaped from the jail's answer: {exc}"[:300])
    else:
        pytest.fail("the lying answer was taken")
    assert broken.restarts == 1
