"""SpreadsheetBench's grading against the benchmark's own ``evaluation.py``, without LibreOffice.

Source: github.com/RUCKBReasoning/SpreadsheetBench ``evaluation/evaluation.py`` at commit
6e07492b07599d4a3fdb1f96374d688c4fcf880c. The expected values below are what its
``compare_workbooks`` / ``generate_cell_names`` do with each input (traced through its code
and openpyxl's ``ws[name]``); the workbooks here hold plain values, so no recalculation is
needed to compare them.
"""

from __future__ import annotations

import io
import json
import shutil
import time
import zipfile
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner
from envh import TaskRef, errors
from envh_office import sheet_data, sheet_position, workbook
from envh_office.sheet_grading import compare_workbooks
from office_fixtures import _answer_book, write_sheet_dataset

ODD_POSITIONS = ["'b2b, sez, de'!A5:V10", "'Sheet1'!A:G", "G12\uff1aJ15"]  # all three occur in the real data


@pytest.mark.parametrize(("position", "expected"), [
    ("A1", [(None, ("A1",))]),
    ("A1:B2", [(None, ("A1", "A2", "B1", "B2"))]),                       # column by column
    ("'Summary'!B1:B2,Data!E2:E3", [("Summary", ("B1", "B2")), ("Data", ("E2", "E3"))]),
    ("'Summary!B1'", [("Summary", ("B1",))]),                            # unbalanced quotes stripped
    ("Summary'!B1", [("Summary", ("B1",))]),
    ("B1:A2", [(None, ())]),                                             # reversed columns: no cell at all
    ("a1:b1", [(None, ("AG1", "AH1"))]),                                 # col_name2num reads 'a' as 33
])
def test_position_parts_as_upstream(position, expected):
    assert [(p.sheet, p.names) for p in sheet_position.parts(position)] == expected


@pytest.mark.parametrize("position", [*ODD_POSITIONS, "A1:B2:C3", "S!x!A1", "A0", "1:3", "A1048577"])
def test_positions_upstream_cannot_grade(position):
    assert sheet_position.problem(position)


@pytest.mark.parametrize("position", ["'Summary'!B1:B2,Data!E2:E5", "$A$1", "a1", "ZZZ1", "B1:A2"])
def test_positions_upstream_grades(position):
    assert sheet_position.problem(position) is None


def _books(tmp_path: Path) -> tuple[str, str]:
    gold = openpyxl.Workbook()
    gold.active.title = "First"
    gold.active["A1"], gold.active["A2"] = 1, 2
    gold.create_sheet("Other")["A1"] = 9
    got = openpyxl.Workbook()
    got.active.title = "Other"
    got.active["A1"] = 1
    got.create_sheet("First")["A1"] = 1
    got["First"]["A2"] = 2
    paths = str(tmp_path / "gold.xlsx"), str(tmp_path / "got.xlsx")
    gold.save(paths[0])
    got.save(paths[1])
    return paths


@pytest.mark.parametrize(("position", "passed"), [
    ("A1:A2", True),             # no sheet: the golden file's first sheet ('First'), not the output's
    ("First!A1:A2", True),
    ("Other!A1", False),         # 9 vs 1
    ("Missing!A1", False),       # worksheet not found
    ("'b2b, sez, de'!A5:V10", False),
    ("'Sheet1'!A:G", False),
    ("G12\uff1aJ15", False),
    ("B1:A2", True),             # upstream compares no cell and passes
])
def test_compare_workbooks_as_upstream(tmp_path, position, passed):
    gold, got = _books(tmp_path)
    assert compare_workbooks(gold, got, position).passed is passed


def _dataset(tmp_path: Path, positions: dict[str, str]) -> Path:
    root = write_sheet_dataset(tmp_path / "ssb")
    rows = json.loads((root / "dataset.json").read_text())
    base = rows[1]  # tax-1: one test case
    for tid, position in positions.items():
        folder = root / "spreadsheet" / tid
        shutil.copytree(root / "spreadsheet" / base["id"], folder)
        for p in folder.iterdir():
            p.rename(folder / p.name.replace(base["id"], tid))
        rows.append({**base, "id": tid, "spreadsheet_path": f"spreadsheet/{tid}", "answer_position": position})
    (root / "dataset.json").write_text(json.dumps(rows))
    return root


