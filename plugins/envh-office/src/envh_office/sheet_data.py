"""SpreadsheetBench data in the benchmark's own layout.

``DATA/dataset.json`` is a list of tasks with ``id, instruction, spreadsheet_path,
instruction_type, answer_position`` (optionally ``answer_sheet``); the workbooks of task
``ID`` are ``DATA/spreadsheet/ID/K_ID_input.xlsx`` and ``K_ID_answer.xlsx`` for test
cases K = 1..3 (1 in the verified 400; ``_init``/``_golden`` names are accepted too).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import attrs
from envh import errors

from .ranges import RangeError, parse_answer_position

OBTAIN = ("SpreadsheetBench data is not bundled: clone github.com/RUCKBReasoning/SpreadsheetBench and unpack "
          "data/*.tar.gz (all_data_912 or the verified 400), then point config data (or SPREADSHEETBENCH_DATA) "
          "at the folder holding dataset.json. envh never downloads it.")


@attrs.frozen(kw_only=True)
class Case:
    index: int
    input: str
    answer: str = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class SheetTask:
    """One task; ``answer_position`` and the answer files stay with the verifier."""

    id: str
    instruction: str
    instruction_type: str
    answer_position: str = attrs.field(repr=False)
    answer_sheet: str | None = None
    cases: tuple[Case, ...] = ()


def _cases(folder: Path, task_id: str) -> tuple[Case, ...]:
    inputs: dict[int, str] = {}
    answers: dict[int, str] = {}
    pattern = re.compile(rf"^(\d+)_{re.escape(task_id)}_(input|init|answer|golden)\.xlsx$")
    for p in folder.iterdir() if folder.is_dir() else []:
        m = pattern.match(p.name)
        if m:
            (inputs if m.group(2) in ("input", "init") else answers)[int(m.group(1))] = str(p)
    return tuple(Case(index=k, input=inputs[k], answer=answers[k]) for k in sorted(inputs) if k in answers)


def load_tasks(data: str | os.PathLike[str]) -> dict[str, SheetTask]:
    """Tasks by id; a row without both workbooks of at least one test case is an error."""
    root = Path(data).expanduser()
    index = root / "dataset.json" if root.is_dir() else root
    if not index.is_file():
        raise errors.SpecError(f"No SpreadsheetBench dataset.json at {root}. {OBTAIN}")
    root = index.parent
    try:
        rows: Any = json.loads(index.read_text())
    except ValueError as exc:
        raise errors.SpecError(f"{index} is not valid JSON: {exc}") from exc
    if not isinstance(rows, list):
        raise errors.SpecError(f"{index} must hold a JSON list of tasks.")
    out: dict[str, SheetTask] = {}
    for i, row in enumerate(rows):
        missing = [k for k in ("id", "instruction", "answer_position") if k not in row]
        if missing:
            raise errors.SpecError(f"{index}: task #{i} lacks {missing}.")
        tid = str(row["id"])
        try:
            parse_answer_position(str(row["answer_position"]))
        except RangeError as exc:
            raise errors.SpecError(f"{index}: task {tid} has a bad answer_position: {exc}") from exc
        sp = root / str(row.get("spreadsheet_path") or f"spreadsheet/{tid}")
        folder = sp if sp.is_dir() else sp.parent
        cases = _cases(folder, tid)
        if not cases:
            raise errors.SpecError(f"{index}: task {tid} has no test case in {folder} "
                                   f"(expected 1_{tid}_input.xlsx and 1_{tid}_answer.xlsx).")
        out[tid] = SheetTask(id=tid, instruction=str(row["instruction"]),
                             instruction_type=str(row.get("instruction_type", "")),
                             answer_position=str(row["answer_position"]),
                             answer_sheet=row.get("answer_sheet") or None, cases=cases)
    if not out:
        raise errors.SpecError(f"{index} holds no tasks.")
    return out


def check(data: str | None) -> dict[str, Any]:
    """What is found and what is missing, for ``envh office check``."""
    data = data or os.environ.get("SPREADSHEETBENCH_DATA")
    report: dict[str, Any] = {"config": {"data": data}, "found": {}, "missing": []}
    if not data:
        report["missing"].append("dataset folder (dataset.json + spreadsheet/): " + OBTAIN)
        return report
    try:
        tasks = load_tasks(data)
        report["found"]["tasks"] = len(tasks)
        report["found"]["test_cases"] = sum(len(t.cases) for t in tasks.values())
    except errors.SpecError as exc:
        report["missing"].append(str(exc))
    return report
