"""SpreadsheetBench templates for designers (contributed with ``bridge="spreadsheetbench"``).

Same protocol as the other bridges' templates: ``name``, ``direction``,
``magnitudes(env, task)`` and ``instantiate(env, task, magnitude)`` → layer dicts.
Templates are trusted and may read the task (answer position, golden workbook) from the
bridge; the contract code they emit reads only ``get_env_state()``.
"""

from __future__ import annotations

from typing import Any

from envh import ActionableEnv, TaskRef

from .ranges import CellRange, col_letters, parse_answer_position

REVEAL_CODE = '''POSITION = {position!r}


def filter_observation(observation, state, memo):
    if not memo.get("shown"):  # the episode's first observation, after any stage
        memo["shown"] = True
        return observation.text + "\\n\\nThe graded cells are: " + POSITION + "."
    return None
'''

FORBID_CODE = '''def filter_action(action, state, memo):
    if action.tool == "run_python":
        return Block(reason="run_python is disabled in this world; use list_sheets, inspect_range, find_cells, "
                            "write_range, recalculate and validate.")
    return None
'''

VALIDATE_CODE = '''def filter_action(action, state, memo):
    if action.tool == "submit" and not state["validated"]:
        return Block(reason="Run validate (after your last edit) and fix what it reports before submitting.")
    return None
'''


def _task(env: ActionableEnv, task: TaskRef) -> Any:
    return getattr(env.unwrapped, "tasks", {}).get(task.instance_id)


class RevealRange:
    """Scaffold: name the graded range (``answer_position``) in the first observation."""

    name = "spreadsheetbench.reveal-range"
    direction = "scaffold"
    axis = "task_understanding"  # the diagnosed failure axis it answers (the template designer tries it first)

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        return [1] if _task(env, task) is not None else []

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        t = _task(env, task)
        position = t.answer_position if not t.answer_sheet else f"{t.answer_position} (sheet {t.answer_sheet})"
        return [{"kind": "contract", "id": "reveal-range", "code": REVEAL_CODE.format(position=position)}]


def header_writes(t: Any) -> list[dict[str, Any]]:
    """write_range actions that put the golden header row of each answer range (its first
    row, or the row above it) into case 1's input, where the input differs.

    A header is text that is the same in every test case's golden workbook, and the first
    row of a range counts only when rows follow it: otherwise a one-row range of text
    answers (a single graded cell above all) would be written in, answer and all, and
    replayed onto the other cases."""
    import openpyxl

    gold = openpyxl.load_workbook(t.cases[0].answer)
    given = openpyxl.load_workbook(t.cases[0].input)
    others = [openpyxl.load_workbook(c.answer) for c in t.cases[1:]]
    actions = []
    try:
        for rng in parse_answer_position(t.answer_position):
            sheet = rng.sheet or t.answer_sheet or gold.sheetnames[0]
            if sheet not in gold.sheetnames or sheet not in given.sheetnames:
                continue
            for row in (rng.min_row, rng.min_row - 1):
                if row < 1 or (row == rng.min_row and rng.max_row == rng.min_row):
                    continue
                cols = range(rng.min_col, rng.max_col + 1)
                want = [gold[sheet].cell(row=row, column=c).value for c in cols]
                if any(sheet not in o.sheetnames or [o[sheet].cell(row=row, column=c).value for c in cols] != want
                       for o in others):
                    continue  # differs between cases: data, not a header
                have = [given[sheet].cell(row=row, column=c).value for c in cols]
                if all(isinstance(v, str) and v and not v.startswith("=") for v in want) and want != have:
                    ref = CellRange(sheet, rng.min_col, row, rng.max_col, row)
                    actions.append({"tool": "write_range", "args": {
                        "range": f"'{sheet}'!{col_letters(ref.min_col)}{row}:{col_letters(ref.max_col)}{row}",
                        "values": [want]}})
                    break
    finally:
        for book in (gold, given, *others):
            book.close()
    return actions


class PrefillHeaders:
    """Scaffold: a stage writes the answer range's header row from the golden workbook."""

    name = "spreadsheetbench.prefill-headers"
    direction = "scaffold"
    axis = "S0"  # the diagnosed failure axis it answers (the template designer tries it first)

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        t = _task(env, task)
        return [1] if t is not None and header_writes(t) else []

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        return [{"kind": "stage", "id": "prefill-headers", "actions": header_writes(_task(env, task))}]


class ForbidPython:
    """Pressure: run_python is blocked; the native tools must do the work."""

    name = "spreadsheetbench.forbid-python"
    direction = "pressure"

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        return [1]

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        return [{"kind": "contract", "id": "forbid-python", "code": FORBID_CODE}]


class ValidateBeforeSubmit:
    """Pressure: submit is refused until validate passed after the last edit."""

    name = "spreadsheetbench.validate-before-submit"
    direction = "pressure"

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        return [1]

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        return [{"kind": "contract", "id": "validate-before-submit", "code": VALIDATE_CODE}]
