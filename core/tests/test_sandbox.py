"""Hostile untrusted code: every attempt ends in a ``ContractCodeError`` that says what
was wrong and where, and nothing outside the sandbox changes."""

from __future__ import annotations

import builtins
import io
import subprocess
import sys
import textwrap

import pytest
from envh.errors import ContractCodeError
from envh.sandbox import Sandbox


def run(source: str, *args: object, time_limit: float = 0.05) -> object:
    """Load ``source`` and call its ``f`` with ``args`` (the way contract hooks run)."""
    sandbox = Sandbox(textwrap.dedent(source), time_limit=time_limit)
    return sandbox.call_function(sandbox.function("f"), "f", *args)


@pytest.fixture(autouse=True)
def nothing_outside_changes():
    """No hostile snippet may leave a trace on the interpreter running the tests."""
    before = (builtins.open, builtins.getattr, builtins.__import__, sys.getrecursionlimit(), len(sys.modules))
    yield
    assert builtins.open is io.open
    assert (builtins.open, builtins.getattr, builtins.__import__, sys.getrecursionlimit()) == before[:4]


# -- static checks: rejected before any code runs, with line and column -------------------
STATIC = [
    ("import os", 1, "import of 'os' is not allowed"),
    ("from subprocess import run", 1, "import of 'subprocess'"),
    ("import collections._sys", 1, "not allowed"),
    ("def f():\n    return open('/etc/passwd').read()", 2, "'open' is not allowed"),
    ("def f():\n    return ().__class__", 2, "'__class__' is not allowed"),
    ("def f():\n    return [c for c in object.__subclasses__()]", 2, "'__subclasses__'"),
    ("def f():\n    return object", 2, "'object' is not allowed"),
    ("def f(x):\n    return x.__class__.__mro__[1].__subclasses__()", 2, "'__subclasses__'"),
    ("def f(x):\n    return '{0.__class__}'.format(x)", 2, "'format' is not allowed"),
    ("def f(x):\n    return '{0.__class__}'.format_map({'0': x})", 2, "'format_map'"),
    ("def f():\n    g = (i for i in [1])\n    return g.gi_frame.f_back", 3, "'f_back'"),
    ("def f(x):\n    return getattr(x, '__class__')", 2, "'getattr' is not allowed"),
    ("def f():\n    return eval('1')", 2, "'eval' is not allowed"),
    ("def f():\n    exec('x = 1')", 2, "'exec' is not allowed"),
    ("def f():\n    return compile('1', 'x', 'eval')", 2, "'compile' is not allowed"),
    ("def f():\n    return __import__('os')", 2, "dunder names are off limits"),
    ("import operator\ndef f(x):\n    return operator.attrgetter('__class__')(x)", 3, "attrgetter"),
    ("from operator import methodcaller", 1, "not allowed"),
    ("import string\ndef f(x):\n    return string.Formatter().get_field('0.__class__', [x], {})", 3,
     "Formatter"),
    ("def evaluate():\n    return True", 1, "the verifier is sealed"),
    ("def f():\n    try:\n        pass\n    except:\n        pass", 4, "catch specific exceptions"),
    ("def f():\n    global x", 2, "'global'"),
    ("class Evil:\n    pass", 1, "defining classes"),
    ("def f(:\n    pass", 1, "syntax error"),
]


@pytest.mark.parametrize(("source", "line", "message"), STATIC, ids=[s[0][:40] for s in STATIC])
def test_static_violations_name_line_and_column(source: str, line: int, message: str) -> None:
    with pytest.raises(ContractCodeError, match="Contract code error") as info:
        Sandbox(source)
    assert message in str(info.value)
    assert info.value.lineno == line
    assert info.value.col is not None
    assert f"line {line}, column {info.value.col}" in str(info.value)


def test_open_never_touches_the_file_system(tmp_path) -> None:
    target = tmp_path / "pwned"
    with pytest.raises(ContractCodeError):
        run(f"def f():\n    open({str(target)!r}, 'w').write('x')\n")
    assert not target.exists()


