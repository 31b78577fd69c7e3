"""Native workbook tools: openpyxl in the host process, on the episode's work file.

They run no policy code, only parse the workbook, so they need no container; a workbook
that ``run_python`` produced is checked before openpyxl opens it (a regular file, a zip
whose parts stay under a size cap: no zip bombs; every XML part in UTF-8 with no document
type declaration, and no more cells, shared strings, rows, style records or elements than
openpyxl can hold: ``census``). Edits are transactional: the new
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

import attrs
import re2

from .ranges import CellRange, RangeError, col_letters, parse_range

MAX_FILE_BYTES = 32 << 20
MAX_UNZIPPED_BYTES = 256 << 20
MAX_CELLS = 500_000         # per workbook coming back from run_python: openpyxl holds every cell
MAX_INSPECT_CELLS = 2000
MAX_WRITE_CELLS = 20000
MAX_FIND_HITS = 100
CELL_CHARS = 200
# Excel's error values as a cached value reads (LibreOffice's own Err:5xx codes too)
ERROR_VALUES = ("#REF!", "#NAME?", "#DIV/0!", "#VALUE!", "#N/A", "#NUM!", "#NULL!", "#SPILL!", "#CALC!",
                "#GETTING_DATA", "#FIELD!", "#BLOCKED!", "#CONNECT!", "#BUSY!", "#UNKNOWN!", "Err:502", "Err:504",
                "Err:508", "Err:509", "Err:511", "Err:512", "Err:522", "Err:523")


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
# the start tags openpyxl turns into objects one by one, by local name (any prefix)
_COUNTED_TAG = re.compile(rb"<(?:[^\s<>/:!?]+:)?(c|si|row|xf|font|fill|border|numFmt|dxf)[ \t\r\n/>]")
# elements whose ``ref`` range openpyxl fills cell by cell (a merged range, a hyperlinked range)
_RANGE_TAG = re.compile(rb"<(?:[^\s<>/:!?]+:)?(?:mergeCell|hyperlink)[ \t\r\n][^<>]*?\bref\s*=\s*[\"']([^\"'<>]*)[\"']")
_RANGE_START = re.compile(rb"<(?:[^\s<>/:!?]+:)?(?:mergeCell|hyperlink)[ \t\r\n]")
_DOCTYPE = re.compile(rb"<!(?:DOCTYPE|ENTITY)", re.IGNORECASE)
_ENCODING = re.compile(rb"\bencoding\s*=\s*[\"']([^\"']*)[\"']")
# what an XML parser reads as another encoding: BOMs and the UTF-16/32 and EBCDIC forms of '<'
_FOREIGN_STARTS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff", b"\x00\x00\x00<", b"<\x00", b"\x00<",
                   b"\x4c\x6f\xa7\x94", b"\x2b\x2f\x76", b"\xdd\x73\x66\x73", b"\x0e\xfe\xff", b"\xfb\xee\x28")
_UTF8 = (b"utf-8", b"utf8", b"us-ascii", b"ascii")
_TAIL_LIMIT = 1 << 16
MAX_SHARED_STRINGS = MAX_CELLS  # <si>: openpyxl holds every shared string
MAX_ROWS = MAX_CELLS            # <row>: a row dimension each
MAX_STYLES = 300_000            # <xf>, <font>, <fill>, <border>, <numFmt>, <dxf>: a style object each
MAX_ELEMENTS = 8 * MAX_CELLS    # every start tag: anything else openpyxl parses
_STYLE_TAGS = (b"xf", b"font", b"fill", b"border", b"numFmt", b"dxf")


@attrs.frozen(kw_only=True)
class Census:
    """What a workbook's parts would make openpyxl build: cells (those written plus those
    merged and hyperlinked ranges fill), shared strings, rows, style records, elements."""

    cells: int
    shared_strings: int
    rows: int
    styles: int
    elements: int


def _range_area(ref: bytes) -> int:
    """Cells an ``A1:C3`` range covers (a single cell or an unreadable ref: 1)."""
    from openpyxl.utils.cell import range_boundaries

    total = 0
    for piece in ref.decode("ascii", "replace").split():
        try:
            min_col, min_row, max_col, max_row = range_boundaries(piece)
        except (ValueError, TypeError):
            total += 1
            continue
        if None in (min_col, min_row, max_col, max_row):  # 'A:A', '1:1': the whole sheet's extent
            return 1 << 34
        total += (max_col - min_col + 1) * (max_row - min_row + 1)
    return total


def _check_encoding(name: str, head: bytes) -> bool:
    """Whether the part is XML (it starts with '<' after a UTF-8 BOM and spaces); refuses
    one in any other encoding, which the cell count (over UTF-8 bytes) would not see."""
    if head.startswith(_FOREIGN_STARTS):
        raise WorkbookError(f"The workbook part {name} is not UTF-8 (a UTF-16/32 or other byte order mark "
                            "or encoding); refused.")
    body = (head[3:] if head.startswith(b"\xef\xbb\xbf") else head).lstrip(b" \t\r\n")
    if not body.startswith(b"<"):
        return False  # a picture or another binary part
    if body.startswith(b"<?xml"):
        end = body.find(b"?>")
        if end < 0:
            raise WorkbookError(f"The workbook part {name} has an XML declaration over {len(head)} bytes; refused.")
        decl = _ENCODING.search(body, 0, end)
        if decl is not None and decl.group(1).lower() not in _UTF8:
            raise WorkbookError(f"The workbook part {name} declares encoding "
                                f"{decl.group(1)[:40].decode('ascii', 'replace')!r}; only UTF-8 is accepted.")
    return True


def census(path: str, cap: int = MAX_CELLS) -> Census:
    """Count, streamed over every part, what openpyxl would build; refuse (``WorkbookError``)
    a part in an encoding other than UTF-8 or with a document type declaration (internal
    entities multiply cells past any count of the bytes). Stops early once any count is
    past its cap. Tags in comments count too: over-counting only refuses sooner."""
    counts = {"cells": 0, "si": 0, "row": 0, "styles": 0, "elements": 0}

    def tally(data: bytes, end: int) -> None:
        if _DOCTYPE.search(data, 0, end):
            raise WorkbookError(f"The workbook part {name} has a document type or entity declaration; refused.")
        for tag in _COUNTED_TAG.findall(data, 0, end):
            key = "cells" if tag == b"c" else "styles" if tag in _STYLE_TAGS else tag.decode()
            counts[key] += 1
        counts["cells"] += sum(_range_area(m.group(1)) for m in _RANGE_TAG.finditer(data, 0, end))
        view = data[:end]
        counts["elements"] += view.count(b"<") - view.count(b"</") - view.count(b"<?") - view.count(b"<!")

    def over() -> bool:
        return (counts["cells"] > cap or counts["si"] > MAX_SHARED_STRINGS or counts["row"] > MAX_ROWS
                or counts["styles"] > MAX_STYLES or counts["elements"] > MAX_ELEMENTS)

    with zipfile.ZipFile(path) as z:
        for name in z.namelist():  # every part: a worksheet may live under any name the rels give
            with z.open(name) as f:
                tail, first = b"", True
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    if first and not _check_encoding(name, chunk[:512]):
                        break
                    first = False
                    data = tail + chunk
                    cut = data.rfind(b"<")  # a tag cut by the chunk boundary waits for the next chunk
                    if cut >= 0 and len(data) - cut > _TAIL_LIMIT and _RANGE_START.match(data, cut):
                        raise WorkbookError(f"The workbook part {name} has a merged or hyperlinked range tag "
                                            f"over {_TAIL_LIMIT} bytes; refused.")
                    if cut < 0 or len(data) - cut > _TAIL_LIMIT:
                        cut = len(data)
                    tally(data, cut)
                    tail = data[cut:]
                    if over():
                        break
                else:
                    tally(tail + b" ", len(tail) + 1)
            if over():
                break
    return Census(cells=counts["cells"], shared_strings=counts["si"], rows=counts["row"], styles=counts["styles"],
                  elements=counts["elements"])


def count_cells(path: str, cap: int = MAX_CELLS) -> int:
    """Cells openpyxl would hold: ``<c`` start tags (``<c ``, ``<c>``, ``<c\n``, ``<c/>``,
    ``<x:c r="A1">``: any prefix, any whitespace) plus the cells of merged and hyperlinked
    ranges; stops past ``cap``. Raises ``WorkbookError`` as ``census`` does."""
    return census(path, cap).cells


def check_contents(path: str) -> None:
    """Refuse a workbook whose parts would make openpyxl build too much (``census``)."""
    found = census(path)
    limits = (("cells", found.cells, MAX_CELLS), ("shared strings", found.shared_strings, MAX_SHARED_STRINGS),
              ("rows", found.rows, MAX_ROWS), ("style records", found.styles, MAX_STYLES),
              ("XML elements", found.elements, MAX_ELEMENTS))
    for what, count, limit in limits:
        if count > limit:
            raise WorkbookError(f"The workbook holds more than {limit} {what}; refused.")


_CHECKED: dict[tuple[int, int, int, int, int], None] = {}  # files that passed check_contents, by identity


def _check_contents_once(path: str) -> None:
    """``check_contents``, skipped for a file already checked and not changed since."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    if key in _CHECKED:
        return
    check_contents(path)
    if len(_CHECKED) >= 1024:
        _CHECKED.clear()
    _CHECKED[key] = None


