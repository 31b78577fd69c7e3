"""What a SpreadsheetBench episode looks like as plain data: ``get_env_state()`` and its schema.

No answer position and no golden value: components may show state to the policy.
"""

from __future__ import annotations

from typing import Any

import attrs

MAX_RANGES = 50


@attrs.define
class SheetState:
    """Mutable tracker of one episode; ``to_json`` is ``get_env_state()``."""

    task_id: str
    instruction: str
    instruction_type: str
    test_cases: int
    sheets: list[dict[str, Any]] = attrs.Factory(list)
    steps: int = 0
    last_tool: str | None = None
    last_error: str | None = None
    cells_written: int = 0
    written_ranges: list[str] = attrs.Factory(list)
    python_runs: int = 0
    edits: int = 0
    recalculated: bool = False
    validated: bool = False
    validation_problems: int = 0
    submitted: bool = False

    def edited(self, sheets: list[dict[str, Any]], *, cells: int = 0, rng: str | None = None) -> None:
        self.sheets, self.edits = sheets, self.edits + 1
        self.cells_written += cells
        self.recalculated = self.validated = False
        if rng is not None:
            self.written_ranges.append(rng[:200])
            del self.written_ranges[:-MAX_RANGES]

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=True)


def _p(type_: str | list[str], description: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "description": description, **extra}


STATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": ("A SpreadsheetBench episode: the policy edits a workbook to satisfy an instruction, with "
                    "run_python (openpyxl/pandas in a container) or native cell tools, and submits; the grader "
                    "compares cells after LibreOffice recalculation on every test case."),
    "properties": {
        "task_id": _p("string", "the task's id in dataset.json"),
        "instruction": _p("string", "the task's instruction"),
        "instruction_type": _p("string", "'Cell-Level Manipulation' or 'Sheet-Level Manipulation'"),
        "test_cases": _p("integer", "how many test cases grade the solution (the policy edits case 1; "
                         "its edits are replayed on the others)"),
        "sheets": _p("array", "the workbook's sheets now", items={
            "type": "object", "properties": {"name": {"type": "string"}, "dimensions": {"type": "string"},
                                             "max_row": {"type": "integer"}, "max_column": {"type": "integer"}},
            "required": ["name", "dimensions", "max_row", "max_column"], "additionalProperties": False}),
        "steps": _p("integer", "actions that reached the environment this episode"),
        "last_tool": _p(["string", "null"], "tool of the last action"),
        "last_error": _p(["string", "null"], "error message of the last action if it failed, else null"),
        "cells_written": _p("integer", "cells written with write_range so far"),
        "written_ranges": _p("array", f"the last {MAX_RANGES} ranges written with write_range",
                             items={"type": "string"}),
        "python_runs": _p("integer", "run_python calls so far"),
        "edits": _p("integer", "successful changes of the workbook (write_range or run_python)"),
        "recalculated": _p("boolean", "recalculate ran since the last edit (inspect_range shows formula values)"),
        "validated": _p("boolean", "validate passed since the last edit (no corrupt file, no #REF!/#NAME? ...)"),
        "validation_problems": _p("integer", "problems the last validate found"),
        "submitted": _p("boolean", "submit was called: the episode is over"),
    },
    "required": ["task_id", "instruction", "instruction_type", "test_cases", "sheets", "steps", "cells_written",
                 "python_runs", "edits", "recalculated", "validated", "submitted"],
    "additionalProperties": False,
}