# -- runtime limits: time and size -----------------------------------------------------
@pytest.mark.parametrize("source", [
    "def f():\n    while True:\n        pass\n",
    "def f():\n    n = 0\n    for i in range(10**7):\n        n += i\n    return n\n",
    "def f():\n    return sum([x * x for x in range(10**7)])\n",
    "def f():\n    return len({i: i for i in range(10**7)})\n",
    "def f():\n    n = 0\n    while True:\n        try:\n            n += 1\n        except Exception:\n            pass\n",
])
def test_runaway_code_stops_at_its_limit(source: str) -> None:
    with pytest.raises(ContractCodeError, match="loop iterations and calls|time limit of 50 ms") as info:
        run(source)
    assert "avoid unbounded loops" in str(info.value)
    assert info.value.hook == "f"


def test_infinite_recursion_is_a_typed_error() -> None:
    with pytest.raises(ContractCodeError, match="RecursionError|time limit"):
        run("def f(n=0):\n    return f(n + 1)\n", time_limit=5.0)


@pytest.mark.parametrize(("source", "what"), [
    ("def f():\n    return 'x' * 10**10\n", "repeating a sequence"),
    ("def f():\n    s = 'x'\n    s *= 10**10\n    return s\n", "repeating a sequence"),
    ("def f():\n    return [0] * 10**9\n", "repeating a sequence"),
    ("def f():\n    return 10**10**10\n", "an integer power"),
    ("def f():\n    return pow(10, 10**10)\n", "an integer power"),
    ("def f():\n    return 1 << 10**10\n", "a left shift"),
    ("def f():\n    return range(10**12)\n", "range()"),
])
def test_huge_single_operations_are_capped(source: str, what: str) -> None:
    with pytest.raises(ContractCodeError, match="size limit") as info:
        run(source)
    assert what in str(info.value)


def test_small_operations_still_work() -> None:
    assert run("def f():\n    return pow(3, 4) + pow(3, 4, 5) + len('ab' * 3) + 2**10 + (1 << 3)\n") == \
        81 + 1 + 6 + 1024 + 8


def test_runtime_errors_carry_the_line() -> None:
    with pytest.raises(ContractCodeError, match=r"line 3: ZeroDivisionError") as info:
        run("def f():\n    x = 1\n    return x / 0\n")
    assert info.value.lineno == 3 and info.value.hook == "f"


def test_allowed_modules_are_usable_but_cut_down() -> None:
    assert run("import re, json, math\ndef f():\n    return json.dumps([math.floor(2.5), "
               "re.sub('a', 'b', 'aa')])\n") == '[2, "bb"]'
    with pytest.raises(ContractCodeError, match="has no attribute 'sys'"):
        run("import json\ndef f():\n    return json.sys\n")


MEMORY_CHILD = """
import resource, sys
from envh.sandbox import Sandbox
from envh.errors import ContractCodeError
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
sb = Sandbox("def f():\\n    chunks = []\\n    while True:\\n        chunks.append(bytes(10**7))\\n",
             time_limit=30.0)
try:
    sb.call_function(sb.function("f"), "f")
except ContractCodeError as exc:
    print("typed:", exc)
    sys.exit(0)
print("no error")
sys.exit(3)
"""


def test_allocating_gigabytes_under_rlimit_is_a_typed_error() -> None:
    """The episode worker's address-space limit turns a memory bomb into MemoryError,
    which the sandbox reports like any other error; the parent is untouched."""
    proc = subprocess.run([sys.executable, "-c", MEMORY_CHILD], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "typed: Contract code error: in f(): line 4: MemoryError" in proc.stdout


def test_exponential_recursion_through_a_lambda_stops_at_the_limit() -> None:
    source = ("f = lambda n: n and (f(n - 1) or f(n - 1))\n"
              "def filter_action(action, state, memo):\n    return f(60)\n")
    sandbox = Sandbox(source, time_limit=30.0)
    with pytest.raises(ContractCodeError, match="loop iterations and calls"):
        sandbox.call_function(sandbox.function("filter_action"), "filter_action", None, None, {})


def test_a_hook_that_recurses_into_itself_is_still_counted() -> None:
    source = ("def filter_action(action, state, memo, d=0):\n"
              "    if d < 60:\n        filter_action(action, state, memo, d + 1)\n"
              "        filter_action(action, state, memo, d + 1)\n")
    sandbox = Sandbox(source, time_limit=30.0)
    with pytest.raises(ContractCodeError, match="loop iterations and calls"):
        sandbox.call_function(sandbox.function("filter_action"), "filter_action", None, None, {})
