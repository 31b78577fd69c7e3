"""Test-run witness: the program the bridge runs for a test command, inside the container.

The bridge runs it as ``PYTHON -s -c <this source> MODE ARGS...`` (never from a file: the
image may be read-only, and a file could be edited), through the in-container runner,
which gives it two things nothing else in the container holds:

* a fresh key on stdin (the runner writes it, then closes stdin), and
* a pipe, named by ``ENVH_WITNESS_FD``, that only the runner reads.

It reads both before anything of the repository is imported, takes the working directory
off ``sys.path`` while it imports the test runner (a ``pytest.py`` in the repository cannot
stand in for pytest), then runs the tests in this process with a counting plugin (pytest)
or by counting ``unittest.TestCase.run`` calls, forked workers' too, (``python -m unittest``, Django's ``runtests.py``). At
the end it writes one line to the pipe: the counts and exit status as JSON, with an
HMAC-SHA256 under the key. The runner keeps the report only if the HMAC holds.

MODE: ``pytest`` (the ``pytest`` script: the working directory is not on ``sys.path``),
``pytest-module`` (``python -m pytest``: it is), ``unittest-module`` (``python -m
unittest``) or ``script`` (``python path/runtests.py``: the script's directory is).
Arguments with ``*``, ``?`` or ``[`` are expanded as the shell would (kept when nothing
matches). Runs on any Python 3.6+: the image's interpreter runs it.
"""

import os
import sys


def _main():
    cwd = os.getcwd()
    path = list(sys.path)  # `-c` put "" (the working directory) first
    # What the witness itself needs comes from the standard library only, imported before
    # the key is read: not from a PYTHONPATH entry or the repository holding a hashlib.py.
    std = os.path.dirname(getattr(os, "__file__", None) or "/nonexistent/os.py")
    sys.path[:] = [p for p in path if p.endswith(".zip") or p == std or p.startswith(std + os.sep)]
    import glob  # noqa: F401 - for _expand
    import hashlib
    import json
    import mmap  # noqa: F401 - for _count_unittest
    import runpy  # noqa: F401 - for _script
    import site
    import struct  # noqa: F401
    import unittest.case  # noqa: F401
    import unittest.result  # noqa: F401
    sys.path[:] = [p for p in path if p not in ("", ".", cwd)]  # until the runner is imported
    fd = int(os.environ.pop("ENVH_WITNESS_FD", "-1"))
    key = b""
    while len(key) < 64:
        chunk = os.read(0, 64 - len(key))
        if not chunk:
            break
        key += chunk
    if fd >= 0:
        os.set_inheritable(fd, False)  # the tests' own subprocesses do not get the pipe
    # Bound and computed now, before any code of the repository runs: a conftest.py that
    # patches hashlib, json, os or builtins later cannot see the key or swap the writer.
    sha256, dumps, write, ok = hashlib.sha256, json.dumps, os.write, len(key) == 64
    ipad = bytes(b ^ 0x36 for b in key.ljust(64, b"\0"))
    opad = bytes(b ^ 0x5C for b in key.ljust(64, b"\0"))
    del key

    def sign(msg):  # HMAC-SHA256 (the key is one block long)
        return sha256(opad + sha256(ipad + msg).digest()).hexdigest()

    mode, args = sys.argv[1], sys.argv[2:]
    args = _expand(args)
    user_site = None if os.environ.get("PYTHONNOUSERSITE") else site.getusersitepackages()
    counts = {"mode": mode, "collected": 0, "ran": 0, "failed": 0, "errors": 0, "skipped": 0}
    code = 1
    try:
        if mode in ("pytest", "pytest-module"):
            code = _pytest(mode, args, path, counts, user_site)
        elif mode == "unittest-module":
            code = _unittest_module(args, path, counts, user_site)
        elif mode == "script":
            code = _script(args, path, counts, user_site)
        else:
            sys.stderr.write(f"envh witness: unknown mode {mode!r}\n")
            code = 2
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        code = 2
    counts["exit"] = int(code)
    if fd >= 0 and ok:
        msg = dumps(counts, sort_keys=True).encode()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - a closed stream must not lose the report
            pass
        write(fd, sign(msg).encode() + b" " + msg + b"\n")
    return int(code)


