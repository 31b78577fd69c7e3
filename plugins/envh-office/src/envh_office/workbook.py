"""Native workbook tools: openpyxl in the host process, on the episode's work file.

They run no policy code, only parse the workbook, so they need no container; a workbook
that ``run_python`` produced is checked before openpyxl opens it (a regular file, a zip
whose parts stay under a size cap: no zip bombs). Edits are transactional: the new
workbook is written to a temporary file, reopened, and only then replaces the work file;
any failure leaves the old file untouched.
"""

from __future__ import annotations

import datetime
import os
import re
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import re2

from .ranges import CellRange, RangeError, col_letters, parse_range

MAX_FILE_BYTES = 32 << 20
MAX_UNZIPPED_BYTES = 256 << 20
MAX_CELLS = 500_000         # per workbook coming back from run_python: openpyxl holds every cell
MAX_INSPECT_CELLS = 2000
MAX_WRITE_CELLS = 20000
MAX_FIND_HITS = 100
CELL_CHARS = 200
ERROR_VALUES = ("#REF!", "#NAME?", "#DIV/0!", "#VALUE!", "#N/A", "#NUM!", "#NULL!")


class WorkbookError(Exception):
    """A tool request that cannot be served (bad range, bad value, corrupt workbook)."""


def check_file(path: str) -> None:
    """Refuse what must not reach openpyxl: non-regular files, huge files, zip bombs."""
    try:
        st = os.lstat(path)
    except FileNotFoundError as exc:
        raise WorkbookError("The workbook file is missing (was it deleted or renamed?).") from exc
    if not stat.S_ISREG(st.st_mode):
        raise WorkbookError("The workbook is not a regular file (a link or a folder); refused.")
    if st.st_size > MAX_FILE_BYTES:
        raise WorkbookError(f"The workbook is {st.st_size} bytes; the limit is {MAX_FILE_BYTES}.")
    try:
        with zipfile.ZipFile(path) as z:
            total = sum(i.file_size for i in z.infolist())
            names = set(z.namelist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise WorkbookError(f"The workbook is corrupt (not an xlsx zip): {exc}") from exc
    if total > MAX_UNZIPPED_BYTES:
        raise WorkbookError(f"The workbook unpacks to {total} bytes; the limit is {MAX_UNZIPPED_BYTES}.")
    if "xl/workbook.xml" not in names:
        raise WorkbookError("The workbook is corrupt: it has no xl/workbook.xml part.")


# a cell's start tag: '<', an optional namespace prefix, 'c', then XML whitespace, '/' or '>'
_CELL_TAG = re.compile(rb"<(?:[^\s<>/:!?]+:)?c[ \t\r\n/>]")
_TAIL_LIMIT = 1 << 16


def count_cells(path: str, cap: int = MAX_CELLS) -> int:
    """Cell start tags in every part of the workbook (``<c ``, ``<c>``, ``<c\n``, ``<c/>``,
    ``<x:c r="A1">``: any prefix, any whitespace), streamed; stops past ``cap``. Tags in
    comments count too: over-counting only refuses sooner."""
    total = 0
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():  # every part: a worksheet may live under any name the rels give
            tail = b""
            with z.open(name) as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    data = tail + chunk
                    cut = data.rfind(b"<")  # a tag cut by the chunk boundary waits for the next chunk
                    if cut < 0 or len(data) - cut > _TAIL_LIMIT:
                        cut = len(data)
                    total += len(_CELL_TAG.findall(data, 0, cut))
                    tail = data[cut:]
                    if total > cap:
                        return total
                total += len(_CELL_TAG.findall(tail + b" "))
                if total > cap:
                    return total
    return total


def load(path: str, *, data_only: bool = False) -> Any:
    import openpyxl

    check_file(path)
    # Our own handle: openpyxl leaves its zip open when parsing fails.
    with open(path, "rb") as f:
        try:
            return openpyxl.load_workbook(f, data_only=data_only)
        except Exception as exc:  # noqa: BLE001 - any parse failure means a corrupt workbook
            raise WorkbookError(f"The workbook is corrupt and cannot be opened: {type(exc).__name__}: "
                                f"{str(exc)[:300]}") from exc


def _sheet(wb: Any, rng: CellRange) -> Any:
    if rng.sheet is None:
        return wb.worksheets[0]
    if rng.sheet not in wb.sheetnames:
        raise WorkbookError(f"No sheet {rng.sheet!r}. Sheets: {', '.join(wb.sheetnames)}.")
    return wb[rng.sheet]


def _range(text: str, limit: int) -> CellRange:
    try:
        rng = parse_range(text)
    except RangeError as exc:
        raise WorkbookError(str(exc)) from exc
    if rng.size > limit:
        raise WorkbookError(f"{text[:100]!r} spans {rng.size} cells; at most {limit} per call.")
    return rng


def _show(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, datetime.datetime):
        text = v.isoformat(sep=" ")
    else:
        text = str(v)
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS] + "…"


