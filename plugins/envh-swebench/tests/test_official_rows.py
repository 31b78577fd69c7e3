"""Official-schema rows graded from recorded logs with swebench's own TestSpec and parser.

Three repositories with different harness specs: Django (``tests/runtests.py``, Django's
log format, locale exports), requests (pytest ``-rA`` summary lines with parametrised ids)
and sympy (``bin/test``, its own format, environment exported before the tests); plus a
SWE-bench Multilingual row (gin, ``go test -v``, ``parse_log_gotest``). Each
row carries the fields of the current SWE-bench datasets; the logs are what
``run_instance`` writes to test_output.txt for the gold patch and for a failing one.
No Docker: the verdict comes from the row and the log alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from envh import errors
from envh_swebench.grading import make_spec, report_from_log, swebench_row
from envh_swebench.instances import Instance, load_instances

DATA = Path(__file__).parent / "data"
ROWS = {r["instance_id"]: r for r in json.loads((DATA / "official_rows.json").read_text())}
PARSERS = {"django__django-11099": "parse_log_django", "psf__requests-5414": "parse_log_pytest_options",
           "sympy__sympy-21171": "parse_log_sympy", "gin-gonic__gin-3741": "parse_log_gotest"}


@pytest.fixture(scope="module")
def instances():
    return load_instances(DATA / "official_rows.json")


@pytest.mark.parametrize("iid", sorted(ROWS))
def test_spec_is_swebench_own(instances, iid):
    """The TestSpec is exactly what swebench's make_test_spec builds from the raw row."""
    from swebench.harness.utils import make_test_spec

    inst = instances[iid]
    ours, theirs = make_spec(inst), make_test_spec(ROWS[iid])
    assert inst.grading == "dataset" and inst.log_parser == PARSERS[iid]
    assert ours.eval_script == theirs.eval_script and ours.log_parser == theirs.log_parser
    assert (ours.FAIL_TO_PASS, ours.PASS_TO_PASS, ours.eval_type) == \
           (theirs.FAIL_TO_PASS, theirs.PASS_TO_PASS, theirs.eval_type)
    if inst.repo != "gin-gonic/gin":  # the Python images keep the repo's env in conda
        assert "source /opt/miniconda3/bin/activate" in ours.eval_script


@pytest.mark.parametrize("iid", sorted(ROWS))
def test_gold_log_resolves_failing_log_does_not(instances, iid):
    inst = instances[iid]
    gold = report_from_log(inst, inst.patch, (DATA / f"{iid}.gold.log").read_text())
    fail = report_from_log(inst, inst.patch, (DATA / f"{iid}.fail.log").read_text())
    assert gold.success and gold.metrics["FAIL_TO_PASS"]["failure"] == []
    assert gold.metrics["PASS_TO_PASS"]["success"] == inst.pass_to_pass
    assert not fail.success and fail.metrics["FAIL_TO_PASS"]["failure"]
    assert fail.metrics["PASS_TO_PASS"]["failure"] == [], "only the issue's tests fail"
    assert (gold.metrics["test_exit_code"], fail.metrics["test_exit_code"]) == (0, 1)


def test_wrong_parser_would_grade_django_wrong(instances):
    """The bug the row's own parser prevents: pytest's parser finds nothing in Django's log."""
    import attrs

    inst = instances["django__django-11099"]
    wrong = attrs.evolve(inst, log_parser="parse_log_pytest")
    assert not report_from_log(wrong, inst.patch, (DATA / "django__django-11099.gold.log").read_text()).success


def test_episode_environment_comes_from_the_eval_script(instances):
    sympy = instances["sympy__sympy-21171"]
    assert sympy.activation == ("source /opt/miniconda3/bin/activate", "conda activate testbed",
                                "export PYTHONIOENCODING=utf8")
    assert sympy.command_prefix().endswith("export PYTHONIOENCODING=utf8; ")
    assert instances["django__django-11099"].activation[:2] == sympy.activation[:2]
    literal = Instance.from_row({**ROWS["sympy__sympy-21171"], "FAIL_TO_PASS": "['test_latex_SingularityFunction']"})
    assert literal.fail_to_pass == sympy.fail_to_pass == ["test_latex_SingularityFunction"]


