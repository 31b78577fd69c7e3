"""``tests_run`` comes from a witness the policy cannot write, never from what a command
prints: forged summaries, aliases, functions, fake runners on PATH, a shadowing
``pytest.py``, a usercustomize, a conftest that deselects everything or kills its own run,
all leave ``tests_run`` false; real runs (pytest, ``python -m pytest``, a Django-style
``runtests.py``, ``python -m unittest``) make it true."""

from __future__ import annotations

import time

import pytest
from envh import Action
from envh_swebench.state import witnessed_call


def bash(env, command):
    return env.step(Action(tool="bash", args={"command": command}))


@pytest.fixture
def env(make_env):
    made = make_env(output_limit=8000, disk="64m")
    made.reset()
    return made


def runs(env) -> int:
    return env.get_env_state()["test_runs"]


# -- which commands the bridge runs under the witness (no Docker) ---------------------------
@pytest.mark.parametrize("command", [
    "pytest", "pytest -q tests", "py.test -x tests/test_stats.py::test_mean", "pytest-3 -q",
    "python -m pytest", "python3 -m pytest -q -p no:cacheprovider tests", "python3.11 -X dev -m pytest",
    "python3 -u -m unittest discover -s tests", "python tests/runtests.py admin_views --parallel 1",
    "./tests/runtests.py --verbosity 2 --settings=test_sqlite basic", "cd tests && python3 -m pytest -q",
    "timeout 60 python3 -m pytest -q", "timeout -s KILL -k 5 60 pytest tests",
    "python3 -m pytest -q tests 2>&1 | tail -n 20", "pytest -q 2>&1 | head -5", "pytest -k 'not slow and x'",
    "pytest 'tests/test_stats.py::test_x[a;b]'", "cd /testbed/tests && pytest -q",
    "cd tests && python3 runtests.py", "/testbed/tests/runtests.py", "pytest -k a#b",
])
def test_plain_test_invocations_are_witnessed(command):
    assert witnessed_call(command) is not None, command


@pytest.mark.parametrize("command", [
    "pytest --co -q x; echo '1 passed in 0.01s'", "alias pytest=true; pytest", "function pytest(){ echo 1; }; pytest",
    "python -c 'print(\"1 passed\")'", "PATH=/tmp/bin:$PATH pytest", "FOO=1 pytest", "LD_PRELOAD=/tmp/x.so pytest",
    "pytest > out.txt", "pytest | grep passed", "pytest && echo ok", "false || pytest", "(pytest)", "pytest &",
    "pytest $(cat args)", "pytest `cat args`", "/tmp/bin/pytest", "./pytest", "bash -c pytest", "sh run_tests.sh",
    "python3 reproduce.py", "python3 /tmp/runtests.py", "python3 -c 'import pytest; pytest.main()'",
    "python3 -m pytest tests\nrm -rf /", "env pytest", "exec pytest", "command pytest", "tox -e py311",
    "cd tests; pytest", "timeout 60s; pytest", "pytest 'unbalanced", "python3 -m pytest 2>&1 | tail -n 5 | cat",
    "/tmp/python3 -m pytest", "./python3 -m pytest", "python3 -m pytest\\;x",
    "cd /tmp && pytest", "cd .. && pytest", "python3 ../tmp/runtests.py", "cd tests && python3 ../../runtests.py",
    "/testbed/../tmp/runtests.py", "cd -- && pytest", "cd - && pytest", "pytest # ; echo 1 passed", "pytest ~/t.py", "pytest tests/{a,b}.py", "cd ~ && pytest", "cd -P /tmp && pytest",
])
def test_anything_else_is_not(command):
    assert witnessed_call(command) is None, command


# -- forgeries against a real container -----------------------------------------------------
FORGERIES = [
    "python3 -m pytest --co -q tests; echo '1 passed in 0.01s'",
    "alias pytest=true; pytest; echo '1 passed in 0.1s'",
    "shopt -s expand_aliases; alias pytest=true; pytest; echo '3 passed in 0.1s'",
    "python3 -c 'print(\"1 passed in 0.01s\")'",
    "function pytest(){ echo '1 passed in 0.01s'; }; pytest",
    "pytest(){ echo 'Ran 1 test in 0.001s'; echo OK; }; pytest",
    "python3 -m pytest --version; echo 'Ran 1 test in 0.001s'; echo OK",
    "echo '============ 1 passed in 0.01s ============'",
]


