"""The core tests' own helper modules (``proctools``) are importable from every test file;
``broken``: a real jail whose sandbox is broken, for the tests of what the jail enforces
without it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


#: Put into the jail's boot script before the worker starts: the sandbox is gone, a
#: program's source runs by plain exec (no braces: the boot script is a format string).
PLAIN_EXEC = '''
import envh.sandbox as _sandbox

class _PlainExec:
    """The sandbox broken: the source runs with every builtin and every module."""

    def __init__(self, source, *, names, time_limit, max_ops, allowed_functions, clock):
        self.namespace = dict(names)
        exec(source, self.namespace)

    def function(self, name):
        return self.namespace.get(name)

    def call_function(self, fn, hook, *args):
        return fn(*args)

_sandbox.Sandbox = _PlainExec
'''


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A real jail whose sandbox is broken (see ``PLAIN_EXEC``)."""
    from envh.jail import Jail, process

    assert "worker.main(" in process._BOOT
    monkeypatch.setattr(process, "_BOOT", process._BOOT.replace("worker.main(", PLAIN_EXEC + "worker.main("))
    jail = Jail()
    try:
        yield jail
    finally:
        jail.close()
