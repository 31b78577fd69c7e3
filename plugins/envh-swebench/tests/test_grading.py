"""The verifier: swebench's own grading of a patch in a fresh container."""

from __future__ import annotations

from envh_swebench.containers import Limits
from envh_swebench.grading import grade, swebench_row
from envh_swebench.instances import load_instances

WRONG = """\
diff --git a/mathx/stats.py b/mathx/stats.py
--- a/mathx/stats.py
+++ b/mathx/stats.py
@@ -5,7 +5,7 @@ def mean(values):
     \"\"\"Arithmetic mean of a non-empty sequence.\"\"\"
     if not values:
         raise ValueError("mean() of an empty sequence")
-    return sum(values) / len(values)
+    return sum(values) // len(values)
""" + " \n \n def median(values):\n"  # context lines of blank source lines are a single space
NOT_APPLICABLE = """\
diff --git a/mathx/stats.py b/mathx/stats.py
--- a/mathx/stats.py
+++ b/mathx/stats.py
@@ -1,3 +1,3 @@
-this line is not in the file
+neither is this one
"""


def _grade(instances_path, docker_client, patch):
    inst = load_instances(instances_path)["envh__mathx-1"]
    return grade(docker_client, inst, patch, limits=Limits(), timeout=120)


def test_gold_patch_resolves(instances_path, docker_client, mathx_row):
    verdict = _grade(instances_path, docker_client, mathx_row["patch"])
    assert verdict.success and verdict.score == 1.0
    m = verdict.metrics
    assert m["FAIL_TO_PASS"] == {"success": ["tests/test_stats.py::test_median_even"], "failure": []}
    assert len(m["PASS_TO_PASS"]["success"]) == 3 and not m["PASS_TO_PASS"]["failure"]
    assert m["patch_successfully_applied"] and m["test_exit_code"] == 0


def test_empty_patch_does_not_resolve(instances_path, docker_client):
    verdict = _grade(instances_path, docker_client, "")
    assert not verdict.success and verdict.score == 0.0
    # The test patch still ran: the new test fails, the old ones pass.
    assert verdict.metrics["FAIL_TO_PASS"]["failure"] == ["tests/test_stats.py::test_median_even"]
    assert verdict.metrics["pass_to_pass_rate"] == 1.0


def test_wrong_patch_breaks_pass_to_pass(instances_path, docker_client):
    verdict = _grade(instances_path, docker_client, WRONG)
    assert not verdict.success and verdict.metrics["patch_applied"] is True
    assert verdict.metrics["PASS_TO_PASS"]["failure"] == ["tests/test_stats.py::test_mean"]
    assert verdict.metrics["FAIL_TO_PASS"]["failure"] == ["tests/test_stats.py::test_median_even"]


def test_patch_that_does_not_apply(instances_path, docker_client):
    verdict = _grade(instances_path, docker_client, NOT_APPLICABLE)
    assert not verdict.success
    assert verdict.metrics["patch_applied"] is False
    assert verdict.metrics["patch_successfully_applied"] is False
    assert verdict.metrics["error"] == "patch_apply_failed"  # an error, as run_instance has it
    assert ">>>>> Patch Apply Failed" in verdict.metrics["apply_output"]


def test_swebench_row_feeds_make_test_spec(instances_file):
    from swebench.harness.utils import make_test_spec

    inst = load_instances(instances_file)["envh__mathx-1"]
    spec = make_test_spec(swebench_row(inst))
    assert spec.log_parser == "parse_log_pytest" and spec.eval_type == "pass_and_fail"
    assert ">>>>> Start Test Output" in spec.eval_script and "tests/test_stats.py" in spec.eval_script


def test_given_eval_script_is_used(mathx_row, docker_client, instances_path):
    from envh_swebench.instances import Instance

    generated = Instance.from_row(mathx_row).eval_script()
    inst = Instance.from_row({**mathx_row, "eval_script": generated.replace("-rA", "-rA -v")})
    verdict = grade(docker_client, inst, mathx_row["patch"], limits=Limits(), timeout=120)
    assert verdict.success