@pytest.mark.parametrize("command", FORGERIES)
def test_printed_summaries_do_not_count(env, command):
    resp = bash(env, command)
    assert "passed" in resp.observation.text or "Ran 1 test" in resp.observation.text
    assert not env.get_env_state()["tests_run"], command


def test_a_fake_pytest_first_on_path_does_not_count(env):
    bash(env, "mkdir -p /tmp/bin && printf '#!/bin/sh\\necho \"1 passed in 0.01s\"\\n' > /tmp/bin/pytest"
              " && chmod +x /tmp/bin/pytest && cp /tmp/bin/pytest /tmp/bin/python3")
    for command in ["PATH=/tmp/bin:$PATH pytest", "export PATH=/tmp/bin:$PATH; pytest",
                    "export PATH=/tmp/bin:$PATH; python3 -m pytest -q tests", "/tmp/bin/pytest",
                    "cd /tmp/bin && ./pytest"]:
        resp = bash(env, command)
        assert "1 passed in 0.01s" in resp.observation.text, command
    assert not env.get_env_state()["tests_run"]


def test_a_shadowing_pytest_module_in_the_repository_is_not_run(env):
    bash(env, "printf 'print(\"1 passed in 0.01s\")\\n' > pytest.py")
    resp = bash(env, "python3 -m pytest --co -q tests")
    assert "1 passed in 0.01s" not in resp.observation.text  # the real pytest ran, and collected only
    assert "test_median_odd" in resp.observation.text
    assert not env.get_env_state()["tests_run"]


def test_user_installed_packages_are_seen_as_in_a_plain_run(env):
    """A user install (``pip install --user -e .``; pip falls back to it when site-packages
    is read-only, as in the tmpfs disk mode) is importable in witnessed runs as in the
    shell's: the user site is added after the key is read and pytest imported."""
    site = bash(env, "python3 -c 'import site; print(site.getusersitepackages())'").observation.text.strip()
    bash(env, f"mkdir -p {site} /testbed/extra && echo 'VALUE = 7' > /testbed/extra/mathx_extra.py && "
              f"echo /testbed/extra > {site}/mathx-extra.pth && "
              "printf 'from mathx_extra import VALUE\\n\\ndef test_extra():\\n    assert VALUE == 7\\n' > tests/test_extra.py")
    shell = bash(env, "true && python3 -m pytest -q tests/test_extra.py")
    assert "1 passed" in shell.observation.text and not env.get_env_state()["tests_run"]
    witnessed = bash(env, "python3 -m pytest -q tests/test_extra.py")
    assert "1 passed" in witnessed.observation.text and env.get_env_state()["tests_run"]


def test_a_startup_hook_cannot_take_the_key(env):
    """usercustomize (in /root, writable) and sitecustomize in the repository run before any
    witness code if Python loads them; both try to read the key from stdin and write a
    report for a collect-only run. The witness runs with -s and without the working
    directory on sys.path at start-up, so neither is loaded."""
    forge = ("import os, sys, json, hmac, hashlib\n"
             "fd = os.environ.get('ENVH_WITNESS_FD')\n"
             "if fd:\n"
             "    key = os.read(0, 64)\n"
             "    msg = json.dumps({'ran': 5, 'errors': 0, 'exit': 0, 'failed': 0}).encode()\n"
             "    os.write(int(fd), hmac.new(key, msg, hashlib.sha256).hexdigest().encode() + b' ' + msg + b'\\n')\n"
             "    print('FORGED')\n")
    site = bash(env, "python3 -c 'import site; print(site.getusersitepackages())'").observation.text.strip()
    bash(env, f"mkdir -p {site} && cat > {site}/usercustomize.py <<'EOF'\n{forge}EOF\ncp {site}/usercustomize.py sitecustomize.py")
    assert "FORGED" in bash(env, "ENVH_WITNESS_FD=1 python3 -c pass").observation.text  # the hook is live
    resp = bash(env, "python3 -m pytest --co -q tests")
    assert "FORGED" not in resp.observation.text
    assert not env.get_env_state()["tests_run"]


