"""The SpreadsheetBench bridge's reference solution: the golden workbook written back with
``write_range`` and submitted. Replayed on the bare bridge it wins (real LibreOffice
grading); under a contract that blocks ``write_range`` it no longer does; golden files the
native tools cannot rebuild give no reference at all."""

from __future__ import annotations

import datetime
import json

import envh
import pytest
from envh import Action, TaskRef
from office_fixtures import _answer_book, _input_book

T1 = TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-1")
T3 = TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-3")
TH = TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-h")

NO_WRITE = {"kind": "contract", "id": "no-write", "code": (
    "def filter_action(action, state, memo):\n"
    "    if action.tool == 'write_range':\n"
    "        return Block(reason='write_range is disabled here')\n"
    "    return None\n")}


def replay(env, plan):
    """As the rigger's cascade does: every step must go through, then the verdict must win."""
    for action in plan:
        resp = env.step(action)
        if resp.info.get("error") or resp.info.get("blocked"):
            return False, resp
        if resp.terminated or resp.truncated:
            break
    return env.unwrapped.evaluate().success, resp


def _spec(data, layers):
    return {"bridge": "spreadsheetbench", "config": {"data": data}, "layers": layers}


@pytest.mark.parametrize("task", [T1, TH], ids=["tax-1", "tax-h"])
def test_reference_wins_on_the_bare_bridge(sheet_data, soffice, docker_ready, task):
    with envh.make(_spec(sheet_data, [])) as env:
        env.reset(task=task, seed=0)
        plan = env.unwrapped.reference_actions()
        assert plan is not None and plan[-1] == Action(tool="submit")
        assert plan[-2] == Action(tool="validate") and {a.tool for a in plan[:-2]} == {"write_range"}
        won, last = replay(env, plan)
        assert won and last.terminated and last.reward == 1.0
        assert env.unwrapped.evaluate().metrics["test_case_results"] == [1]
        assert env.unwrapped.reference_actions() is None  # submitted: nothing left to play


def test_tax_h_writes_the_missing_header_and_what_its_formulas_read(sheet_data):
    """tax-h's answer range is Data!E1:E5 only, but its input lacks the header and the
    Summary cells the golden file adds: they are written too; answer colours come along."""
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    env = SpreadsheetBenchEnv(sheet_data)
    try:
        env.reset(task=TH, seed=0)
        writes = {a.args["range"]: a.args for a in env.reference_actions()[:-2]}
        assert writes["'Data'!E1"]["values"] == [["With tax"]]
        # a column of formulas sharing a colour is one call
        assert writes["'Data'!E2:E5"] == {"range": "'Data'!E2:E5", "font_color": "FF0000",
                                          "values": [["=D2*1.1"], ["=D3*1.1"], ["=D4*1.1"], ["=D5*1.1"]]}
        # outside the answer range: values only (the golden B2 date as its serial)
        assert writes["'Summary'!B1:B2"] == {"range": "'Summary'!B1:B2",
                                             "values": [["=SUM(Data!D2:D5)"], [45336.0]]}
        assert len(writes) == 3
    finally:
        env.close()


def test_blocking_write_range_breaks_the_reference(sheet_data, soffice, docker_ready):
    """The cascade's check: under a contract blocking write_range the replay stops at the
    first write; played on to submit, the untouched workbook fails the grader."""
    with envh.make(_spec(sheet_data, [NO_WRITE])) as env:
        env.reset(task=T1, seed=0)
        plan = env.unwrapped.reference_actions()
        won, first = replay(env, plan)
        assert not won and first.info["error"]["type"] == "blocked"
        for action in plan[1:]:
            resp = env.step(action)
        assert resp.terminated and resp.reward == 0.0
        assert not env.unwrapped.evaluate().success


def test_reference_passes_the_bridges_own_validate_before_submit(sheet_data, soffice, docker_ready):
    """The bridge's pressure template blocks submit until validate passed: the reference
    validates, so that candidate is not judged unsolvable."""
    from envh_office import sheet_design

    layers = sheet_design.ValidateBeforeSubmit().instantiate(None, T1, 1)
    with envh.make(_spec(sheet_data, layers)) as env:
        env.reset(task=T1, seed=0)
        won, last = replay(env, env.unwrapped.reference_actions())
        assert won and last.terminated


def test_no_validate_when_the_files_already_hold_an_error_value(tmp_path):
    """validate would report an error value the input or golden file holds: the reference
    then submits without it (it would stop a replay on the bare bridge)."""

    def edit(wb):
        wb["Data"]["G9"] = "#N/A"

    plan = _reference(_dataset(tmp_path, edit))
    assert plan is not None and plan[-1] == Action(tool="submit")
    assert {a.tool for a in plan[:-1]} == {"write_range"}


def test_no_reference_when_test_cases_differ(sheet_data):
    """tax-3's golden Summary!B2 is a literal date that differs per test case: one
    sequence of writes cannot hold on every case, so there is no reference."""
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    env = SpreadsheetBenchEnv(sheet_data)
    try:
        env.reset(task=T3, seed=0)
        assert env.reference_actions() is None
        env.reset(task=T1, seed=0)
        assert env.reference_actions() is not None
    finally:
        env.close()


# -- golden files the native tools cannot (or can) rebuild ------------------------------------------
def _dataset(tmp_path, edit, position="Summary!B1:B2"):
    folder = tmp_path / "spreadsheet" / "t"
    folder.mkdir(parents=True)
    _input_book(1).save(folder / "1_t_input.xlsx")
    gold = _answer_book(1)
    edit(gold)
    gold.save(folder / "1_t_answer.xlsx")
    (tmp_path / "dataset.json").write_text(json.dumps([{
        "id": "t", "instruction": "x", "spreadsheet_path": "spreadsheet/t", "answer_position": position}]))
    return str(tmp_path)