def sheets_of(wb: Any) -> list[dict[str, Any]]:
    return [{"name": ws.title, "dimensions": ws.dimensions, "max_row": ws.max_row, "max_column": ws.max_column}
            for ws in wb.worksheets]


def list_sheets(path: str) -> list[dict[str, Any]]:
    wb = load(path)
    try:
        return sheets_of(wb)
    finally:
        wb.close()


def inspect_range(path: str, text: str, values_path: str | None = None) -> str:
    """One line per cell with content: ``A1 = value`` or ``A3 = =A1*2 → 6`` (the value
    after the last recalculation, when ``values_path`` holds one)."""
    rng = _range(text, MAX_INSPECT_CELLS)
    wb = load(path)
    vals = load(values_path, data_only=True) if values_path else None
    try:
        ws = _sheet(wb, rng)
        vws = vals[ws.title] if vals is not None and ws.title in vals.sheetnames else None
        lines = []
        for row, col in rng.cells():
            v = ws.cell(row=row, column=col).value
            if v is None:
                continue
            ref = f"{col_letters(col)}{row}"
            if isinstance(v, str) and v.startswith("="):
                shown = _show(vws.cell(row=row, column=col).value) if vws is not None else "(not recalculated)"
                lines.append(f"{ref} = {_show(v)} → {shown}")
            else:
                lines.append(f"{ref} = {_show(v)!s}")
        head = f"{ws.title}!{rng.ref}: {len(lines)} non-empty of {rng.size} cell(s)"
        return head + (":\n" + "\n".join(lines) if lines else ".")
    finally:
        wb.close()
        if vals is not None:
            vals.close()


def find_cells(path: str, pattern: str, ignore_case: bool = False) -> tuple[str, int]:
    """Cells whose shown value or formula matches an RE2 pattern, across sheets."""
    if not pattern or len(pattern) > 1000:
        raise WorkbookError("The pattern must have 1 to 1000 characters.")
    options = re2.Options()
    options.max_mem = 16 << 20
    options.case_sensitive = not ignore_case
    options.log_errors = False
    try:
        regex = re2.compile(pattern, options)
    except re2.error as exc:
        raise WorkbookError(f"Invalid or unsupported pattern {pattern[:100]!r} (RE2 syntax).") from exc
    wb = load(path)
    hits: list[str] = []
    more = False
    try:
        for ws in wb.worksheets:
            for row in ws.iter_rows():
                for cell in row:
                    if cell.value is None or not regex.search(_show(cell.value)):
                        continue
                    if len(hits) == MAX_FIND_HITS:
                        more = True
                        break
                    hits.append(f"{ws.title}!{cell.coordinate} = {_show(cell.value)}")
                if more:
                    break
            if more:
                break
    finally:
        wb.close()
    tail = f"\n[stopped at {MAX_FIND_HITS} cells; narrow the pattern]" if more else ""
    return (f"{len(hits)} cell(s) match {pattern!r}" + (":\n" + "\n".join(hits) if hits else ".") + tail), len(hits)


def _shape(values: Any, rng: CellRange) -> list[list[Any]]:
    rows, cols = rng.max_row - rng.min_row + 1, rng.max_col - rng.min_col + 1
    if not isinstance(values, list):
        return [[values] * cols for _ in range(rows)]
    if values and not isinstance(values[0], list):  # a flat list fills one row or one column
        if rows == 1 and len(values) == cols:
            return [list(values)]
        if cols == 1 and len(values) == rows:
            return [[v] for v in values]
        raise WorkbookError(f"{len(values)} values do not fit {rng.ref} ({rows} x {cols}); "
                            "give a list of rows.")
    if len(values) != rows or any(not isinstance(r, list) or len(r) != cols for r in values):
        raise WorkbookError(f"The values must be {rows} row(s) of {cols} value(s) for {rng.ref}.")
    return values