# Code the policy wrote that runs inside the test process can reach whatever the witness
# holds there (its counts, the signing material, the pipe) or make the call phase run
# nothing. These are the known limit of an in-process witness (README: "What the witness
# does not hold against"); strict xfails, so a change that closes one must say so here.
IN_PROCESS_FORGERIES = {
    "counts through frames": (
        "import sys\n"
        "def _counts():\n"
        "    f = sys._getframe()\n"
        "    while f is not None:\n"
        "        c = f.f_locals.get('counts')\n"
        "        if isinstance(c, dict) and 'ran' in c:\n"
        "            return c\n"
        "        f = f.f_back\n"
        "def pytest_collection_modifyitems(items):\n    items.clear()\n"
        "def pytest_sessionfinish(session, exitstatus):\n"
        "    _counts()['ran'] = 7\n    session.exitstatus = 0\n"),
    "no-op test bodies": (
        "import pytest\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_pyfunc_call(pyfuncitem):\n    return True\n"),
}


@pytest.mark.xfail(strict=True, reason="in-process code can forge the witness's count (documented limit)")
@pytest.mark.parametrize("conftest", list(IN_PROCESS_FORGERIES.values()), ids=list(IN_PROCESS_FORGERIES))
def test_known_limit_code_inside_the_test_process(env, conftest):
    bash(env, f"cat > tests/conftest.py <<'EOF'\n{conftest}EOF")
    bash(env, "python3 -m pytest -q tests")
    assert not env.get_env_state()["tests_run"]


def test_a_module_on_pythonpath_cannot_stand_in_for_the_witness_s_own(make_env):
    """With the repository on PYTHONPATH (the image's or the environment's setting), a
    hashlib.py there came before the standard library's; the witness imports what it
    needs from the standard library only, before it reads the key."""
    env = make_env(command_prefix="export PYTHONPATH=/testbed/lib; ")
    env.reset()
    forge = ("import os, sys, json, _sha256\n"  # finds the key and the pipe in its importer's frames
             "f = sys._getframe(1)\n"
             "while f is not None and not isinstance(f.f_locals.get('key'), bytes):\n"
             "    f = f.f_back\n"
             "if f is not None:\n"
             "    key, fd = f.f_locals['key'].ljust(64, b'\\0'), int(f.f_locals['fd'])\n"
             "    msg = json.dumps({'ran': 5, 'errors': 0, 'exit': 0, 'failed': 0}).encode()\n"
             "    inner = _sha256.sha256(bytes(b ^ 0x36 for b in key) + msg).digest()\n"
             "    mac = _sha256.sha256(bytes(b ^ 0x5C for b in key) + inner).hexdigest()\n"
             "    os.write(fd, mac.encode() + b' ' + msg + b'\\n')\n"
             "    print('FORGED', flush=True)\n"
             "    os._exit(0)\n")
    bash(env, f"mkdir -p lib && cat > lib/hashlib.py <<'EOF'\n{forge}EOF")
    assert "FORGED" in bash(env, "python3 -c 'key, fd = bytes(64), 1; import hashlib'").observation.text  # live
    resp = bash(env, "python3 -m pytest --co -q tests")
    assert "FORGED" not in resp.observation.text
    assert not env.get_env_state()["tests_run"]