def _reference(data):
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    env = SpreadsheetBenchEnv(data)
    try:
        env.reset(task=TaskRef(suite="spreadsheetbench", split="test", instance_id="t"), seed=0)
        return env.reference_actions()
    finally:
        env.close()


def _theme_fill(wb):
    from openpyxl.styles import PatternFill
    from openpyxl.styles.colors import Color

    wb["Summary"]["B1"].fill = PatternFill(fill_type="solid", fgColor=Color(theme=4), bgColor=Color(theme=4))


def _pattern_fill(wb):
    from openpyxl.styles import PatternFill

    wb["Summary"]["B1"].fill = PatternFill(fill_type="darkGrid", fgColor="FFFF00", bgColor="0000FF")


def _excel_style_fill(wb):
    from openpyxl.styles import PatternFill
    from openpyxl.styles.colors import Color

    # Excel's own solid fills carry an indexed background, which write_range cannot set
    wb["Summary"]["B1"].fill = PatternFill(fill_type="solid", fgColor="FFFF00", bgColor=Color(indexed=64))


def _time(wb):
    wb["Summary"]["B2"] = datetime.time(9, 30)


def _literal_formula_text(wb):
    wb["Summary"]["B2"].value = "=not a formula"
    wb["Summary"]["B2"].data_type = "s"


def _defined_name(wb):
    from openpyxl.workbook.defined_name import DefinedName

    wb.defined_names["rate"] = DefinedName("rate", attr_text="Data!$C$2")
    wb["Summary"]["B2"] = "=rate*2"


def _array_formula(wb):
    from openpyxl.worksheet.formula import ArrayFormula

    wb["Summary"]["B2"] = ArrayFormula("B2", "=SUM(Data!B2:B5*Data!C2:C5)")


@pytest.mark.parametrize("edit", [_theme_fill, _pattern_fill, _excel_style_fill, _time, _literal_formula_text,
                                  _defined_name, _array_formula])
def test_golden_files_the_tools_cannot_write_give_none(tmp_path, edit):
    assert _reference(_dataset(tmp_path, edit)) is None


def test_a_colour_the_golden_file_removes_gives_none(tmp_path):
    """write_range adds colours, it never removes one: an input cell coloured where the
    golden cell is not has no reference."""
    from openpyxl.styles import PatternFill

    folder = tmp_path / "spreadsheet" / "t"
    folder.mkdir(parents=True)
    inp = _input_book(1)
    inp["Summary"]["B1"].fill = PatternFill(fill_type="solid", fgColor="00FF00", bgColor="00FF00")
    inp.save(folder / "1_t_input.xlsx")
    gold = _input_book(1)
    gold["Summary"]["B1"] = 5
    gold.save(folder / "1_t_answer.xlsx")
    (tmp_path / "dataset.json").write_text(json.dumps([{
        "id": "t", "instruction": "x", "spreadsheet_path": "spreadsheet/t", "answer_position": "Summary!B1"}]))
    assert _reference(str(tmp_path)) is None


def test_new_quoted_sheet_and_default_first_sheet(tmp_path):
    """An answer on a sheet the input lacks (its name needs quoting) is written with
    create_sheet; a range without a sheet means the golden file's first sheet; a row of
    cells with the same colours is one call. (Checked without LibreOffice.)"""

    def edit(wb):
        ws = wb.create_sheet("Bob's total")
        ws["A1"], ws["B1"], ws["C1"] = "=SUM(Data!D2:D5)", 2, "x"
        wb["Data"]["F2"] = 7

    data = _dataset(tmp_path, edit, position="'Bob''s total'!A1:C1,F2")
    plan = _reference(data)
    assert plan is not None
    args = [a.args for a in plan[:-2]]
    assert {"range": "'Bob''s total'!A1:C1", "values": [["=SUM(Data!D2:D5)", 2, "x"]],
            "create_sheet": True} in args
    # F2 (the answer) and E2 (a cell the golden file adds beside it) in one call
    assert {"range": "'Data'!E2:F2", "values": [["=D2*1.1", 7]]} in args


def test_unchanged_cells_the_tools_cannot_write_do_not_matter(tmp_path):
    """A time of day and a text starting with '=' that the input already holds (and the
    golden file keeps) need no write, so they do not take the reference away."""
    from openpyxl.styles import PatternFill

    folder = tmp_path / "spreadsheet" / "t"
    folder.mkdir(parents=True)
    books = []
    for _ in range(2):
        wb = _input_book(1)
        wb["Summary"]["C1"] = datetime.time(9, 30)
        wb["Summary"]["C2"] = "=== notes ==="
        wb["Summary"]["C2"].data_type = "s"
        wb["Summary"]["C3"].fill = PatternFill(fill_type="solid", fgColor="00FF00", bgColor="00FF00")
        books.append(wb)
    books[0].save(folder / "1_t_input.xlsx")
    books[1]["Summary"]["B1"] = 12
    books[1].save(folder / "1_t_answer.xlsx")
    (tmp_path / "dataset.json").write_text(json.dumps([{
        "id": "t", "instruction": "x", "spreadsheet_path": "spreadsheet/t", "answer_position": "Summary!B1:C3"}]))
    plan = _reference(str(tmp_path))
    assert plan is not None and [a.args for a in plan[:-2]] == [{"range": "'Summary'!B1", "values": [[12]]}]