def test_tests_that_time_out_do_not_resolve(mathx_row, docker_client, instances_path):
    from envh_swebench.instances import Instance

    inst = Instance.from_row({**mathx_row, "test_cmd": "sleep 30; python3 -m pytest -rA"})
    verdict = grade(docker_client, inst, mathx_row["patch"], limits=Limits(), timeout=2)
    assert not verdict.success and verdict.metrics["tests_timed_out"] is True
    assert verdict.metrics["error"] == "tests_timed_out" and "FAIL_TO_PASS" not in verdict.metrics


def test_a_long_log_is_graded_whole(mathx_row, docker_client, instances_path):
    """Test results in the middle of a 6 MB log count: the log is read back whole, never
    cut to a head and a tail (the 4 MB head+tail cut before dropped exactly these lines)."""
    from envh_swebench.instances import Instance

    printer = ("python3 -c \"import sys; w = sys.stdout.write; w('" + "x" * 10 + "' * 300000 + '\\n'); "
               "w('t_f2p (m.C) ... ok\\n'); w('" + "x" * 10 + "' * 300000 + '\\n'); w('t_p2p (m.C) ... ok\\n'); "
               "w('Ran 2 tests in 0.010s\\n')\"")
    inst = Instance.from_row({**mathx_row, "test_cmd": printer, "log_parser": "parse_log_django",
                              "FAIL_TO_PASS": ["t_f2p (m.C)"], "PASS_TO_PASS": ["t_p2p (m.C)"]})
    verdict = grade(docker_client, inst, "", limits=Limits(), timeout=120)
    assert verdict.success, verdict.metrics


NEW_TEST_PATCH = """\
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1,5 @@
+from mathx.stats import median
+
+
+def test_median_even():
+    assert median([4, 1, 3, 2]) == 2.5
"""
# The policy writes its own always-passing versions of the test files, no fix.
GAMED_NEW = """\
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
index 0000000..2222222
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1,2 @@
+def test_median_even():
+    pass
"""
GAMED_EXISTING = """\
diff --git a/tests/test_stats.py b/tests/test_stats.py
--- a/tests/test_stats.py
+++ b/tests/test_stats.py
@@ -15,1 +15,5 @@ def test_median_odd():
     assert median([3, 1, 2]) == 2
+
+
+def test_median_even():
+    pass
"""


def test_a_test_file_the_patch_also_created_is_never_rewarded(mathx_row, docker_client):
    """The eval script resets the test patch's files to the base commit before applying
    it. A file the test patch *creates* cannot be reset: when the policy's patch already
    made it, swebench's `git apply` of the test patch fails and the policy's file runs in
    its place. Grading deleted such files first, so an honest patch with its own test at
    that path was resolved where swebench's run is not; a gamed one passes swebench. Both
    are unresolved now, the test patch unapplied as upstream, swebench's verdict kept."""
    from envh_swebench.instances import Instance

    new = Instance.from_row({**mathx_row, "test_patch": NEW_TEST_PATCH,
                             "FAIL_TO_PASS": ["tests/test_new.py::test_median_even"], "PASS_TO_PASS": []})
    gamed_new = grade(docker_client, new, GAMED_NEW, limits=Limits(), timeout=120)
    assert not gamed_new.success and gamed_new.metrics["error"] == "test_patch_not_applied", gamed_new.metrics
    assert gamed_new.metrics["test_files_preexisting"] == ["tests/test_new.py"]
    assert gamed_new.metrics["swebench_resolved"] is True, "swebench graded the patch's own test"

    both = Instance.from_row({**mathx_row, "test_patch": mathx_row["test_patch"] + NEW_TEST_PATCH,
                              "FAIL_TO_PASS": ["tests/test_new.py::test_median_even",
                                               "tests/test_stats.py::test_median_even"]})
    assert "git checkout {} tests/test_stats.py\n".format(mathx_row["base_commit"]) in both.eval_script()
    gamed = grade(docker_client, both, GAMED_EXISTING, limits=Limits(), timeout=120)
    assert gamed.metrics["patch_applied"] is True and not gamed.success, gamed.metrics
    assert gamed.metrics["FAIL_TO_PASS"]["failure"] == ["tests/test_new.py::test_median_even",
                                                        "tests/test_stats.py::test_median_even"]
    honest = grade(docker_client, both, GAMED_NEW + mathx_row["patch"], limits=Limits(), timeout=120)
    assert not honest.success and honest.metrics["swebench_resolved"] is False, honest.metrics