def test_activation_may_follow_a_cd():
    from envh_swebench.instances import activation_lines

    script = ("#!/bin/bash\nset -uxo pipefail\ncd /testbed\nsource /opt/miniconda3/bin/activate\n"
              "conda activate testbed\ngit status\nexport LATE=1\n")
    assert activation_lines(script) == ["source /opt/miniconda3/bin/activate", "conda activate testbed"]


def test_images_follow_the_row(instances):
    assert instances["django__django-11099"].image == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    row = {k: v for k, v in ROWS["django__django-11099"].items() if k != "image"}
    ns = Instance.from_row(row, namespace="swebench").image
    assert ns.startswith("swebench/sweb.eval.") and ns.endswith(".django_1776_django-11099:latest")


def test_row_without_eval_script_is_refused_with_the_reason():
    bare = {k: v for k, v in ROWS["django__django-11099"].items()
            if k not in ("eval_script", "log_parser", "eval_type", "image")}
    with pytest.raises(errors.SpecError, match=r"row 0 \('django__django-11099'\) cannot be graded faithfully"
                                                r".*no eval_script.*make_test_spec"):
        load_instances([bare])


@pytest.mark.parametrize("field", ["log_parser", "eval_type", "version"])
def test_a_row_without_what_make_test_spec_reads_is_refused(field):
    """swebench's make_test_spec raises KeyError on such a row; it was graded with a
    parser from the repo table, eval_type pass_and_fail and version ''. Now it is refused
    at load, naming the row and the field."""
    from swebench.harness.utils import make_test_spec

    row = {k: v for k, v in ROWS["django__django-11099"].items() if k != field}
    with pytest.raises(KeyError, match=field):
        make_test_spec(row)
    with pytest.raises(errors.SpecError, match=rf"row 0 \('django__django-11099'\) has an eval_script but no {field}"):
        load_instances([row])


def test_an_eval_script_without_the_output_markers_is_refused():
    """swebench grades only what lies between the markers: without them every log is
    unresolved (get_logs_eval returns no result), so the row is refused at load."""
    row = ROWS["psf__requests-5414"]
    bare = {**row, "eval_script": row["eval_script"].replace(": '>>>>> End Test Output'", ": done")}
    with pytest.raises(errors.SpecError, match="does not print '>>>>> End Test Output'"):
        load_instances([bare])


@pytest.mark.parametrize(("change", "message"), [
    ({"log_parser": "parse_log_nonsense"}, "not in swebench's PARSER_REGISTRY"),
    ({"eval_type": "fail_sometimes"}, "eval_type 'fail_sometimes'"),
    ({"image_assets": {"test_patch": [{"path": "a.png", "url": "https://example.invalid/a.png"}]}},
     "image_assets"),
])
def test_rows_swebench_could_not_grade_here_are_refused(change, message):
    with pytest.raises(errors.SpecError, match=message):
        load_instances([{**ROWS["psf__requests-5414"], **change}])


def test_row_for_swebench_matches_its_own_fields(instances):
    row = swebench_row(instances["psf__requests-5414"])
    assert row["eval_script"] == ROWS["psf__requests-5414"]["eval_script"]
    assert row["log_parser"] == "parse_log_pytest_options"


def upstream_resolved(row, log, tmp=None):
    """swebench 5.0.2's own verdict on ``log``: ``make_test_spec`` of the raw row and
    ``get_eval_report``, no envh code in between."""
    import tempfile

    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    spec = make_test_spec(row)
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(log)
        f.flush()
        report = get_eval_report(spec, {"instance_id": row["instance_id"], "model_name_or_path": "x",
                                        "model_patch": row["patch"]}, f.name, include_tests_status=True)
    return report[row["instance_id"]]["resolved"]


