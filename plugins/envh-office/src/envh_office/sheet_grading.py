"""SpreadsheetBench's verdict: its cell-level comparison at ``answer_position``.

Ported from github.com/RUCKBReasoning/SpreadsheetBench ``evaluation/evaluation.py`` at
commit 6e07492b07599d4a3fdb1f96374d688c4fcf880c. Both workbooks are opened with cached
values (``data_only``): the golden file as the dataset ships it (never recalculated, as
upstream), the output after LibreOffice recalculation. A golden formula cell without a
cached value takes the value LibreOffice computes for it (``fills``; the verifier sets
the task aside when that is an error value). Per cell: numbers (and strings
that parse as numbers) are rounded to 2 decimals, times become ``HH:MM``, datetimes
become whole Excel serial days; ``None`` and ``""`` are equal; otherwise values must have
the same type and be equal. Colours are not compared: the benchmark commented its fill
and font checks out. ``answer_position`` is read as the benchmark reads it
(``sheet_position``: split at commas, quotes stripped, no sheet = the golden workbook's
first sheet). A missing sheet fails. A test case passes when every part passes.
"""

from __future__ import annotations

import datetime
from typing import Any

import attrs

from . import sheet_position
from .sheet_position import Part
from .workbook import ERROR_VALUES

_EXCEL_EPOCH = datetime.datetime(1899, 12, 30)


@attrs.frozen(kw_only=True)
class CaseVerdict:
    passed: bool
    reason: str


def transform_value(v: Any) -> Any:
    if isinstance(v, (int, float)):
        return round(float(v), 2)
    if isinstance(v, datetime.datetime):
        delta = v - _EXCEL_EPOCH
        return round(delta.days + delta.seconds / 86400.0, 0)
    if isinstance(v, datetime.time):
        return str(v)[:-3]
    if isinstance(v, str):
        try:
            return round(float(v), 2)
        except ValueError:
            return v
    return v


def values_equal(gold: Any, got: Any) -> bool:
    a, b = transform_value(gold), transform_value(got)
    if a in ("", None) and b in ("", None):
        return True
    return type(a) is type(b) and a == b


def _rgb(color: Any) -> str:
    """The RGB part of a colour; a theme or indexed colour by its reference (openpyxl's
    ``rgb`` of those is a fixed error string, so two different theme colours would agree)."""
    if color is None:
        return "000000"
    kind = getattr(color, "type", "rgb")
    if kind == "theme":
        return f"theme:{color.theme}:{round(float(color.tint or 0), 4)}"
    if kind == "indexed":
        return f"indexed:{color.indexed}"
    rgb = getattr(color, "rgb", None)
    return rgb[-6:] if isinstance(rgb, str) else "000000"


def colours_equal(gold_cell: Any, got_cell: Any) -> bool:
    gf, pf = gold_cell.fill, got_cell.fill
    return (_rgb(gf.fgColor) == _rgb(pf.fgColor) and _rgb(gf.bgColor) == _rgb(pf.bgColor)
            and _rgb(gold_cell.font.color) == _rgb(got_cell.font.color))


Fills = dict[tuple[str, str], Any]  # (sheet, cell name) -> golden value for an uncached formula


def _is_formula(value: Any) -> bool:
    return (isinstance(value, str) and value.startswith("=")) or type(value).__name__ in (
        "ArrayFormula", "DataTableFormula")


def uncached_formulas(gold_path: str, answer_position: str) -> list[tuple[str, str]]:
    """The golden answer cells holding a formula with no cached value (``(sheet, name)``):
    the benchmark reads None there, a value the golden file never meant."""
    import openpyxl

    try:
        found = sheet_position.parts(answer_position)
    except sheet_position.PositionError:
        return []
    formulas = openpyxl.load_workbook(gold_path)
    cached = openpyxl.load_workbook(gold_path, data_only=True)
    out = []
    try:
        for part in found:
            sheet = part.sheet if part.sheet is not None else formulas.sheetnames[0]
            if sheet not in formulas.sheetnames:
                continue
            for name in part.names:
                try:
                    if _is_formula(formulas[sheet][name].value) and cached[sheet][name].value is None:
                        out.append((sheet, name))
                except (KeyError, ValueError, IndexError, AttributeError, TypeError):
                    continue  # the comparison reports a name it cannot index
    finally:
        formulas.close()
        cached.close()
    return out


def cell_values(path: str, cells: list[tuple[str, str]]) -> Fills:
    """The cached values of ``cells`` in a (recalculated) workbook."""
    import openpyxl

    wb = openpyxl.load_workbook(path, data_only=True)
    try:
        return {(sheet, name): wb[sheet][name].value if sheet in wb.sheetnames else None for sheet, name in cells}
    finally:
        wb.close()


def is_error_value(value: Any) -> bool:
    """An Excel error value as openpyxl reads a cached one (``#NAME?``, ``#VALUE!``, ...)."""
    return isinstance(value, str) and value.strip() in ERROR_VALUES


def compare_part(gold_wb: Any, got_wb: Any, part: Part, fills: Fills | None = None) -> CaseVerdict:
    """The benchmark's ``cell_level_compare``: values only (its colour checks are commented
    out upstream); a sheet missing from the output fails, and ``ws[name]`` is indexed as
    the benchmark indexes it (an error there fails the case, as its bare ``except`` does)."""
    sheet = part.sheet if part.sheet is not None else gold_wb.sheetnames[0]
    if sheet not in got_wb.sheetnames:
        return CaseVerdict(passed=False, reason=f"worksheet {sheet!r} not found")
    try:
        gold_ws, got_ws = gold_wb[sheet], got_wb[sheet]
        for name in part.names:
            g, p = gold_ws[name], got_ws[name]
            gold_value = fills[(sheet, name)] if fills and (sheet, name) in fills else g.value
            if not values_equal(gold_value, p.value):
                return CaseVerdict(passed=False, reason=f"value differs at {sheet}!{g.coordinate}")
    except (KeyError, ValueError, IndexError, AttributeError, TypeError) as exc:
        return CaseVerdict(passed=False, reason=f"the benchmark's evaluator fails here: {type(exc).__name__}: "
                                                f"{str(exc)[:200]}")
    return CaseVerdict(passed=True, reason="")


def compare_workbooks(gold_path: str, got_path: str, answer_position: str, fills: Fills | None = None) -> CaseVerdict:
    """Compare the golden workbook's cached values (``fills`` in place of uncached golden
    formulas) with a recalculated output at ``answer_position`` as ``evaluation.py`` does.

    A golden workbook that does not open raises ``ValueError`` (the dataset's fault); an
    output that does not open fails its case."""
    import openpyxl

    try:
        found = sheet_position.parts(answer_position)
    except sheet_position.PositionError as exc:
        return CaseVerdict(passed=False, reason=f"answer_position the benchmark cannot grade: {exc}")
    try:
        gold = openpyxl.load_workbook(gold_path, data_only=True)
    except Exception as exc:  # noqa: BLE001 - the golden file is data; report, do not crash
        raise ValueError(f"golden workbook {gold_path} cannot be opened: {exc}") from exc
    try:
        got = openpyxl.load_workbook(got_path, data_only=True)
    except Exception as exc:  # noqa: BLE001 - a broken output fails its case, as in the benchmark
        gold.close()
        return CaseVerdict(passed=False, reason=f"output workbook cannot be opened: {type(exc).__name__}")
    try:
        for part in found:
            verdict = compare_part(gold, got, part, fills)
            if not verdict.passed:
                return verdict
    finally:
        gold.close()
        got.close()
    return CaseVerdict(passed=True, reason="")