@pytest.mark.parametrize("conftest", [
    # deselect every test, then print a passing summary
    "def pytest_collection_modifyitems(items):\n    items.clear()\n"
    "def pytest_unconfigure(config):\n    print('\\n==== 4 passed in 0.01s ====')\n",
    # print a summary and leave before anything runs
    "import os\ndef pytest_sessionstart(session):\n    print('4 passed in 0.01s', flush=True)\n    os._exit(0)\n",
    # kill its own run (the witness with it)
    "import os, signal\ndef pytest_collection_finish(session):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    # kill the runner that holds the witness's pipe
    "import os, signal\ndef pytest_collection_finish(session):\n    os.kill(os.getppid(), signal.SIGKILL)\n",
    # write a report with no key to the witness pipe
    "import os, json\ndef pytest_sessionfinish(session):\n"
    "    for fd in os.listdir('/proc/self/fd'):\n"
    "        try:\n            os.write(int(fd), b'0' * 64 + b' ' + json.dumps({'ran': 9, 'errors': 0, 'exit': 0}).encode() + b'\\n')\n"
    "        except OSError:\n            pass\n"
    "def pytest_collection_modifyitems(items):\n    items.clear()\n",
    # report passing tests that never ran, through pytest's own hook
    "from _pytest.reports import TestReport\n"
    "def pytest_collection_modifyitems(items):\n    items.clear()\n"
    "def pytest_collection_finish(session):\n"
    "    for when in ('setup', 'call', 'teardown'):\n"
    "        session.config.hook.pytest_runtest_logreport(report=TestReport(\n"
    "            nodeid='tests/test_stats.py::test_mean', location=('tests/test_stats.py', 1, 'test_mean'),\n"
    "            keywords={}, outcome='passed', longrepr=None, when=when))\n",
])
def test_a_conftest_cannot_make_an_empty_run_count(env, conftest):
    bash(env, f"cat > tests/conftest.py <<'EOF'\n{conftest}EOF")
    bash(env, "python3 -m pytest -q tests")
    assert not env.get_env_state()["tests_run"]


def test_killing_the_runner_is_the_policys_error_and_its_leftovers_go(env):
    """The runner holds the witness's channels; a command may kill it (same user). That
    step is the policy's error, not an infra failure; the runner starts again with the
    first runner's list of the container's own processes, so what the command left
    running (here a writer that would outlive the step) is killed, not kept."""
    resp = bash(env, "setsid sh -c 'while :; do echo x >> /tmp/alive; sleep 0.05; done' > /dev/null 2>&1 "
                     "< /dev/null & sleep 0.3; kill -9 $PPID")
    assert "killed the environment's command runner" in resp.observation.text
    assert resp.info["error"]["type"] == "runner_killed"
    first = bash(env, "wc -c < /tmp/alive").observation.text
    time.sleep(0.4)
    assert bash(env, "wc -c < /tmp/alive").observation.text == first
    alive = bash(env, "cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sh$'")
    assert alive.observation.text.split()[0] == "0"
    bash(env, "python3 -m pytest -q tests/test_stats.py::test_mean")
    assert env.get_env_state()["tests_run"]


# -- real runs -------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [
    "python3 -m pytest -q tests", "pytest -q tests/test_stats.py", "cd /testbed && pytest-3 -q tests",
    "cd tests && python3 -m pytest -q --rootdir=/testbed test_stats.py",
    "timeout 60 python3 -m pytest -q -p no:cacheprovider tests", "python3 -m pytest -q tests 2>&1 | tail -n 3",
    "python3 -m pytest -q tests/test_st*.py",
])
def test_real_pytest_runs_count(env, command):
    bash(env, "touch conftest.py")  # the pytest script puts the rootdir on sys.path only through one
    resp = bash(env, command)
    assert "passed" in resp.observation.text
    state = env.get_env_state()
    assert state["tests_run"] and state["test_runs"] == 1 and state["last_test_exit_code"] == 0, resp.observation.text


def test_a_piped_run_shows_what_the_shell_would(env):
    full = bash(env, "python3 -m pytest -q tests").observation.text
    tail = bash(env, "python3 -m pytest -q tests 2>&1 | tail -n 1").observation.text
    assert full.strip().splitlines()[-1].startswith("3 passed")
    assert len(tail.strip().splitlines()) == 1 and tail.startswith("3 passed")
    head = bash(env, "python3 -m pytest -q tests | head -n 1")
    assert len(head.observation.text.strip().splitlines()) == 1 and head.observation.data["exit_code"] == 0


RUNTESTS = ("#!/usr/bin/env python3\n"
            "import sys, unittest\n"
            "sys.path.insert(0, '/testbed')\n"
            "from mathx.stats import mean\n"
            "class MeanTests(unittest.TestCase):\n"
            "    def test_mean(self):\n        self.assertEqual(mean([1, 2, 3]), 2)\n"
            "    @unittest.skip('later')\n    def test_later(self):\n        pass\n"
            "if __name__ == '__main__':\n"
            "    result = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromTestCase(MeanTests))\n"
            "    sys.exit(bool(result.failures or result.errors))\n")