def load(path: str, *, data_only: bool = False) -> Any:
    import openpyxl

    check_file(path)
    _check_contents_once(path)
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


def stored_cells(ws: Any) -> list[Any]:
    """The cells a worksheet holds, row by row. ``iter_rows()`` would create every cell of
    the used rectangle: two cells at A1 and XFD1048576 are 17 billion."""
    return [ws._cells[key] for key in sorted(ws._cells)]


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
            for cell in stored_cells(ws):
                if cell.value is None or not regex.search(_show(cell.value)):
                    continue
                if len(hits) == MAX_FIND_HITS:
                    more = True
                    break
                hits.append(f"{ws.title}!{cell.coordinate} = {_show(cell.value)}")
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
            for cell in stored_cells(ws):
                v = cell.value
                if isinstance(v, str) and v.startswith("=") and "#REF!" in v:
                    problems.append(f"{ws.title}!{cell.coordinate}: formula refers to #REF!")
    finally:
        wb.close()
    if values_path:
        vals = load(values_path, data_only=True)
        try:
            for ws in vals.worksheets:
                for cell in stored_cells(ws):
                    if isinstance(cell.value, str) and cell.value.strip() in ERROR_VALUES:
                        problems.append(f"{ws.title}!{cell.coordinate}: {cell.value.strip()}")
        finally:
            vals.close()
    return not problems, problems[:50] + ([f"... and {len(problems) - 50} more"] if len(problems) > 50 else [])
