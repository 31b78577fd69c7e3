"""A1 references: ``B3``, ``A1:C9``, ``Sheet1!A1:B2``, ``'My sheet'!C4`` and lists of them."""

from __future__ import annotations

import re

import attrs

_CELL = re.compile(r"^\$?([A-Za-z]{1,3})\$?(\d{1,7})$")
MAX_COL = 16384
MAX_ROW = 1048576


class RangeError(ValueError):
    """A reference that cannot be parsed or lies off the sheet; the message is shown."""


def col_number(letters: str) -> int:
    n = 0
    for ch in letters.upper():
        n = n * 26 + ord(ch) - 64
    return n


def col_letters(n: int) -> str:
    out = ""
    while n > 0:
        n, rem = divmod(n - 1, 26)
        out = chr(65 + rem) + out
    return out


@attrs.frozen
class CellRange:
    """A rectangle on one sheet (``sheet`` None: the workbook's first sheet)."""

    sheet: str | None
    min_col: int
    min_row: int
    max_col: int
    max_row: int

    @property
    def size(self) -> int:
        return (self.max_col - self.min_col + 1) * (self.max_row - self.min_row + 1)

    @property
    def ref(self) -> str:
        a = f"{col_letters(self.min_col)}{self.min_row}"
        b = f"{col_letters(self.max_col)}{self.max_row}"
        return a if a == b else f"{a}:{b}"

    def __str__(self) -> str:
        return self.ref if self.sheet is None else f"'{self.sheet}'!{self.ref}"

    def cells(self) -> list[tuple[int, int]]:
        """(row, col) pairs, row by row."""
        return [(r, c) for r in range(self.min_row, self.max_row + 1) for c in range(self.min_col, self.max_col + 1)]

    def rows(self) -> list[list[tuple[int, int]]]:
        return [[(r, c) for c in range(self.min_col, self.max_col + 1)] for r in range(self.min_row, self.max_row + 1)]


def _cell(text: str, whole: str) -> tuple[int, int]:
    m = _CELL.match(text.strip())
    if not m:
        raise RangeError(f"{whole[:100]!r} is not a cell reference like A1 or Sheet1!A1:C9.")
    col, row = col_number(m.group(1)), int(m.group(2))
    if not (1 <= col <= MAX_COL and 1 <= row <= MAX_ROW):
        raise RangeError(f"{whole[:100]!r} lies outside a worksheet (XFD1048576 is the last cell).")
    return col, row


def parse_range(text: str) -> CellRange:
    """Parse ``[sheet!]A1[:B2]``; a quoted sheet name may contain '!' and spaces."""
    whole = text.strip()
    sheet: str | None = None
    ref = whole
    if "!" in whole:
        sheet, _, ref = whole.rpartition("!")
        sheet = sheet.strip()
        if len(sheet) >= 2 and sheet[0] == sheet[-1] == "'":
            sheet = sheet[1:-1].replace("''", "'")
        if not sheet:
            raise RangeError(f"{whole[:100]!r} names an empty sheet.")
    ref = ref.strip().strip("'")
    a, _, b = ref.partition(":")
    c1, r1 = _cell(a, whole)
    c2, r2 = _cell(b, whole) if b else (c1, r1)
    return CellRange(sheet, min(c1, c2), min(r1, r2), max(c1, c2), max(r1, r2))


def parse_answer_position(text: str) -> list[CellRange]:
    """The benchmark's ``answer_position``: comma-separated ranges, each maybe on a sheet."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise RangeError("answer_position is empty")
    return [parse_range(p) for p in parts]