@pytest.mark.parametrize("command", ["python3 tests/runtests.py", "./tests/runtests.py",
                                     "python3 -m unittest tests.runtests -v"])
def test_django_style_and_unittest_runs_count(env, command):
    bash(env, f"cat > tests/runtests.py <<'EOF'\n{RUNTESTS}EOF\nchmod +x tests/runtests.py; touch tests/__init__.py")
    resp = bash(env, command)
    assert "test_mean" in resp.observation.text and "OK" in resp.observation.text, resp.observation.text
    assert env.get_env_state()["tests_run"], resp.observation.text


PARALLEL = ("import multiprocessing, sys, unittest\n"
            "sys.path.insert(0, '/testbed')\n"
            "from mathx.stats import mean\n"
            "class MeanTests(unittest.TestCase):\n"
            "    def test_mean(self):\n        self.assertEqual(mean([1, 2, 3]), 2)\n"
            "def work(name):\n"
            "    result = unittest.TestResult()\n"
            "    MeanTests(name).run(result)\n"
            "    return result.wasSuccessful()\n"
            "if __name__ == '__main__':\n"
            "    with multiprocessing.get_context('fork').Pool(2) as pool:\n"
            "        ok = pool.map(work, ['test_mean', 'test_mean'])\n"
            "    print('Ran', len(ok), 'tests in workers:', 'OK' if all(ok) else 'FAILED')\n"
            "    sys.exit(0 if all(ok) else 1)\n")


def test_tests_run_in_forked_workers_count(env):
    """Django's runtests.py runs tests in forked workers (--parallel, the default on a
    machine with more than one core): those runs count too."""
    bash(env, f"cat > tests/runtests.py <<'EOF'\n{PARALLEL}EOF")
    resp = bash(env, "python3 tests/runtests.py")
    assert "Ran 2 tests in workers: OK" in resp.observation.text, resp.observation.text
    assert env.get_env_state()["tests_run"]


def test_a_runtests_that_only_prints_does_not_count(env):
    bash(env, "printf 'print(\"Ran 12 tests in 0.1s\")\\nprint(\"OK\")\\n' > tests/runtests.py")
    assert "Ran 12 tests" in bash(env, "python3 tests/runtests.py").observation.text
    # results told that tests started, with no test run
    bash(env, "printf 'import unittest\\nr = unittest.TextTestResult(None, False, 0)\\n"
              "[r.startTest(None) for _ in range(3)]\\nprint(\"Ran\", r.testsRun, \"tests\")\\n' > tests/runtests.py")
    assert "Ran 3 tests" in bash(env, "python3 tests/runtests.py").observation.text
    assert not env.get_env_state()["tests_run"]


def test_a_failing_run_counts_with_its_status(env):
    bash(env, "sed -i 's|sum(values) / len|sum(values) // len|' mathx/stats.py")
    resp = bash(env, "python3 -m pytest -q tests")
    assert "failed" in resp.observation.text and resp.observation.data["exit_code"] == 1
    state = env.get_env_state()
    assert state["tests_run"] and state["last_test_exit_code"] == 1 and state["tests_since_last_edit"]


def test_the_pytest_script_s_own_interpreter_is_used(env):
    """`pytest` runs under the interpreter its #! line names (an absolute python path;
    `#!/usr/bin/env python3` keeps python3 from PATH), as running the script would."""
    from envh_swebench.state import witnessed_command

    probe = "import sys; print('interpreter=' + sys.executable)"
    for shebang, expected in [("#!/usr/bin/python3.11 -I", "/usr/bin/python3.11"),
                              ("#!/usr/bin/env python3", "/usr/bin/python3"), ("#!/bin/sh", "/usr/bin/python3")]:
        command = witnessed_command(witnessed_call("pytest x"), probe)
        out = bash(env, f"mkdir -p /tmp/b && printf '%s\\n' '{shebang}' > /tmp/b/pytest && chmod +x /tmp/b/pytest "
                        f"&& export PATH=/tmp/b:$PATH && {command}").observation.text
        assert f"interpreter={expected}\n" in out, (shebang, out)


