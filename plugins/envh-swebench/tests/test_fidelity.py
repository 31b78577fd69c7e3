"""Fidelity: envh's verdict against swebench 5.0.2's own ``harness.grading``.

Each case is a test log (the recorded ones in ``tests/data`` and hand-built ones in the
shape of those recordings) and the row it belongs to. swebench grades it with nothing of
envh in between (``make_test_spec`` of the raw row, ``get_eval_report``); envh grades it
with ``grading.report_from_log``. They must agree on resolved and on each test's
outcome, or envh must refuse the reward on purpose: a log holding result lines the test
runner cannot have printed (``metrics["contradictions"]``), where swebench's verdict is
kept in ``metrics["swebench_resolved"]``. Which cases are refused is listed here and in
the README; any other difference fails.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from envh_swebench.grading import report_from_log
from envh_swebench.instances import Instance

DATA = Path(__file__).parent / "data"
ROWS = {r["instance_id"]: r for r in json.loads((DATA / "official_rows.json").read_text())}
DJANGO, SYMPY = "django__django-11099", "sympy__sympy-21171"
C = "(auth_tests.test_validators.UsernameValidatorsTests)"
DOC = "Usernames end at the last allowed character."
LATEX = "sympy/printing/tests/test_latex.py"


def upstream(row: dict, log: str) -> dict:
    """swebench's report entry for ``log``, from its own code only."""
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(log)
        f.flush()
        report = get_eval_report(make_test_spec(row), {"instance_id": row["instance_id"], "model_name_or_path": "x",
                                                       "model_patch": row["patch"]}, f.name, include_tests_status=True)
    return report[row["instance_id"]]


def _log(iid: str, kind: str) -> str:
    return (DATA / f"{iid}.{kind}.log").read_text()


def _django_tests(body: str, summary: str) -> str:
    """The Django failing log with its test lines and result summary replaced."""
    log = _log(DJANGO, "fail")
    first = log.index("test_help_text")
    last = log.index("+ SWEBENCH_TEST_EXIT_CODE")
    return log[:first] + body + summary + log[last:]


P2P_LINES = ("test_help_text (auth_tests.test_validators.MinimumLengthValidatorTest) ... ok\n"
             "test_validate (auth_tests.test_validators.MinimumLengthValidatorTest) ... ok\n"
             "test_validate (auth_tests.test_validators.NumericPasswordValidatorTest) ... ok\n")
FAIL_REPORT = ("\n======================================================================\n"
               "FAIL: {name} " + C + "\n" + DOC + "\n"
               "----------------------------------------------------------------------\n"
               "Traceback (most recent call last):\nAssertionError: ValidationError not raised\n")
RAN = "\n----------------------------------------------------------------------\nRan 5 tests in 0.012s\n\n"


def _docstring_row() -> dict:
    """Django row whose two issue tests share a docstring: verbose unittest names both by
    its first line, the key FAIL_TO_PASS then holds once."""
    return {**ROWS[DJANGO], "FAIL_TO_PASS": json.dumps([DOC])}


def _django_duplicate(first: str, second: str) -> str:
    """Two tests sharing the docstring key, with these results in run order (honest)."""
    body = (P2P_LINES + f"test_ascii_validator {C}\n{DOC} ... {first}\n"
            f"test_unicode_validator {C}\n{DOC} ... {second}\n")
    failed = [n for n, r in (("test_ascii_validator", first), ("test_unicode_validator", second)) if r == "FAIL"]
    report = "".join(FAIL_REPORT.format(name=n) for n in failed)
    log = _django_tests(body + report, RAN + (f"FAILED (failures={len(failed)})\n" if failed else "OK\n"))
    return log if failed else log.replace("_CODE=1\n", "_CODE=0\n").replace("Exit Code: 1", "Exit Code: 0")


