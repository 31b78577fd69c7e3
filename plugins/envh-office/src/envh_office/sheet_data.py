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

from . import sheet_position

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
    """One task; ``answer_position`` and the answer files stay with the verifier.
    ``not_gradable``: why the benchmark's evaluator cannot grade it (None: it can)."""

    id: str
    instruction: str
    instruction_type: str
    answer_position: str = attrs.field(repr=False)
    answer_sheet: str | None = None
    cases: tuple[Case, ...] = ()
    not_gradable: str | None = None

    @property
    def missing_files(self) -> list[str]:
        return [p for c in self.cases for p in (c.input, c.answer) if not os.path.isfile(p)]


def _cases(folder: Path, task_id: str) -> tuple[Case, ...]:
    """Every test case that has an input or an answer file; the other file of a pair is
    kept by its expected path, so its absence is reported, never silently skipped."""
    inputs: dict[int, str] = {}
    answers: dict[int, str] = {}
    pattern = re.compile(rf"^(\d+)_{re.escape(task_id)}_(input|init|answer|golden)\.xlsx$")
    for p in folder.iterdir() if folder.is_dir() else []:
        m = pattern.match(p.name)
        if m:
            (inputs if m.group(2) in ("input", "init") else answers)[int(m.group(1))] = str(p)
    paired = {"_init.xlsx": "_golden.xlsx", "_golden.xlsx": "_init.xlsx"}

    def expected(k: int, other: str, kind: str) -> str:
        suffix = next((v for s, v in paired.items() if other.endswith(s)), kind)
        return str(folder / f"{k}_{task_id}{suffix}")
    return tuple(Case(index=k, input=inputs.get(k) or expected(k, answers[k], "_input.xlsx"),
                      answer=answers.get(k) or expected(k, inputs[k], "_answer.xlsx"))
                 for k in sorted(set(inputs) | set(answers)))


def load_tasks(data: str | os.PathLike[str]) -> dict[str, SheetTask]:
    """Tasks by id. A row without any workbook, or without id/instruction/answer_position,
    is an error; a task whose ``answer_position`` the benchmark's evaluator cannot grade is
    kept with ``not_gradable`` set (the bridge does not offer it)."""
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
        position = str(row["answer_position"])
        why = sheet_position.problem(position)
        sp = root / str(row.get("spreadsheet_path") or f"spreadsheet/{tid}")
        folder = sp if sp.is_dir() else sp.parent
        cases = _cases(folder, tid)
        if not cases:
            raise errors.SpecError(f"{index}: task {tid} has no test case in {folder} "
                                   f"(expected 1_{tid}_input.xlsx and 1_{tid}_answer.xlsx).")
        out[tid] = SheetTask(id=tid, instruction=str(row["instruction"]),
                             instruction_type=str(row.get("instruction_type", "")),
                             answer_position=str(row["answer_position"]),
                             answer_sheet=row.get("answer_sheet") or None, cases=cases,
                             not_gradable=f"answer_position {position!r}: {why}" if why else None)
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
        skipped = {t.id: t.not_gradable for t in tasks.values() if t.not_gradable}
        if skipped:  # the benchmark's own evaluator scores these 0; envh does not offer them
            report["found"]["not_gradable"] = skipped
        missing = [p for t in tasks.values() for p in t.missing_files]
        if missing:
            report["missing"].append(f"{len(missing)} test-case workbook(s), e.g. {missing[:5]}")
    except errors.SpecError as exc:
        report["missing"].append(str(exc))
    return report