def _cell_value(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, str):
        if len(v) > 32767:
            raise WorkbookError("A cell holds at most 32767 characters.")
        return v
    raise WorkbookError(f"Cell values must be strings, numbers, booleans or null, got {type(v).__name__}.")


def _colour(value: str | None) -> str | None:
    if value is None:
        return None
    hexpart = value.strip().lstrip("#").upper()
    if len(hexpart) == 6:
        hexpart = "FF" + hexpart
    if len(hexpart) != 8 or any(c not in "0123456789ABCDEF" for c in hexpart):
        raise WorkbookError(f"Colours are hex RGB like 'FFFF00' or '#FF0000', got {value[:20]!r}.")
    return hexpart


@contextmanager
def transaction(path: str) -> Iterator[Any]:
    """Open the work file for editing; on success the saved result replaces it atomically."""
    wb = load(path)
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".edit-", suffix=".xlsx", dir=directory)
    os.close(fd)
    try:
        try:
            yield wb
        except WorkbookError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. openpyxl refusing a control character
            raise WorkbookError(f"The edit was refused: {type(exc).__name__}: {str(exc)[:300]}") from exc
        try:
            wb.save(tmp)
        except Exception as exc:  # noqa: BLE001 - e.g. an illegal character in a value
            raise WorkbookError(f"The edit cannot be saved: {type(exc).__name__}: {str(exc)[:300]}") from exc
        load(tmp).close()  # the result must open again, or nothing changes
        os.replace(tmp, path)
    finally:
        wb.close()
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_range(path: str, text: str, values: Any = None, *, fill_color: str | None = None,
                font_color: str | None = None, create_sheet: bool = False) -> tuple[int, list[dict[str, Any]]]:
    """Write values (a scalar, a row, a column or rows; strings starting with '=' are
    formulas) and/or colours to a range. Returns the cells written and the sheets after."""
    from openpyxl.styles import Font, PatternFill

    rng = _range(text, MAX_WRITE_CELLS)
    fill, font = _colour(fill_color), _colour(font_color)
    grid = None if values is None else [[_cell_value(v) for v in row] for row in _shape(values, rng)]
    if grid is None and fill is None and font is None:
        raise WorkbookError("Nothing to write: give values, fill_color or font_color.")
    with transaction(path) as wb:
        if create_sheet and rng.sheet is not None and rng.sheet not in wb.sheetnames:
            if len(rng.sheet) > 31 or any(ch in rng.sheet for ch in "[]:*?/\\"):
                raise WorkbookError(f"{rng.sheet[:40]!r} is not a valid sheet name (31 characters, no []:*?/\\).")
            wb.create_sheet(rng.sheet)
        ws = _sheet(wb, rng)
        for i, row in enumerate(rng.rows()):
            for j, (r, c) in enumerate(row):
                cell = ws.cell(row=r, column=c)
                if grid is not None:
                    cell.value = grid[i][j]
                if fill is not None:
                    cell.fill = PatternFill(fill_type="solid", fgColor=fill, bgColor=fill)
                if font is not None:
                    cell.font = Font(name=cell.font.name, size=cell.font.size, bold=cell.font.bold,
                                     italic=cell.font.italic, color=font)
        sheets = sheets_of(wb)
    return rng.size, sheets


def validate(path: str, values_path: str | None) -> tuple[bool, list[str]]:
    """(ok, problems): the workbook opens, and no formula or recalculated value is an
    Excel error (#REF!, #NAME?, #DIV/0!, ...)."""
    problems: list[str] = []
    try:
        wb = load(path)
    except WorkbookError as exc:
        return False, [str(exc)]
    try:
        for ws in wb.worksheets:
            for row in ws.iter_rows():
                for cell in row:
                    v = cell.value
                    if isinstance(v, str) and v.startswith("=") and "#REF!" in v:
                        problems.append(f"{ws.title}!{cell.coordinate}: formula refers to #REF!")
    finally:
        wb.close()
    if values_path:
        vals = load(values_path, data_only=True)
        try:
            for ws in vals.worksheets:
                for row in ws.iter_rows():
                    for cell in row:
                        if isinstance(cell.value, str) and cell.value.strip() in ERROR_VALUES:
                            problems.append(f"{ws.title}!{cell.coordinate}: {cell.value.strip()}")
        finally:
            vals.close()
    return not problems, problems[:50] + ([f"... and {len(problems) - 50} more"] if len(problems) > 50 else [])