def _django_docstring_forgery(mid_run: bool) -> str:
    """No fix: the patched code writes a newline while each issue test runs (the runner's
    `... FAIL` is split, and swebench's parser reads neither half), then prints the pass
    line itself: from an atexit hook (after the runner's summary), or, with the method's
    description, while a later test runs. The runner's `FAIL:` report names the method."""
    body = P2P_LINES + f"test_ascii_validator {C}\n{DOC} ... \nFAIL\ntest_unicode_validator {C}\n{DOC} ... \n"
    if mid_run:
        body += f"test_ascii_validator {C}\n{DOC} ... ok\n"
    body += "FAIL\n" + FAIL_REPORT.format(name="test_ascii_validator") + FAIL_REPORT.format(name="test_unicode_validator")
    return _django_tests(body, RAN + "FAILED (failures=2)\n" + ("" if mid_run else f"{DOC} ... ok\n"))


def _sympy(tests: str, report: str, summary: str, after: str = "") -> str:
    log = _log(SYMPY, "fail")
    first = log.index(f"{LATEX}[4]")
    last = log.index("+ SWEBENCH_TEST_EXIT_CODE")
    return log[:first] + tests + report + summary + after + log[last:]


def _sympy_report(where: str, test: str) -> str:
    title = f" {where}:{test} "
    return "\n" + "_" * 80 + "\n" + title.center(80, "_") + "\nTraceback (most recent call last):\nAssertionError\n\n"


SYMPY_DUPLICATE = _sympy(
    f"{LATEX}[4] \ntest_printmethod E\ntest_latex_basic ok\ntest_latex_builtins ok\n"
    "test_latex_SingularityFunction ok\nsympy/printing/tests/test_str.py[1] \ntest_printmethod ok\n",
    _sympy_report(LATEX, "test_printmethod"),
    "===== tests finished: 4 passed, 1 exceptions, in 1.19 seconds =====\nDO *NOT* COMMIT!\n")
SYMPY_FORGERY = _sympy(  # a newline during the failing test, the pass line from atexit
    f"{LATEX}[4] \ntest_printmethod ok\ntest_latex_basic ok\ntest_latex_builtins ok\n"
    "test_latex_SingularityFunction \nE\n",
    _sympy_report(LATEX, "test_latex_SingularityFunction"),
    "===== tests finished: 3 passed, 1 exceptions, in 1.19 seconds =====\nDO *NOT* COMMIT!\n",
    after="test_latex_SingularityFunction ok\n")


def _out_of_memory(line: str) -> str:
    """The Django run cut short by the memory the code under test took: no test parsed."""
    return _django_tests(f"Traceback (most recent call last):\n{line}\n", "")


def _early_end_marker() -> str:
    """The patched code prints swebench's end marker and an exit status as the tests start
    (swebench then reads the whole log, its fallback), and pass lines from atexit."""
    log = _log(DJANGO, "fail")
    forged = "\n".join(f"{t} ... ok" for t in json.loads(ROWS[DJANGO]["FAIL_TO_PASS"]))
    log = log.replace("System check identified no issues (0 silenced).\n",
                      "System check identified no issues (0 silenced).\n>>>>> Test Exit Code: 0\n"
                      "+ : '>>>>> End Test Output'\n", 1)
    return log.replace("FAILED (failures=2)\n", f"FAILED (failures=2)\n{forged}\n", 1)


# name -> (row, log, swebench's resolved, envh's refusal: which signs, or None)
CASES: dict[str, tuple[dict, str, bool, dict | None]] = {
    **{f"{iid}.{kind}": (ROWS[iid], _log(iid, kind), kind == "gold", None)
       for iid in sorted(ROWS) for kind in ("gold", "fail")},
    "django duplicate docstring, failing test first": (
        _docstring_row(), _django_duplicate("FAIL", "ok"), True, None),
    "django duplicate docstring, failing test last": (
        _docstring_row(), _django_duplicate("ok", "FAIL"), False, None),
    "django duplicate docstring, both pass": (_docstring_row(), _django_duplicate("ok", "ok"), True, None),
    "sympy test_printmethod in two files, the first failing": (ROWS[SYMPY], SYMPY_DUPLICATE, True, None),
    "out of memory: Cannot allocate memory": (
        ROWS[DJANGO], _out_of_memory("OSError: [Errno 12] Cannot allocate memory"), False, None),
    "out of memory: Killed": (ROWS[DJANGO], _out_of_memory("Killed"), False, None),
    "django docstring forgery from atexit": (
        _docstring_row(), _django_docstring_forgery(mid_run=False), True, {"results_after_runner_end": [DOC]}),
    "django docstring forgery during a later test": (
        _docstring_row(), _django_docstring_forgery(mid_run=True), True, {"reported_failed_and_passed": [DOC]}),
    "forged end marker and exit status": (ROWS[DJANGO], _early_end_marker(), True, {
        "exit_codes": [0, 1], "markers_repeated": [">>>>> End Test Output"],
        "results_after_runner_end": json.loads(ROWS[DJANGO]["FAIL_TO_PASS"]),
    }),
    "sympy forgery from atexit": (
        ROWS[SYMPY], SYMPY_FORGERY, True, {"results_after_runner_end": ["test_latex_SingularityFunction"],
                                    "reported_failed_and_passed": ["test_latex_SingularityFunction"]}),
}