def test_an_odd_position_sets_only_its_task_aside(tmp_path):
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    root = _dataset(tmp_path, {f"odd-{i}": p for i, p in enumerate(ODD_POSITIONS)})
    tasks = sheet_data.load_tasks(root)
    assert {t for t, v in tasks.items() if v.not_gradable} == {"odd-0", "odd-1", "odd-2"}
    with SpreadsheetBenchEnv(str(root)) as env:
        assert [t.instance_id for t in env.list_tasks()] == ["tax-1", "tax-3", "tax-h"]
        with pytest.raises(errors.SpecError, match="scores it 0"):
            env.reset(task=TaskRef(suite="spreadsheetbench", split="test", instance_id="odd-1"), seed=0)
    report = sheet_data.check(str(root))
    assert report["missing"] == [] and set(report["found"]["not_gradable"]) == {"odd-0", "odd-1", "odd-2"}


def test_the_first_observation_gives_answer_position_by_default(sheet_data):
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    task = TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-h")
    with SpreadsheetBenchEnv(sheet_data) as env:
        assert "Answer position: Data!E1:E5 (" in env.reset(task=task, seed=0).observation.text
    with SpreadsheetBenchEnv(sheet_data, show_answer_position=False) as env:
        assert "E1:E5" not in env.reset(task=task, seed=0).observation.text


def test_a_missing_golden_file_is_reported_and_raised(tmp_path):
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    root = write_sheet_dataset(tmp_path / "ssb")
    gone = root / "spreadsheet" / "tax-3" / "2_tax-3_answer.xlsx"
    gone.unlink()
    task = sheet_data.load_tasks(root)["tax-3"]
    assert [c.index for c in task.cases] == [1, 2, 3] and task.missing_files == [str(gone)]
    assert str(gone) in sheet_data.check(str(root))["missing"][0]
    with SpreadsheetBenchEnv(str(root)) as env:
        env.reset(task=TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-3"), seed=0)
        with pytest.raises(errors.EnvError, match="2_tax-3_answer.xlsx"):
            env.evaluate()


def test_a_corrupt_input_is_the_datasets_fault(tmp_path):
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    root = write_sheet_dataset(tmp_path / "ssb")
    bad = root / "spreadsheet" / "tax-3" / "2_tax-3_input.xlsx"
    bad.write_bytes(b"PK\x03\x04 not a workbook")
    with SpreadsheetBenchEnv(str(root)) as env:
        env.reset(task=TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-3"), seed=0)
        with pytest.raises(errors.EnvError, match="2_tax-3_input.xlsx"):
            env.evaluate()


def _cell_bomb(separator: str, prefix: str = "", cells: int = 1_200_000) -> bytes:
    ns = f' xmlns{":x" if prefix else ""}="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    row = f'<{prefix}c{separator}r="A1"><{prefix}v>1</{prefix}v></{prefix}c>' * 1000
    body = (f"<{prefix}worksheet{ns}><{prefix}sheetData><{prefix}row r=\"1\">" + row * (cells // 1000)
            + f"</{prefix}row></{prefix}sheetData></{prefix}worksheet>")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("xl/workbook.xml", "<workbook/>")
        z.writestr("xl/worksheets/sheet1.xml", body)
    return buf.getvalue()


@pytest.mark.parametrize(("separator", "prefix"), [("\n", ""), ("\t", ""), ("\r", ""), (" ", "x:"), ("/", "")])
def test_cell_cap_counts_every_spelling_of_a_cell(tmp_path, separator, prefix):
    path = tmp_path / "bomb.xlsx"
    path.write_bytes(_cell_bomb(separator, prefix))
    assert path.stat().st_size < 200_000
    start = time.perf_counter()
    assert workbook.count_cells(str(path)) > workbook.MAX_CELLS
    assert time.perf_counter() - start < 3.0


def test_cell_count_is_exact(tmp_path):
    path = tmp_path / "book.xlsx"
    _answer_book(1).save(path)
    assert workbook.count_cells(str(path)) == sum(len(ws._cells) for ws in openpyxl.load_workbook(path))
    path.write_bytes(_cell_bomb("\n", cells=3000))
    assert workbook.count_cells(str(path)) == 3000


def test_check_for_officeqa_alone_exits_0(officeqa_dirs, monkeypatch):
    from envh_office.cli import office

    monkeypatch.delenv("SPREADSHEETBENCH_DATA", raising=False)
    result = CliRunner().invoke(office, ["check", "--officeqa-data", officeqa_dirs["data"], "--corpus",
                                         officeqa_dirs["corpus"], "--split-manifest", officeqa_dirs["split_manifest"]])
    assert result.exit_code == 0, result.output
    assert "officeqa:" in result.output and "spreadsheetbench" not in result.output