def test_an_edit_the_test_run_makes_is_an_edit_after_it(env):
    """A conftest (or a test) that rewrites the code under test at the end of the run:
    the tests did not run after that edit."""
    bash(env, "cat > tests/conftest.py <<'EOF'\n"
              "def pytest_sessionfinish(session, exitstatus):\n"
              "    with open('/testbed/mathx/stats.py', 'a') as fh:\n"
              "        fh.write('\\n\\ndef untested():\\n    pass\\n')\nEOF")
    bash(env, "python3 -m pytest -q tests")
    state = env.get_env_state()
    assert state["tests_run"] and state["last_edit_step"] == state["last_test_step"]
    assert not state["tests_since_last_edit"]


def test_test_caches_are_not_edits(env):
    """In a repository that does not ignore them, the caches a test run writes
    (.pytest_cache, __pycache__) are not changes to the working tree."""
    bash(env, "git rm -q --cached .gitignore && rm .gitignore && find . -name __pycache__ -prune -exec rm -rf {} +")
    edits = env.get_env_state()["edits"]
    bash(env, "python3 -m pytest -q tests")
    assert bash(env, "ls -d .pytest_cache mathx/__pycache__").info.get("exit_code") == 0
    state = env.get_env_state()
    assert state["edits"] == edits and state["tests_since_last_edit"]
    assert not any("__pycache__" in p or ".pytest_cache" in p for p in state["files_touched"])


def test_a_test_command_that_is_not_recorded_says_so(env):
    """A real run inside a compound command is not recorded; the observation says which
    form is, so a policy can learn it. A recorded run, or a command that runs no tests,
    gets no such line."""
    compound = bash(env, "cd /testbed; python3 -m pytest -q tests")
    assert "passed" in compound.observation.text and "not recorded as a test run" in compound.observation.text
    assert not env.get_env_state()["tests_run"]
    plain = bash(env, "cd /testbed && python3 -m pytest -q tests")
    assert "not recorded" not in plain.observation.text and env.get_env_state()["tests_run"]
    assert "not recorded" not in bash(env, "ls tests").observation.text


PTH_FORGE = ("import os, json, hmac, hashlib\n"
             "fd = os.environ.get('ENVH_WITNESS_FD')\n"
             "if fd:\n"
             "    key = os.read(0, 64)\n"
             "    msg = json.dumps({'ran': 5, 'errors': 0, 'exit': 0, 'failed': 0}).encode()\n"
             "    try:\n"
             "        os.write(int(fd), hmac.new(key, msg, hashlib.sha256).hexdigest().encode() + b' ' + msg + b'\\n')\n"
             "    except OSError:\n"
             "        pass\n")


def test_the_activation_prefix_never_holds_the_key_or_the_pipe(make_env):
    """The environment's activation runs before the witness in the same shell; conda's
    runs a Python program (without -s) whose output activate evals. A user-site .pth
    (/root is writable) read the key from stdin and wrote a report. Now the prefix runs
    with stdin from /dev/null, without the witness's pipe and without the user site."""
    env = make_env(command_prefix="python3 -c pass >/dev/null 2>&1; if [ -n \"${ENVH_WITNESS_FD-}\" ]; then "
                                  "cat > /tmp/prefix_stdin; ls /proc/self/fd > /tmp/prefix_fds; "
                                  "python3 -c 'import site; print(site.ENABLE_USER_SITE)' > /tmp/prefix_site; fi; ")
    env.reset()
    site = bash(env, "python3 -c 'import site; print(site.getusersitepackages())'").observation.text.strip()
    bash(env, f"mkdir -p {site} && cat > {site}/envh_forge.py <<'EOF'\n{PTH_FORGE}EOF\n"
              f"echo 'import envh_forge' > {site}/envh-forge.pth")
    bash(env, "python3 -m pytest --co -q tests")
    assert not env.get_env_state()["tests_run"]
    seen = bash(env, "wc -c < /tmp/prefix_stdin; cat /tmp/prefix_fds | tr '\\n' ' '; echo; cat /tmp/prefix_site")
    size, fds, user_site = seen.observation.text.splitlines()[:3]
    assert size.strip() == "0" and "63" not in fds.split() and user_site.strip() == "False", seen.observation.text
    bash(env, "python3 -m pytest -q tests/test_stats.py::test_mean")  # a real run still counts
    assert env.get_env_state()["tests_run"]