FORGING_CONFTEST = '''\
import pytest


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    session.exitstatus = 0  # the runner's own status says all passed


def pytest_unconfigure(config):  # after pytest's summary: the last line about the test
    print("PASSED tests/test_stats.py::test_median_even")
'''


def _new_file_patch(path, text):
    lines = text.splitlines(keepends=True)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join("+" + line for line in lines))


def test_a_patch_that_prints_its_own_results_does_not_resolve(instances_path, docker_client):
    """No fix, only a conftest.py that prints a PASSED line for the failing test after
    pytest's summary and makes pytest exit 0: swebench's parser reads the forged line last
    and the exit status agrees, so upstream grading resolves it. The log also holds the
    real FAILED line; the forged one comes after pytest's final summary line, where pytest
    prints nothing about a test, so envh refuses it."""
    verdict = _grade(instances_path, docker_client, _new_file_patch("conftest.py", FORGING_CONFTEST))
    assert not verdict.success
    m = verdict.metrics
    assert m["test_exit_code"] == 0, "the forgery reached the recorded exit status"
    assert m["FAIL_TO_PASS"]["success"] == ["tests/test_stats.py::test_median_even"], "swebench was fooled"
    assert m["error"] == "contradictory_test_results"
    assert m["contradictions"] == {"results_after_runner_end": ["tests/test_stats.py::test_median_even"]}
    assert m["swebench_resolved"] is True, "upstream's verdict is kept, the reward refused"


ERASING_CONFTEST = """\
import os


def pytest_unconfigure(config):  # after pytest's summary and its FAILED line
    fake = ("+ : '>>>>> Start Test Output'\\n+ python3 -m pytest -rA -p no:cacheprovider\\n"
            "PASSED tests/test_stats.py::test_mean\\nPASSED tests/test_stats.py::test_mean_empty\\n"
            "PASSED tests/test_stats.py::test_median_odd\\nPASSED tests/test_stats.py::test_median_even\\n"
            "============================== 4 passed in 0.02s ===============================\\n")
    os.lseek(1, 0, os.SEEK_SET)  # the log so far is the file behind fd 1: rewind it, cut it
    os.ftruncate(1, 0)
    os.write(1, fake.encode())
    os._exit(0)
"""


def test_a_patch_cannot_rewrite_the_test_log(instances_path, docker_client):
    """No fix; after pytest's summary the patch's conftest rewinds and truncates its own
    stdout and writes a gold-looking log. The output went to a file in the container,
    so this replaced the real FAILED line and the forgery was resolved. It is read from
    the exec's stream now (a pipe: lseek fails), so the real result stands."""
    verdict = _grade(instances_path, docker_client, _new_file_patch("conftest.py", ERASING_CONFTEST))
    m = verdict.metrics
    assert not verdict.success and m["patch_applied"] is True, m
    assert m["FAIL_TO_PASS"] == {"success": [], "failure": ["tests/test_stats.py::test_median_even"]}, m
    assert m["test_exit_code"] not in (None, 0) and "contradictions" not in m, m


def test_a_test_log_over_the_bound_is_unresolved_not_a_crash(instances_path, docker_client, mathx_row, monkeypatch):
    """The tests write the log, so a log over LOG_MAX_BYTES is the patch's doing: it
    raised FileTooLargeError out of grade(). Now it is unresolved, with the size."""
    from envh_swebench import grading

    monkeypatch.setattr(grading, "LOG_MAX_BYTES", 1000)
    verdict = _grade(instances_path, docker_client, mathx_row["patch"])
    assert not verdict.success and verdict.metrics["error"] == "test_log_too_large"
    assert verdict.metrics["log_bytes"] > 1000