REQUESTS = "psf__requests-5414"
REQUESTS_F2P = "tests/test_requests.py::TestRequests::test_invalid_url[InvalidURL-http://.example.com]"
REQUESTS_END = "========================= 1 failed, 2 passed in 0.25s ==========================\n"


def _requests_after_end(after: str, end: str = REQUESTS_END) -> str:
    """The failing requests log, its summary line replaced by ``end`` and ``after`` printed
    after it (from atexit): a pass line for the issue test and a fake failure."""
    log = _log(REQUESTS, "fail")
    assert REQUESTS_END in log
    return log.replace(REQUESTS_END, end + after)


def _tests(value: str | list) -> list:
    return json.loads(value) if isinstance(value, str) else list(value)


FAKE_PASS = f"PASSED {REQUESTS_F2P}\nFAILED tests/zz.py::x\n"


def _requests_hard_exit() -> str:
    """No fix: the failing test prints pass lines for every graded test and a failure,
    then ``os._exit(1)``: pytest never prints its summary."""
    log = _log(REQUESTS, "fail")
    row = ROWS[REQUESTS]
    forged = "".join(f"PASSED {t}\n" for t in _tests(row["FAIL_TO_PASS"]) + _tests(row["PASS_TO_PASS"]))
    start, stop = log.index("tests/test_requests.py ..F"), log.index("+ SWEBENCH_TEST_EXIT_CODE")
    return log[:start] + "tests/test_requests.py ..\n" + forged + "FAILED tests/zz.py::x\n" + log[stop:]


def _django_hard_exit() -> str:
    row = ROWS[DJANGO]
    body = "".join(f"{t} ... ok\n" for t in _tests(row["PASS_TO_PASS"]) + _tests(row["FAIL_TO_PASS"]))
    return _django_tests(body + "zz (a.B) ... FAIL\n", "")


def _django_crash(failed_before: bool) -> str:
    """Honest: the run dies (segfault, status 139) after the graded tests passed, before
    unittest's summary; with or without an earlier failure of another test."""
    other = "test_other (auth_tests.test_other.T) ... FAIL\n" if failed_before else ""
    log = _django_tests(P2P_LINES + other + f"test_ascii_validator {C} ... ok\ntest_unicode_validator {C} ... ok\n"
                        "Fatal Python error: Segmentation fault\n", "")
    return log.replace("_CODE=1\n", "_CODE=139\n").replace("Exit Code: 1", "Exit Code: 139")


def _django_ok_split() -> str:
    """No fix: each failing test writes `x` then `ok` on the next line; swebench's parser
    reads that `ok` as the result of the last `... ` line. The runner's FAIL follows."""
    body = (P2P_LINES + f"test_ascii_validator {C} ... x\nok\nFAIL\ntest_unicode_validator {C} ... x\nok\nFAIL\n"
            + FAIL_REPORT.format(name="test_ascii_validator").replace(DOC + "\n", "")
            + FAIL_REPORT.format(name="test_unicode_validator").replace(DOC + "\n", ""))
    return _django_tests(body, RAN + "FAILED (failures=2)\n")


