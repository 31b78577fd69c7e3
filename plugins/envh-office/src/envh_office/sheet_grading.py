"""SpreadsheetBench's verdict: its cell-level comparison at ``answer_position``.

Both workbooks are opened with cached values (``data_only``) after LibreOffice
recalculation. Per cell, as the benchmark's ``evaluation.py`` does: numbers (and strings
that parse as numbers) are rounded to 2 decimals, times become ``HH:MM``, datetimes
become whole Excel serial days; ``None`` and ``""`` are equal; otherwise values must have
the same type and be equal; fill colours (foreground and background) and font colours
must agree on their RGB part (alpha ignored; no colour reads as ``00000000``). A missing
sheet fails. A test case passes when every range passes.
"""

from __future__ import annotations

import datetime
from typing import Any

import attrs

from .ranges import CellRange, RangeError, parse_answer_position

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


def compare_range(gold_wb: Any, got_wb: Any, rng: CellRange) -> CaseVerdict:
    sheet = rng.sheet if rng.sheet is not None else gold_wb.sheetnames[0]
    if sheet not in got_wb.sheetnames:
        return CaseVerdict(passed=False, reason=f"worksheet {sheet!r} not found")
    if sheet not in gold_wb.sheetnames:
        return CaseVerdict(passed=False, reason=f"worksheet {sheet!r} not in the golden workbook")
    gold_ws, got_ws = gold_wb[sheet], got_wb[sheet]
    for row, col in rng.cells():
        g, p = gold_ws.cell(row=row, column=col), got_ws.cell(row=row, column=col)
        if not values_equal(g.value, p.value):
            return CaseVerdict(passed=False, reason=f"value differs at {sheet}!{g.coordinate}")
        if not colours_equal(g, p):
            return CaseVerdict(passed=False, reason=f"fill or font colour differs at {sheet}!{g.coordinate}")
    return CaseVerdict(passed=True, reason="")


def compare_workbooks(gold_path: str, got_path: str, answer_position: str,
                      answer_sheet: str | None = None) -> CaseVerdict:
    """Compare two recalculated workbooks at ``answer_position`` (benchmark semantics)."""
    import openpyxl

    try:
        ranges = parse_answer_position(answer_position)
    except RangeError as exc:
        return CaseVerdict(passed=False, reason=f"bad answer_position: {exc}")
    if answer_sheet:
        ranges = [r if r.sheet is not None else attrs.evolve(r, sheet=answer_sheet) for r in ranges]
    try:
        gold = openpyxl.load_workbook(gold_path, data_only=True)
    except Exception as exc:  # noqa: BLE001 - the golden file is data; report, do not crash
        raise ValueError(f"golden workbook {gold_path} cannot be opened: {exc}") from exc
    try:
        got = openpyxl.load_workbook(got_path, data_only=True)
    except Exception as exc:  # noqa: BLE001 - a broken output fails its case, as in the benchmark
        return CaseVerdict(passed=False, reason=f"output workbook cannot be opened: {type(exc).__name__}")
    try:
        for rng in ranges:
            verdict = compare_range(gold, got, rng)
            if not verdict.passed:
                return verdict
    finally:
        gold.close()
        got.close()
    return CaseVerdict(passed=True, reason="")
