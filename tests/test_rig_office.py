"""Solvability on SpreadsheetBench (envh-rigger + envh-office, real LibreOffice grading).

The reference writes the golden cells, calls ``validate`` (so the bridge's own
validate-before-submit pressure is not judged unsolvable) and submits. ``validate`` is not
something the verdict needs: a harmless candidate that blocks it must pass the cascade (it
was judged unsolvable when any refused reference step failed the replay); one that blocks
``write_range`` must not.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import envh
import pytest

OFFICE_TESTS = Path(__file__).resolve().parents[1] / "plugins/envh-office/tests"
TASK = envh.TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-1")


def _contract(name, tool):
    return {"kind": "contract", "id": name, "code": (
        "def filter_action(action, state, memo):\n"
        f"    if action.tool == {tool!r}:\n"
        f"        return Block(reason='{tool} is disabled here')\n"
        "    return None\n")}


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    pytest.importorskip("envh_office")
    if shutil.which("soffice") is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("LibreOffice (soffice) is required under CI", pytrace=False)
        pytest.skip("LibreOffice (soffice) is not installed")
    sys.path.insert(0, str(OFFICE_TESTS))
    try:
        from office_fixtures import write_sheet_dataset
    finally:
        sys.path.remove(str(OFFICE_TESTS))
    from envh.hostpaths import granted

    data = write_sheet_dataset(tmp_path_factory.mktemp("ssb"))
    with granted(data):  # the caller's data (--data), for every spec the tests build on it
        yield {"bridge": "spreadsheetbench", "config": {"data": str(data)}}
    from envh_office import recalc

    recalc._stop_warm()


def test_blocking_a_tool_the_verdict_does_not_need_leaves_the_task_solvable(spec):
    from envh_rigger import cascade

    registry = envh.get_registry()
    with envh.make(spec) as env:
        env.reset(task=TASK, seed=0)
        assert "validate" in [a.tool for a in cascade.reference_of(env)]  # the reference does call it
    no_validate = cascade.check(spec, [_contract("no-validate", "validate")], TASK, registry=registry, seeds=[0])
    assert no_validate.ok and no_validate.reference.startswith("replayed"), no_validate
    no_write = cascade.check(spec, [_contract("no-write", "write_range")], TASK, registry=registry, seeds=[0])
    assert not no_write.ok and no_write.stage == "unsolvable", no_write
    assert "write_range is disabled here" in no_write.message


def test_the_bridges_validate_before_submit_pressure_stays_solvable(spec):
    from envh_office.sheet_design import ValidateBeforeSubmit
    from envh_rigger import cascade

    registry = envh.get_registry()
    with envh.make(spec) as env:
        env.reset(task=TASK, seed=0)
        layers = ValidateBeforeSubmit().instantiate(env, TASK, 1)
    checked = cascade.check(spec, layers, TASK, registry=registry, seeds=[0])
    assert checked.ok and checked.reference.startswith("replayed"), checked