def _django_run_twice() -> str:
    """Honest: one TestCase imported under two labels runs twice, failing then passing."""
    body = (P2P_LINES + f"test_ascii_validator {C} ... FAIL\ntest_unicode_validator {C} ... ok\n"
            f"test_ascii_validator {C} ... ok\ntest_unicode_validator {C} ... ok\n"
            + FAIL_REPORT.format(name="test_ascii_validator").replace(DOC + "\n", ""))
    return _django_tests(body, RAN.replace("Ran 5", "Ran 7") + "FAILED (failures=1)\n")


def _django_cr() -> str:
    """Pass lines after the summary, separated by `\\r`: swebench reads them as lines."""
    forged = "x" + "".join(f"\r{t} ... ok" for t in _tests(ROWS[DJANGO]["FAIL_TO_PASS"])) + "\n"
    return _log(DJANGO, "fail").replace("FAILED (failures=2)\n", "FAILED (failures=2)\n" + forged)


def _echo_markers(kind: str) -> tuple[dict, str]:
    """An eval script that `echo`es its markers under `set -x`: each shows twice, as the
    trace line and as the output."""
    row = dict(ROWS[REQUESTS])
    for marker in (">>>>> Start Test Output", ">>>>> End Test Output"):
        row["eval_script"] = row["eval_script"].replace(f": '{marker}'", f"echo '{marker}'")
    log = _log(REQUESTS, kind)
    for marker in (">>>>> Start Test Output", ">>>>> End Test Output"):
        log = log.replace(f"+ : '{marker}'\n", f"+ echo '{marker}'\n{marker}\n")
    return row, log


def _pytester_passes() -> str:
    """Honest: a passing test's captured output holds a whole inner pytest session (as
    pytester prints), shown in the PASSES section of `-rA`, before the real summary."""
    inner = ("____________________________ test_entry_points ____________________________\n"
             "----------------------------- Captured stdout call -----------------------------\n"
             "============================= test session starts ==============================\n"
             "collected 1 item\n\ntest_inner.py F\n\n=========================== short test summary info "
             "============================\nFAILED test_inner.py::test_x - assert 0\n"
             "============================== 1 failed in 0.01s ===============================\n")
    log = _log(REQUESTS, "gold")
    header = "==================================== PASSES ====================================\n"
    return log.replace(header, header + inner)


SYMPY_FAKE_FILE = _sympy(  # during the failing test: a made-up file line and a pass line
    f"{LATEX}[4] \ntest_printmethod ok\ntest_latex_basic ok\ntest_latex_builtins ok\n"
    "test_latex_SingularityFunction \nsympy/fake.py[1] \ntest_latex_SingularityFunction ok\nE\n",
    _sympy_report(LATEX, "test_latex_SingularityFunction"),
    "===== tests finished: 3 passed, 1 exceptions, in 1.19 seconds =====\nDO *NOT* COMMIT!\n")
SYMPY_FAKE_SUMMARY = _sympy(  # after sympy's summary: a file line, a pass line, a second summary
    f"{LATEX}[4] \ntest_printmethod ok\ntest_latex_basic ok\ntest_latex_builtins ok\n"
    "test_latex_SingularityFunction \nE\n", _sympy_report(LATEX, "test_latex_SingularityFunction"),
    "===== tests finished: 3 passed, 1 exceptions, in 1.19 seconds =====\nDO *NOT* COMMIT!\n",
    after="sympy/fake.py[1] \ntest_latex_SingularityFunction ok\n===== tests finished: 1 passed, in 0.01 seconds =====\n")
