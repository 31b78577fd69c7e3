"""``answer_position`` read exactly as SpreadsheetBench's ``evaluation.py`` reads it.

Source: github.com/RUCKBReasoning/SpreadsheetBench ``evaluation/evaluation.py`` at commit
6e07492b07599d4a3fdb1f96374d688c4fcf880c (``compare_workbooks``, ``generate_cell_names``,
``parse_cell_range``, ``col_name2num``, ``col_num2name``). The benchmark splits the text at
every ``,`` (a quoted sheet name with a comma is cut apart), splits each part at ``!``,
strips every leading and trailing ``'`` from the sheet and the range (so unbalanced quotes
go too), takes the golden workbook's first sheet when no sheet is named, and indexes each
generated cell name with openpyxl (``ws[name]``). Whatever raises there — ``A:G`` (no row),
``G12：J15`` (a full-width colon), a part with two ``!``, a name that is not one cell —
makes the benchmark score every test case of the task 0.

``problem()`` predicts those failures without a workbook, so such a task is set aside
with its reason instead of failing the whole dataset; ``parts()`` gives what the grader
indexes.
"""

from __future__ import annotations

import attrs

MAX_POSITION_CELLS = 1_000_000  # the benchmark would list every name; past this it is not gradable here


class PositionError(ValueError):
    """An ``answer_position`` the benchmark's evaluator cannot grade; the message says why."""


@attrs.frozen(kw_only=True)
class Part:
    """One comma-separated part: its sheet (``None``: the golden workbook's first) and the
    cell names the benchmark compares, in its order (column by column)."""

    sheet: str | None
    names: tuple[str, ...]


def _col_number(name: str) -> int:
    num = 0
    for c in name:
        num = num * 26 + (ord(c) - ord("A") + 1)
    return num


def _col_name(n: int) -> str:
    name = ""
    while n > 0:
        n, rem = divmod(n - 1, 26)
        name = chr(65 + rem) + name
    return name


def _split_cell(cell: str) -> tuple[str, str]:
    col = "".join(ch for ch in cell if not ch.isdigit())
    row = "".join(ch for ch in cell if ch.isdigit())
    return col, row


def cell_names(cell_range: str) -> tuple[str, ...]:
    """The benchmark's ``generate_cell_names``: ``A1:B2`` → A1, A2, B1, B2 (column-major)."""
    if ":" not in cell_range:
        return (cell_range,)
    pieces = cell_range.split(":")
    if len(pieces) != 2:
        raise PositionError(f"{cell_range!r} has {len(pieces) - 1} ':' (the benchmark unpacks two cells)")
    (c1, r1), (c2, r2) = _split_cell(pieces[0]), _split_cell(pieces[1])
    try:
        row1, row2 = int(r1), int(r2)
    except ValueError:
        raise PositionError(f"{cell_range!r} has a cell without a row number (the benchmark reads "
                            "whole-column ranges as int(''))") from None
    n1, n2 = _col_number(c1), _col_number(c2)
    count = max(0, n2 - n1 + 1) * max(0, row2 - row1 + 1)
    if count > MAX_POSITION_CELLS:
        raise PositionError(f"{cell_range!r} spans {count} cells (at most {MAX_POSITION_CELLS} are graded)")
    return tuple(f"{_col_name(c)}{r}" for c in range(n1, n2 + 1) for r in range(row1, row2 + 1))


def parts(answer_position: str) -> list[Part]:
    """Each part as the benchmark splits and strips it (raises ``PositionError`` where it raises)."""
    out = []
    for piece in answer_position.split(","):
        sheet: str | None = None
        cell_range = piece
        if "!" in piece:
            pieces = piece.split("!")
            if len(pieces) != 2:
                raise PositionError(f"{piece!r} has {len(pieces) - 1} '!' (the benchmark unpacks sheet!range)")
            sheet, cell_range = pieces[0].strip("'"), pieces[1]
        out.append(Part(sheet=sheet, names=cell_names(cell_range.strip("'"))))
    return out


def _one_cell(name: str) -> bool:
    """Does openpyxl's ``ws[name]`` give one cell (as the benchmark's ``.value`` needs)?"""
    from openpyxl.utils.cell import range_boundaries

    if ":" in name:
        return False
    try:
        min_col, min_row, _, _ = range_boundaries(name)
    except (ValueError, TypeError):
        return False
    return min_col is not None and min_row is not None and 0 < min_row <= 1048576 and 0 < min_col <= 18278


def problem(answer_position: str) -> str | None:
    """Why the benchmark cannot grade this ``answer_position`` on any workbook, or None."""
    try:
        found = parts(answer_position)
    except PositionError as exc:
        return str(exc)
    for part in found:
        bad = next((n for n in part.names if not _one_cell(n)), None)
        if bad is not None:
            return f"{bad!r} is not a cell reference openpyxl can index (the benchmark's ws[{bad!r}] fails)"
    return None