# What patched code can print while the tests run, in each row's own result format.
FORGED = {"django__django-11099": "{} ... ok", "psf__requests-5414": "PASSED {}",
          "sympy__sympy-21171": "{} ok", "gin-gonic__gin-3741": "--- PASS: {} (0.00s)"}
END = "+ : '>>>>> End Test Output'"


@pytest.mark.parametrize("iid", sorted(ROWS))
@pytest.mark.parametrize("forgery", ["pass lines", "pass lines and an exit code before",
                                     "pass lines and an exit code after"])
def test_results_the_patched_code_prints_do_not_resolve(instances, iid, forgery):
    """swebench's parsers keep the last line about a test, so forged `<test> ... ok` lines
    printed after the real failures (an atexit hook, a conftest) resolved the Django and
    sympy rows' failing logs; a forged exit status before or after the real one resolved
    all four. A log that contradicts itself is now unresolved and says why; the gold log
    (checked above) still resolves."""
    inst = instances[iid]
    log = (DATA / f"{iid}.fail.log").read_text()
    assert END in log
    fake = "\n".join(FORGED[iid].format(t) for t in inst.fail_to_pass)
    log = log.replace(END, f"{fake}\n{END}", 1)
    if forgery.endswith("before"):
        log = log.replace("+ : '>>>>> Start Test Output'", "+ : '>>>>> Start Test Output'\n>>>>> Test Exit Code: 0", 1)
    elif forgery.endswith("after"):
        log = log.replace(">>>>> Test Exit Code: 1", ">>>>> Test Exit Code: 1\n>>>>> Test Exit Code: 0")
    result = report_from_log(inst, inst.patch, log)
    assert not result.success and result.metrics["error"] == "contradictory_test_results"
    found = result.metrics["contradictions"]
    if forgery != "pass lines":
        assert found["exit_codes"] == [0, 1]
    assert found["results_after_runner_end"] == sorted(inst.fail_to_pass)  # printed after the runner's summary
    assert result.metrics["swebench_resolved"] is upstream_resolved(ROWS[iid], log)


def test_an_honest_log_has_no_contradictions(instances):
    from envh_swebench.grading import contradictions

    for iid in ROWS:
        for kind in ("gold", "fail"):
            assert contradictions(instances[iid], (DATA / f"{iid}.{kind}.log").read_text()) == {}, (iid, kind)


@pytest.mark.parametrize("how", ["{t} ... \nFAIL", "{t}\nA docstring ... FAIL", "{t} ... printed FAIL"])
def test_a_result_line_the_code_under_test_broke_still_contradicts_a_forged_pass(instances, how):
    """Django writes `<test> ... ` before the test runs and `FAIL` after: what the code
    under test prints in between (a newline, text) leaves a line the parser does not
    read, and a forged `<test> ... ok` then resolved the failing log. unittest's own
    `FAIL: <test>` report after the run still says it failed."""
    inst = instances["django__django-11099"]
    log = (DATA / "django__django-11099.fail.log").read_text()
    for t in inst.fail_to_pass:
        log = log.replace(f"{t} ... FAIL", how.format(t=t))
    log = log.replace(END, "\n".join(f"{t} ... ok" for t in inst.fail_to_pass) + f"\n{END}", 1)
    result = report_from_log(inst, inst.patch, log)
    assert not result.success and result.metrics["error"] == "contradictory_test_results"
    reported = [t for t in inst.fail_to_pass if f"FAIL: {t}\n" in log]  # the recorded log keeps one report
    found = result.metrics["contradictions"]
    assert found["results_after_runner_end"] == sorted(inst.fail_to_pass)
    assert reported and found["reported_failed_and_passed"] == reported