DJANGO_F2P = _tests(ROWS[DJANGO]["FAIL_TO_PASS"])
LATE = {"results_after_runner_end": [REQUESTS_F2P]}
CASES.update({
    "pytest pass line after a fake second summary": (ROWS[REQUESTS], _requests_after_end(
        FAKE_PASS + "=== 1 failed, 3 passed in 0.30s ===\n"), True,
        {**LATE, "summaries_after_runner_end": ["=== 1 failed, 3 passed in 0.30s ==="]}),
    "pytest older 'in 0.25 seconds' summary": (ROWS[REQUESTS], _requests_after_end(
        FAKE_PASS, REQUESTS_END.replace("0.25s", "0.25 seconds")), True, LATE),
    "pytest ANSI-coloured summary": (ROWS[REQUESTS], _requests_after_end(
        FAKE_PASS, "\x1b[31m" + REQUESTS_END.rstrip("\n") + "\x1b[0m\n"), True, LATE),
    "pytest pass line after the summary, CR line breaks": (ROWS[REQUESTS], _requests_after_end(
        f"x\rPASSED {REQUESTS_F2P}\rFAILED tests/zz.py::x\n"), True, LATE),
    "django pass lines after the summary, CR line breaks": (
        ROWS[DJANGO], _django_cr(), True, {"results_after_runner_end": DJANGO_F2P}),
    "pytest hard exit after printing pass lines": (
        ROWS[REQUESTS], _requests_hard_exit(), True, {"runner_did_not_finish": True}),
    "django hard exit after printing ok lines": (
        ROWS[DJANGO], _django_hard_exit(), True, {"runner_did_not_finish": True}),
    "honest django crash before its summary": (
        ROWS[DJANGO], _django_crash(failed_before=False), False, {"runner_did_not_finish": True}),
    "honest django crash before its summary, another test failed": (  # refused; swebench resolves
        ROWS[DJANGO], _django_crash(failed_before=True), True, {"runner_did_not_finish": True}),
    "django ok on the line after the description": (
        ROWS[DJANGO], _django_ok_split(), True, {"reported_failed_and_passed": DJANGO_F2P}),
    "honest django test run twice, failing then passing": (ROWS[DJANGO], _django_run_twice(), True, None),
    "sympy pass line under a made-up file line": (
        ROWS[SYMPY], SYMPY_FAKE_FILE, True, {"reported_failed_and_passed": ["test_latex_SingularityFunction"]}),
    "sympy pass line and a second summary after the summary": (ROWS[SYMPY], SYMPY_FAKE_SUMMARY, True, {
        "results_after_runner_end": ["test_latex_SingularityFunction"],
        "summaries_after_runner_end": ["===== tests finished: 1 passed, in 0.01 seconds ====="],
        "reported_failed_and_passed": ["test_latex_SingularityFunction"]}),
    "honest echo markers under set -x, gold": (*_echo_markers("gold"), True, None),
    "honest echo markers under set -x, fail": (*_echo_markers("fail"), False, None),
    "honest pytester session in the PASSES section": (ROWS[REQUESTS], _pytester_passes(), True, None),
})


@pytest.mark.parametrize("name", list(CASES))
def test_verdict_equals_swebench_or_is_a_documented_refusal(name):
    row, log, resolved, refusal = CASES[name]
    theirs = upstream(row, log)
    assert theirs["resolved"] is resolved, "the case no longer shows what it was built for"
    ours = report_from_log(Instance.from_row(row), row["patch"], log)
    m = ours.metrics
    if refusal is None:
        assert "contradictions" not in m, m.get("contradictions")
        assert ours.success is m["resolved"] is theirs["resolved"]
        status = theirs.get("tests_status")
        for kind in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            assert m[kind] == ({k: status[kind][k] for k in ("success", "failure")} if status
                               else {"success": [], "failure": []})
        assert m["patch_successfully_applied"] is theirs["patch_successfully_applied"]
    else:
        assert not ours.success and ours.score == 0.0 and m["resolved"] is False
        assert m["swebench_resolved"] is theirs["resolved"]
        assert m["error"] == "contradictory_test_results" and m["contradictions"] == refusal
        assert "cannot have printed" in m["refused"]


@pytest.mark.parametrize("line", ["OSError: [Errno 12] Cannot allocate memory", "Killed"])
def test_a_log_the_patch_ran_out_of_memory_in_is_unresolved_not_an_infra_error(line):
    """swebench flags such a log `infra_failure` (advisory) and records it unresolved. It
    raised InfraError here, so the episode was replayed: a patch could turn its own
    failure into a retry. Now it is the patch's failure, with swebench's flag kept."""
    row = ROWS[DJANGO]
    result = report_from_log(Instance.from_row(row), row["patch"], _out_of_memory(line))
    assert not result.success and result.score == 0.0
    assert result.metrics["infra_failure"] is True and result.metrics["infra_failure_reason"] == "out_of_memory"
    assert result.metrics["patch_successfully_applied"] is False