def _add_user_site(user_site):
    """The user site (``pip install --user``, and pip's own fallback when site-packages is
    read-only) as a plain run has it, added only now: started with -s, no usercustomize
    or .pth file of it ran before the key was read or the test runner imported."""
    import site

    if user_site and os.path.isdir(user_site):
        site.addsitedir(user_site)


def _expand(args):
    import glob

    out = []
    for arg in args:
        if not arg.startswith("-") and any(c in arg for c in "*?["):
            found = sorted(glob.glob(arg))
            out.extend(found or [arg])
        else:
            out.append(arg)
    return out


def _pytest(mode, args, path, counts, user_site):
    import pytest

    class Witness:
        # A test counts when pytest's own runtest-call hook ran it (the call phase, after
        # setup): calling that hook runs the test, so no empty run or stray report counts.
        # Under pytest-xdist the calls happen in worker processes without the witness.
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            yield
            counts["ran"] += 1

        def pytest_collection_finish(self, session):
            counts["collected"] = len(session.items)

        def pytest_runtest_logreport(self, report):
            if report.when == "call" and report.failed:
                counts["failed"] += 1
            elif report.when != "call" and report.failed:
                counts["errors"] += 1
            elif report.skipped:
                counts["skipped"] += 1

    # `python -m pytest` has the working directory first on sys.path, the script does not
    sys.path[:] = path if mode == "pytest-module" else [p for p in path if p != ""]
    _add_user_site(user_site)
    sys.argv = [getattr(pytest, "__file__", None) or "pytest"] + list(args)
    return int(pytest.main(list(args), plugins=[Witness()]))


def _count_unittest(counts):
    """Count tests whose ``TestCase.run`` ran (not those a skip decorator skipped):
    calling it runs the test, so a stray ``startTest`` on a result counts nothing. The
    count lives in memory shared with forked children, so tests a parallel runner (Django's
    ``--parallel``, forked workers) ran in them count too; ``finish`` reads it."""
    import mmap
    import struct
    import unittest.case
    import unittest.result

    shared = mmap.mmap(-1, 8)  # anonymous and shared: a fork's increments are seen here
    case, base = unittest.case.TestCase, unittest.result.TestResult
    run, fail, error = case.run, base.addFailure, base.addError

    def run_test(self, result=None):
        method = getattr(self, getattr(self, "_testMethodName", ""), None)
        if not (getattr(type(self), "__unittest_skip__", False) or getattr(method, "__unittest_skip__", False)):
            shared.seek(0)
            (n,) = struct.unpack("q", shared.read(8))
            shared.seek(0)
            shared.write(struct.pack("q", n + 1))
        return run(self, result)

    def add_failure(self, test, err):
        counts["failed"] += 1
        return fail(self, test, err)

    def add_error(self, test, err):
        counts["errors"] += 1
        return error(self, test, err)

    def finish():
        shared.seek(0)
        counts["ran"] = struct.unpack("q", shared.read(8))[0]

    case.run = run_test
    base.addFailure, base.addError = add_failure, add_error
    return finish


def _unittest_module(args, path, counts, user_site):
    import unittest

    finish = _count_unittest(counts)
    sys.path[:] = path
    _add_user_site(user_site)
    try:
        unittest.main(module=None, argv=["python -m unittest"] + list(args))
    finally:
        finish()
    return 0


def _script(args, path, counts, user_site):
    import runpy

    finish = _count_unittest(counts)
    script = os.path.abspath(args[0])
    sys.argv = [args[0]] + list(args[1:])
    sys.path[:] = [os.path.dirname(script)] + [p for p in path if p != ""]
    _add_user_site(user_site)
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        finish()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
