"""The golden workbook is graded by its cached values, as SpreadsheetBench's evaluator
reads it (``openpyxl.load_workbook(gold, data_only=True)``, never recalculated).

LibreOffice 7.4 cannot compute XLOOKUP, XMATCH, FILTER, SORT, UNIQUE, LET ...: recalculating
the golden file turned its right value into #NAME?, so an output holding garbage that also
gave #NAME? passed and the right value failed. Real LibreOffice, real episodes.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import openpyxl
import pytest
from envh import Action, TaskRef, errors

XLOOKUP = "=_xlfn.XLOOKUP(2,A1:A2,B1:B2)"


def _book(path: Path, c1: object = None) -> None:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sheet1"
    ws["A1"], ws["A2"], ws["B1"], ws["B2"] = 1, 2, 10, 20
    if c1 is not None:
        ws["C1"] = c1
    wb.save(path)


def _with_cached_c1(path: Path, cached: str) -> None:
    """Give C1's formula a cached value, as Excel saves it (openpyxl writes none)."""
    tmp = path.with_suffix(".tmp")
    path.rename(tmp)
    with zipfile.ZipFile(tmp) as zin, zipfile.ZipFile(path, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                text, n = re.subn(r'(<c r="C1"[^>]*>)(<f>.*?</f>)(?:<v>\s*</v>|<v\s*/>)?',
                                  lambda m: f"{m.group(1)}{m.group(2)}<v>{cached}</v>", data.decode())
                assert n == 1
                data = text.encode()
            zout.writestr(item, data)
    tmp.unlink()


@pytest.fixture(scope="module")
def golden_data(tmp_path_factory) -> str:
    """'xl': XLOOKUP with its cached 20; 'xl-bare': the same formula without a cached
    value; 'sum-bare': =SUM(A1:A2) without one (LibreOffice computes 3)."""
    root = tmp_path_factory.mktemp("golden")
    rows = []
    for tid, formula, cached in (("xl", XLOOKUP, "20"), ("xl-bare", XLOOKUP, None), ("sum-bare", "=SUM(A1:A2)", None)):
        folder = root / "spreadsheet" / tid
        folder.mkdir(parents=True)
        _book(folder / f"1_{tid}_input.xlsx")
        _book(folder / f"1_{tid}_answer.xlsx", formula)
        if cached is not None:
            _with_cached_c1(folder / f"1_{tid}_answer.xlsx", cached)
        rows.append({"id": tid, "instruction": "Look up 2 in A1:A2 and put its B value in C1.",
                     "spreadsheet_path": f"spreadsheet/{tid}", "instruction_type": "Cell-Level Manipulation",
                     "answer_position": "Sheet1!C1"})
    (root / "dataset.json").write_text(json.dumps(rows))
    return str(root)


def _graded(data: str, tid: str, c1: object):
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    with SpreadsheetBenchEnv(data) as env:
        env.reset(task=TaskRef(suite="spreadsheetbench", split="test", instance_id=tid), seed=0)
        env.step(Action(tool="write_range", args={"range": "Sheet1!C1", "values": c1}))
        return env.evaluate()


def test_golden_cached_value_is_graded_not_a_libreoffice_error(golden_data, soffice):
    assert openpyxl.load_workbook(Path(golden_data) / "spreadsheet/xl/1_xl_answer.xlsx",
                                  data_only=True)["Sheet1"]["C1"].value == 20
    assert _graded(golden_data, "xl", 20).success
    # garbage LibreOffice also turns into #NAME?: an error value never equals the golden 20
    garbage = _graded(golden_data, "xl", "=_xlfn.XLOOKUP(99,A1:A2,B1:B2)")
    assert not garbage.success and "C1" in garbage.metrics["failures"]["1"]
    assert not _graded(golden_data, "xl", "#NAME?").success


def test_uncached_golden_formula_takes_libreoffice_value(golden_data, soffice):
    assert _graded(golden_data, "sum-bare", 3).success
    assert _graded(golden_data, "sum-bare", "=A1+A2").success
    assert not _graded(golden_data, "sum-bare", 4).success


def test_uncached_golden_formula_libreoffice_cannot_compute_is_set_aside(golden_data, soffice):
    with pytest.raises(errors.EnvError, match=r"set aside.*Sheet1!C1 = #NAME\?"):
        _graded(golden_data, "xl-bare", 20)
