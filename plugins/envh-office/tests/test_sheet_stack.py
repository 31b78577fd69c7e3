"""SpreadsheetBench through envh: the bridge contract suite on real containers and real
LibreOffice, a reference solution through a stage + contract stack, and each template."""

from __future__ import annotations

import envh
import pytest
from envh import Action, TaskRef
from envh.testing import BridgeContract
from office_fixtures import NATIVE_SOLUTION, YELLOW

T1 = TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-1")
T3 = TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-3")
TH = TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-h")


class TestSpreadsheetBenchContract(BridgeContract):
    @pytest.fixture
    def env_factory(self, sheet_data, soffice, docker_ready):
        from envh_office.sheet_bridge import SpreadsheetBenchEnv

        return lambda: SpreadsheetBenchEnv(sheet_data, python_timeout=20)

    @pytest.fixture
    def task(self):
        return T1

    @pytest.fixture
    def sample_actions(self):
        return [Action(tool="inspect_range", args={"range": "Data!A1:E3"}),
                Action(tool="write_range", args={"range": "Summary!B1", "values": "=SUM(Data!D2:D5)",
                                                 "fill_color": YELLOW}),
                Action(tool="run_python", args={"code": "import os, openpyxl\n"
                                                        "wb = openpyxl.load_workbook(os.environ['WORKBOOK'])\n"
                                                        "wb['Summary']['B2'] = '=B3+30'\n"
                                                        "wb.save(os.environ['WORKBOOK'])\nprint('saved')"}),
                Action(tool="submit")]


def _spec(data, layers):
    return {"bridge": "spreadsheetbench", "config": {"data": data}, "layers": layers}


def _templates():
    from envh_office import sheet_design

    return {t.name: t for t in (sheet_design.RevealRange(), sheet_design.PrefillHeaders(),
                                sheet_design.ForbidPython(), sheet_design.ValidateBeforeSubmit())}


def test_reference_solution_through_stage_and_contract(sheet_data, soffice, docker_ready):
    """Part of the native solution staged, the rest under 'validate before submit' and
    'no run_python': Pass@1 on all three test cases."""
    t = _templates()
    stage = {"kind": "stage", "actions": NATIVE_SOLUTION[:2]}
    layers = [stage, *t["spreadsheetbench.forbid-python"].instantiate(None, T3, 1),
              *t["spreadsheetbench.validate-before-submit"].instantiate(None, T3, 1)]
    with envh.make(_spec(sheet_data, layers)) as env:
        env.reset(task=T3, seed=0)
        assert env.unwrapped.get_env_state()["cells_written"] == 2
        blocked = env.step(Action(tool="run_python", args={"code": "print(1)"}))
        assert blocked.info["error"]["type"] == "blocked" and env.unwrapped.get_env_state()["python_runs"] == 0
        last = NATIVE_SOLUTION[2]
        assert not env.step(Action(tool=last["tool"], args=last["args"])).info.get("error")
        early = env.step(Action(tool="submit"))
        assert early.info["error"]["type"] == "blocked" and not early.terminated
        assert env.step(Action(tool="validate")).info.get("error") is None
        done = env.step(Action(tool="submit"))
        assert done.terminated and done.reward == 1.0
        verdict = env.evaluate()
        assert verdict.success and verdict.metrics["test_case_results"] == [1, 1, 1]
        assert verdict == env.unwrapped.evaluate()


def test_reveal_range_and_prefill_headers(sheet_data, soffice, docker_ready):
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    t = _templates()
    with SpreadsheetBenchEnv(sheet_data) as probe:
        probe.reset(task=TH, seed=0)
        assert t["spreadsheetbench.prefill-headers"].magnitudes(probe, TH) == [1]
        probe.reset(task=T1, seed=0)
        assert t["spreadsheetbench.prefill-headers"].magnitudes(probe, T1) == []  # headers already there
        layers = (t["spreadsheetbench.prefill-headers"].instantiate(probe, TH, 1)
                  + t["spreadsheetbench.reveal-range"].instantiate(probe, TH, 1))
    with envh.make(_spec(sheet_data, layers)) as env:
        first = env.reset(task=TH, seed=0).observation.text
        assert "The graded cells are: Data!E1:E5." in first
        assert "E1 = With tax" in env.step(Action(tool="inspect_range", args={"range": "Data!E1"})).observation.text
        assert env.unwrapped.get_env_state()["written_ranges"] == ["'Data'!E1:E1"]
        env.step(Action(tool="write_range", args={"range": "Data!E2:E5", "font_color": "FF0000",
                                                  "values": ["=D2*1.1", "=D3*1.1", "=D4*1.1", "=D5*1.1"]}))
        assert env.evaluate().success


def test_prefill_headers_never_writes_answers(tmp_path):
    """The golden 'header' used to be any text in the range's first row: a one-cell text
    answer was written in whole by the scaffold, and so was a first row that differs
    between test cases (data, not a header)."""
    import types

    import openpyxl
    from envh_office.sheet_design import header_writes

    def case(k, top, first):
        paths = {}
        for kind, filled in (("input", False), ("answer", True)):
            wb = openpyxl.Workbook()
            ws = wb.active
            ws.title = "Data"
            ws["A1"] = top if filled else None
            ws["A2"], ws["A3"] = (first, "x") if filled else (None, None)
            ws["C5"] = f"verdict {k}" if filled else None
            paths[kind] = str(tmp_path / f"{k}_{kind}.xlsx")
            wb.save(paths[kind])
        return types.SimpleNamespace(input=paths["input"], answer=paths["answer"])

    cases = [case(1, "Name", "alpha"), case(2, "Name", "beta")]
    single = types.SimpleNamespace(cases=cases, answer_position="Data!C5", answer_sheet=None)
    assert header_writes(single) == []
    # A2 differs between the cases: the header is the row above, the same in both
    column = types.SimpleNamespace(cases=cases, answer_position="Data!A2:A3", answer_sheet=None)
    assert header_writes(column) == [{"tool": "write_range", "args": {"range": "'Data'!A1:A1", "values": [["Name"]]}}]
