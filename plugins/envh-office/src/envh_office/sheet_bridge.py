"""SpreadsheetBenchEnv: edit a workbook to satisfy an instruction; graded on cells.

The policy works on test case 1's input (a private copy). ``run_python`` runs code in the
episode's container (openpyxl/pandas, no network, limits; started on first use); the
native tools (``list_sheets``, ``inspect_range``, ``find_cells``, ``write_range``,
``recalculate``, ``validate``) run openpyxl in this process on the work file — they run
no policy code, and skip the container round trip. Every change that was kept (a
``write_range``, a ``run_python`` whose workbook opens) is recorded as the solution;
``evaluate`` replays it on the other test cases' inputs, recalculates every output and
golden workbook with LibreOffice and applies the benchmark's comparison at
``answer_position``: Pass@1 (all cases pass) is ``success``, Mean Score (fraction
passed) is ``score``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from typing import Any

from envh import (
    Action,
    Bridge,
    EnvResponse,
    EvaluationResult,
    Observation,
    ResetResult,
    TaskRef,
    ToolSpec,
    errors,
)

from . import recalc, sandbox, workbook
from .ranges import RangeError, col_letters, parse_answer_position
from .sheet_data import SheetTask, load_tasks
from .sheet_state import STATE_SCHEMA, SheetState
from .sheet_verdict import SheetVerdict
from .workbook import WorkbookError

WORKBOOK_IN_SANDBOX = "/work/workbook.xlsx"
_STR = {"type": "string"}
TOOLS = [
    ToolSpec(name="list_sheets", description="List the workbook's sheets with their used ranges."),
    ToolSpec(name="inspect_range", description=(
        "Show the non-empty cells of a range like 'Sheet1!A1:D20' (at most 2000 cells): values, and "
        "formulas with their value after the last recalculate."),
        parameters={"type": "object", "properties": {"range": {**_STR, "description": "e.g. 'Sheet1!A1:D20'"}},
                    "required": ["range"], "additionalProperties": False}),
    ToolSpec(name="find_cells", description="Find cells whose value or formula matches a regular expression (RE2).",
             parameters={"type": "object", "properties": {
                 "pattern": _STR, "ignore_case": {"type": "boolean"}},
                 "required": ["pattern"], "additionalProperties": False}),
    ToolSpec(name="write_range", description=(
        "Write to a range: `values` is one value for every cell, a list for one row or column, or a list of "
        "rows; strings starting with '=' are formulas. Optional `fill_color` / `font_color` (hex RGB like "
        "'FFFF00') colour the whole range. All or nothing: a failed write changes nothing."),
        parameters={"type": "object", "properties": {
            "range": _STR,
            "values": {"type": ["array", "string", "number", "boolean", "null"]},
            "fill_color": _STR, "font_color": _STR,
            "create_sheet": {"type": "boolean", "description": "create the range's sheet if it does not exist"}},
            "required": ["range"], "additionalProperties": False}),
    ToolSpec(name="recalculate", description="Recalculate every formula with LibreOffice (then inspect_range shows values)."),
    ToolSpec(name="validate", description="Check the workbook: it opens, and no formula yields #REF!, #NAME?, #DIV/0! ..."),
    ToolSpec(name="run_python", description=(
        f"Run Python 3 code (openpyxl, pandas) in a sandbox. The workbook is {WORKBOOK_IN_SANDBOX} (also "
        "$WORKBOOK): load it, change it, save it to the same path. Prints are shown (long output is cut); "
        "no network. The same code is later run on the task's other test-case workbooks."),
        parameters={"type": "object", "properties": {"code": _STR}, "required": ["code"],
                    "additionalProperties": False}),
    ToolSpec(name="submit", description="Submit the workbook as your solution; ends the episode."),
]
MUTATING = ("write_range", "run_python")


class SpreadsheetBenchEnv(SheetVerdict, Bridge):
    """SpreadsheetBench tasks as tool-calling episodes on a private workbook copy."""

    name = "spreadsheetbench"

    def __init__(self, data: str | None = None, *, split: str = "test", docker_url: str | None = None,
                 image: str = sandbox.IMAGE, cpus: float = 1.0, memory: str = "1g", pids: int = 128,
                 python_timeout: float = 60.0, output_limit: int = 16_000, reward_on_submit: bool = True,
                 recalc_timeout: float = 60.0, show_answer_position: bool = True) -> None:
        data = data or os.environ.get("SPREADSHEETBENCH_DATA")
        if not data:
            raise errors.SpecError("The spreadsheetbench bridge needs config 'data' (or SPREADSHEETBENCH_DATA): "
                                   "a folder with dataset.json and spreadsheet/. `envh office check` shows more.")
        self.tasks: dict[str, SheetTask] = load_tasks(data)
        self.split, self.docker_url, self.image = split, docker_url, image
        self.limits = sandbox.Limits(cpus=cpus, memory=memory, pids=pids)
        self.python_timeout, self.output_limit = python_timeout, output_limit
        self.reward_on_submit, self.recalc_timeout = reward_on_submit, recalc_timeout
        # the benchmark's own prompts give answer_position; False hides it (a harder task
        # than the benchmark's: say so next to any score reported with it)
        self.show_answer_position = show_answer_position
        self.task: SheetTask | None = None
        self.state: SheetState | None = None
        self.workdir: str | None = None
        self.box: sandbox.Sandbox | None = None
        self.ops: list[dict[str, Any]] = []
        self._values: tuple[str, str] | None = None  # (content key, recalculated copy)
        self._last: Observation | None = None
        self._verdicts: dict[str, EvaluationResult] = {}
        self._replays: dict[tuple[str, int], bytes | str] = {}
        self._bad_recalc: dict[str, Exception] = {}  # content key -> why LibreOffice failed on it
        self._disposing: list[threading.Thread] = []
        self._references: dict[str, list[dict[str, Any]] | None] = {}  # task id -> golden-file plan

    # -- tasks ------------------------------------------------------------------------
    def tools(self) -> list[ToolSpec]:
        return TOOLS

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        if split is not None and split != self.split:
            return []
        return [TaskRef(suite="spreadsheetbench", split=self.split, instance_id=t)
                for t in sorted(self.tasks) if not self.tasks[t].not_gradable]

    def check_task(self, task: TaskRef) -> None:
        """A task set aside (its ``answer_position`` is one the benchmark's evaluator cannot
        grade) is refused with that reason; otherwise the core's check."""
        found = self.tasks.get(task.instance_id)
        if found is not None and found.not_gradable and task.split == self.split:
            self._task(task)
        super().check_task(task)

    def _task(self, task: TaskRef | None) -> SheetTask:
        if task is None:
            gradable = [t for t in sorted(self.tasks) if not self.tasks[t].not_gradable]
            if not gradable:
                raise errors.SpecError("No SpreadsheetBench task here can be graded by the benchmark's evaluator "
                                       "(`envh office check` lists why).")
            return self.tasks[gradable[0]]
        if task.instance_id not in self.tasks:
            raise errors.UnknownNameError("SpreadsheetBench task", task.instance_id, list(self.tasks))
        found = self.tasks[task.instance_id]
        if found.not_gradable:
            raise errors.SpecError(f"SpreadsheetBench task {found.id} is not offered: the benchmark's evaluator "
                                   f"scores it 0 whatever the solution ({found.not_gradable}).")
        return found

    @property
    def work(self) -> str:
        assert self.workdir is not None
        return os.path.join(self.workdir, "workbook.xlsx")

    # -- episode ----------------------------------------------------------------------
    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        self._release()
        t = self.task = self._task(task)
        self._check_dataset_file(t.cases[0].input, f"test case {t.cases[0].index}'s input")
        self.workdir = tempfile.mkdtemp(prefix="envh-office-ep-")
        shutil.copyfile(t.cases[0].input, self.work)
        try:
            sheets = workbook.list_sheets(self.work)
        except WorkbookError as exc:
            raise errors.EnvError(f"Task {t.id}: its input workbook cannot be opened: {exc}") from exc
        self.state = SheetState(task_id=t.id, instruction=t.instruction, instruction_type=t.instruction_type,
                                test_cases=len(t.cases), sheets=sheets)
        self.ops, self._values, self._verdicts, self._replays = [], None, {}, {}
        listing = ", ".join(f"{s['name']} ({s['dimensions']})" for s in sheets)
        text = (f"Instruction: {t.instruction}\n\nInstruction type: {t.instruction_type or 'unspecified'}\n"
                f"{self._position_line(t)}The workbook's sheets: {listing}.\nEdit it with the tools (run_python, or "
                "write_range and the other native tools), then call submit.")
        self._last = Observation(text=text, data={"task_id": t.id, "sheets": [s["name"] for s in sheets]})
        return ResetResult(observation=self._last, info={"task": f"spreadsheetbench/{t.id}",
                                                         "test_cases": len(t.cases)})

    def _position_line(self, t: SheetTask) -> str:
        """The benchmark prompt's answer_position and its gloss (empty when hidden)."""
        if not self.show_answer_position:
            return ""
        return (f"Answer position: {t.answer_position} (for Cell-Level Manipulation, the cells to fill; for "
                "Sheet-Level Manipulation, the maximum range you need to modify. Only modify or fill in values "
                "within it.)\n")

    def _live(self) -> SheetState:
        if self.state is None or self.workdir is None:
            raise errors.EnvhError("SpreadsheetBenchEnv.step() called before reset() or after close()")
        return self.state

    def _step(self, action: Action) -> EnvResponse:
        state = self._live()
        if state.submitted:
            return self._respond(state, action.tool, self.error_response(
                "The episode is over: submit was already called.", kind="episode_over"))
        args = action.args
        try:
            handler = getattr(self, f"_tool_{action.tool}")
            resp: EnvResponse = handler(state, args)
        except WorkbookError as exc:
            resp = self.error_response(str(exc), kind="workbook_error")
        return self._respond(state, action.tool, resp)

    def _ok(self, text: str, **data: Any) -> EnvResponse:
        return EnvResponse(observation=Observation(text=text, data=data))

    def _tool_list_sheets(self, state: SheetState, args: Any) -> EnvResponse:
        sheets = workbook.list_sheets(self.work)
        return self._ok("\n".join(f"{s['name']}: {s['dimensions']} ({s['max_row']} rows x {s['max_column']} "
                                  "columns)" for s in sheets), sheets=[s["name"] for s in sheets])

    def _tool_inspect_range(self, state: SheetState, args: Any) -> EnvResponse:
        return self._ok(workbook.inspect_range(self.work, args["range"], self._current_values()))

    def _tool_find_cells(self, state: SheetState, args: Any) -> EnvResponse:
        text, hits = workbook.find_cells(self.work, args["pattern"], bool(args.get("ignore_case", False)))
        return self._ok(text, hits=hits)

    def _tool_write_range(self, state: SheetState, args: Any) -> EnvResponse:
        cells, sheets = workbook.write_range(self.work, args["range"], _plain(args.get("values")),
                                             fill_color=args.get("fill_color"), font_color=args.get("font_color"),
                                             create_sheet=bool(args.get("create_sheet", False)))
        self.ops.append({"tool": "write_range", "args": _plain(dict(args))})
        state.edited(sheets, cells=cells, rng=args["range"])
        return self._ok(f"Wrote {cells} cell(s) in {args['range']}.", cells=cells)

    def _tool_recalculate(self, state: SheetState, args: Any) -> EnvResponse:
        self._recalc()
        state.recalculated = True
        return self._ok("Recalculated with LibreOffice; inspect_range now shows formula values.")

    def _tool_validate(self, state: SheetState, args: Any) -> EnvResponse:
        ok, problems = workbook.validate(self.work, self._recalc())
        state.recalculated, state.validated, state.validation_problems = True, ok, len(problems)
        if ok:
            return self._ok("The workbook is valid: it opens and no formula yields an error value.", ok=True)
        return EnvResponse(observation=Observation(text="Validation found problems:\n" + "\n".join(problems),
                                                   data={"ok": False}),
                           info={"error": {"type": "validation_failed", "message": f"{len(problems)} problem(s)"}})

    def _tool_run_python(self, state: SheetState, args: Any) -> EnvResponse:
        state.python_runs += 1
        with open(self.work, "rb") as f:
            before = f.read()
        try:
            reply = self._run_code(args["code"], before, self.output_limit)
        except sandbox.SandboxGone:
            return self.error_response(
                "The sandbox stopped while your code ran (it killed the container's processes or ran it out of "
                "memory). The workbook is unchanged; the next run_python starts a fresh sandbox.",
                kind="sandbox_stopped")
        text = reply["output"] or "(no output)\n"
        error: dict[str, str] | None = None
        if reply["timed_out"]:
            text += f"\n[the code ran past {self.python_timeout:g} s and was killed]"
            error = {"type": "timeout", "message": f"run_python timed out after {self.python_timeout:g} s"}
        elif reply["exit_code"]:
            text += f"\n[exit code {reply['exit_code']}]"
            error = {"type": "python_error", "message": f"the code exited with {reply['exit_code']}"}
        kept = self._accept(state, reply.get("workbook"), reply.get("workbook_problem"))
        if kept is not None:
            text += f"\n[{kept}]"
            error = error or {"type": "workbook_refused", "message": kept}
        else:
            self.ops.append({"tool": "run_python", "args": {"code": args["code"]}})
        info = {"error": error} if error else {}
        return EnvResponse(observation=Observation(text=text, data={"exit_code": reply["exit_code"],
                                                                     "timed_out": reply["timed_out"]}), info=info)

    def _accept(self, state: SheetState, book: bytes | None, problem: str | None) -> str | None:
        """Install the workbook run_python left, if it opens; else say why it was refused."""
        if book is None:
            return f"{problem or 'no workbook came back'}; the previous workbook is kept"
        tmp = os.path.join(self._live_dir(), ".candidate.xlsx")
        with open(tmp, "wb") as f:
            f.write(book)
        try:
            workbook.check_file(tmp)
            workbook.check_contents(tmp)
            wb = workbook.load(tmp)
            sheets = workbook.sheets_of(wb)
            wb.close()
        except WorkbookError as exc:
            os.unlink(tmp)
            return f"the code left a workbook that was refused ({exc}); the previous workbook is kept"
        with open(self.work, "rb") as f:
            unchanged = f.read() == book
        os.replace(tmp, self.work)
        if not unchanged:
            state.edited(sheets)
        return None

    def _tool_submit(self, state: SheetState, args: Any) -> EnvResponse:
        state.submitted = True
        reward = self.evaluate().score if self.reward_on_submit else 0.0
        return EnvResponse(observation=Observation(text="Submitted; the episode is over."), reward=reward,
                           terminated=True)

    def _respond(self, state: SheetState, tool: str, resp: EnvResponse) -> EnvResponse:
        error = resp.info.get("error")
        state.steps += 1
        state.last_tool, state.last_error = tool, error["message"] if error else None
        self._last = resp.observation
        return resp

    def observe(self) -> Observation:
        if self._last is None:
            raise errors.EnvhError("SpreadsheetBenchEnv.observe() called before reset()")
        return self._last

    # -- helpers ------------------------------------------------------------------------
    def _live_dir(self) -> str:
        assert self.workdir is not None
        return self.workdir

    def _run_code(self, code: str, book: bytes, limit: int) -> dict[str, Any]:
        """run_python in the episode's sandbox. A container that an earlier call stopped can
        still look alive for a moment; when it turns out dead, the code runs once more in a
        fresh one. SandboxGone when that one stops too (this code did it)."""
        for attempt in (0, 1):
            try:
                return self._box().run_python(code, book, timeout=self.python_timeout, limit=limit)
            except sandbox.SandboxGone:
                self._drop_box()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _box(self) -> sandbox.Sandbox:
        if self.box is not None and not self.box.alive():  # an earlier call's code stopped it
            self._drop_box()
        if self.box is None:
            self.box = sandbox.Sandbox.start(sandbox.client(self.docker_url), self.image, self.limits)
        return self.box

    def _current_values(self) -> str | None:
        if self._values is not None and self._values[0] == recalc.content_key(self.work):
            return self._values[1]
        return None

    def _recalc(self) -> str:
        current = self._current_values()
        if current is None:
            key = recalc.content_key(self.work)
            result = self._recalc_outputs([self.work])[0]
            if isinstance(result, Exception):
                raise WorkbookError(f"LibreOffice could not recalculate this workbook: {result}")
            current = result
            self._values = (key, current)
        return current

    # -- reference solution ---------------------------------------------------------------
    def reference_actions(self) -> list[Action] | None:
        """The task's golden workbook as native tool calls: ``write_range`` for every cell
        whose golden value or formula differs from the input (the answer range, and cells
        outside it the golden formulas may read), the golden fill / font colour on answer
        cells whose colour differs, ``validate`` (as a careful solver would, so a stack that
        asks for it before submit is not judged unsolvable; left out when the input or
        golden file already holds an error value, which validate would report), then
        ``submit``. One sequence serves every test case
        (the solution is replayed on each), so it exists only when the golden files of all
        cases agree on those cells, and only when a check without LibreOffice shows that
        the calls rebuild every golden cell's value and colour on each case's input.
        ``None`` otherwise: a golden value that differs between test cases (a literal the
        instruction computes per case), a time of day, an array formula, a literal text
        starting with '=', a colour that is not a solid RGB fill with equal fore- and
        background or an RGB font colour (theme, indexed, pattern fills), a removed colour,
        defined names the golden file adds, or more cells than one write allows; also
        after ``submit``. Written from reset: the policy's own earlier edits may break
        what the golden formulas read."""
        state = self._live()
        if state.submitted or self.task is None:
            return None
        if self.task.id not in self._references:
            self._references[self.task.id] = _golden_plan(self.task)
        plan = self._references[self.task.id]
        if plan is None:
            return None
        return [Action(tool=op["tool"], args=op["args"]) for op in plan] + [Action(tool="submit")]

    # -- state ----------------------------------------------------------------------------
    def get_env_state(self) -> dict[str, Any]:
        return self._live().to_json()

    def env_state_schema(self) -> dict[str, Any]:
        return STATE_SCHEMA

    def _drop_box(self) -> None:
        """Remove the container in the background; the next run_python starts a new one."""
        if self.box is not None:
            box, self.box = self.box, None
            self._disposing = [t for t in self._disposing if t.is_alive()]
            thread = threading.Thread(target=box.close, name=f"dispose-{box.container.name}", daemon=True)
            thread.start()
            self._disposing.append(thread)

    def _release(self) -> None:
        self._drop_box()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def close(self) -> None:
        self._release()
        for thread in self._disposing:
            thread.join()
        self._disposing = []
        self.state = None


class _NoReference(Exception):
    """The golden workbook cannot be written with the native tools."""


def _write_value(cell: Any, answer: bool) -> Any:
    """What ``write_range`` must write to rebuild ``cell`` (a golden or input cell);
    _NoReference when no value does. Dates become Excel serials: whole days in the answer
    range, as the grader compares them."""
    import datetime

    from .sheet_grading import _EXCEL_EPOCH

    v = cell.value
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, str):
        if v.startswith("=") and cell.data_type != "f":
            raise _NoReference(f"{cell.coordinate} holds text starting with '='")
        return v
    if isinstance(v, datetime.date) and not isinstance(v, datetime.datetime):
        v = datetime.datetime(v.year, v.month, v.day)
    if isinstance(v, datetime.datetime):
        delta = v - _EXCEL_EPOCH
        serial = delta.days + delta.seconds / 86400.0
        return int(round(serial)) if answer else serial
    raise _NoReference(f"{cell.coordinate} holds a {type(v).__name__}")


def _quoted(sheet: str) -> str:
    return "'" + sheet.replace("'", "''") + "'"


def _colour_args(gold: Any, base: Any) -> dict[str, str]:
    """``fill_color`` / ``font_color`` that turn ``base``'s colours into ``gold``'s."""
    from .sheet_grading import _rgb

    out: dict[str, str] = {}
    gf, bf = gold.fill, base.fill
    if (_rgb(gf.fgColor), _rgb(gf.bgColor)) != (_rgb(bf.fgColor), _rgb(bf.bgColor)):
        if gf.fill_type != "solid" or getattr(gf.fgColor, "type", None) != "rgb":
            raise _NoReference(f"{gold.coordinate}'s fill is not a solid RGB colour")
        out["fill_color"] = _rgb(gf.fgColor)
    if _rgb(gold.font.color) != _rgb(base.font.color):
        if getattr(gold.font.color, "type", None) != "rgb":
            raise _NoReference(f"{gold.coordinate}'s font colour is not an RGB colour")
        out["font_color"] = _rgb(gold.font.color)
    return out


def _cells(ws: Any) -> dict[tuple[int, int], Any]:
    return {(c.row, c.column): c for row in ws.iter_rows() for c in row if c.value is not None}


def _blank(ws: Any) -> Any:
    """A cell with the default style (what a cell of a sheet the input lacks starts as)."""
    from openpyxl.cell.cell import Cell

    return Cell(ws)


def _names(wb: Any) -> list[tuple[str, str]]:
    return sorted((str(n), str(d.attr_text)) for n, d in wb.defined_names.items())


def _golden_plan(task: SheetTask) -> list[dict[str, Any]] | None:
    """The ``write_range`` calls rebuilding ``task``'s golden cells on every test case's
    input (see ``SpreadsheetBenchEnv.reference_actions``), or None."""
    try:
        plan = _golden_writes(task)
        return plan + ([{"tool": "validate", "args": {}}] if _shows_no_error(task.cases[0]) else [])
    except (_NoReference, WorkbookError, RangeError):
        return None


def _shows_no_error(case: Any) -> bool:
    """Whether ``validate`` should pass on the rebuilt workbook: neither the input nor the
    golden file holds an error value (as last saved) or a formula on #REF!. A prediction
    without LibreOffice: a formula that only errs when recalculated goes unseen."""
    for path in (case.input, case.answer):
        for data_only in (False, True):
            wb = workbook.load(path, data_only=data_only)
            try:
                for ws in wb.worksheets:
                    for row in ws.iter_rows(values_only=True):
                        for v in row:
                            if isinstance(v, str) and (v.strip() in workbook.ERROR_VALUES
                                                       or (not data_only and v.startswith("=") and "#REF!" in v)):
                                return False
            finally:
                wb.close()
    return True


def _golden_writes(task: SheetTask) -> list[dict[str, Any]]:
    import attrs

    ranges = parse_answer_position(task.answer_position)
    if task.answer_sheet:
        ranges = [r if r.sheet is not None else attrs.evolve(r, sheet=task.answer_sheet) for r in ranges]
    # sheet -> (row, col) -> (value to write, colour args); the same for every test case
    wanted: dict[str, dict[tuple[int, int], tuple[Any, dict[str, str] | None]]] | None = None
    new_sheets: set[str] = set()
    for case in task.cases:
        inp, gold = workbook.load(case.input), workbook.load(case.answer)
        try:
            if _names(inp) != _names(gold):
                raise _NoReference("the golden workbook changes defined names")
            answer = {(r.sheet or gold.sheetnames[0], row, col) for r in ranges for row, col in r.cells()}
            here: dict[str, dict[tuple[int, int], tuple[Any, dict[str, str] | None]]] = {}
            for ws in gold.worksheets:
                base = inp[ws.title] if ws.title in inp.sheetnames else None
                if base is None:
                    new_sheets.add(ws.title)
                gcells, bcells = _cells(ws), _cells(base) if base is not None else {}
                spots = set(gcells) | set(bcells) | {(r, c) for s, r, c in answer if s == ws.title}
                for spot in spots:
                    g = ws.cell(row=spot[0], column=spot[1])
                    b = base.cell(row=spot[0], column=spot[1]) if base is not None else None
                    inside = (ws.title, *spot) in answer
                    colours = _colour_args(g, b if b is not None else _blank(ws)) if inside else None
                    same = (b is not None and type(g.value) is type(b.value) and g.value == b.value
                            and g.data_type == b.data_type)  # unchanged cells are never converted
                    if not same or colours:
                        here.setdefault(ws.title, {})[spot] = (_write_value(g, inside), colours or None)
            missing = {s for s, _, _ in answer} - set(gold.sheetnames)
            if missing:
                raise _NoReference(f"the answer range names sheets the golden workbook lacks: {sorted(missing)}")
        finally:
            inp.close()
            gold.close()
        if wanted is None:
            wanted = here
        elif wanted != here:
            raise _NoReference("the golden cells differ between test cases")
    assert wanted is not None
    if sum(len(v) for v in wanted.values()) > workbook.MAX_WRITE_CELLS:
        raise _NoReference("more golden cells than one write allows")
    plan: list[dict[str, Any]] = []
    for sheet, spots in wanted.items():
        # runs: contiguous cells of one row sharing colours; then runs over the same columns
        # with the same colours in consecutive rows become one rectangle (a column is one call)
        runs: list[list[Any]] = []  # [row, first col, last col, colours, values]
        for (row, col), (value, colours) in sorted(spots.items()):
            if runs and runs[-1][0] == row and runs[-1][2] == col - 1 and runs[-1][3] == colours:
                runs[-1][2] = col
                runs[-1][4].append(value)
            else:
                runs.append([row, col, col, colours, [value]])
        rects: list[list[Any]] = []  # [first row, last row, first col, last col, colours, rows]
        for row, c1, c2, colours, values in sorted(runs, key=lambda r: (r[1], r[2], repr(r[3]), r[0])):
            top = rects[-1] if rects else None
            if top is not None and (top[1] + 1, top[2], top[3], top[4]) == (row, c1, c2, colours):
                top[1] = row
                top[5].append(values)
            else:
                rects.append([row, row, c1, c2, colours, [values]])
        create = sheet in new_sheets
        for r1, r2, c1, c2, colours, rows in sorted(rects, key=lambda r: (r[0], r[2])):
            ref = f"{col_letters(c1)}{r1}" + ("" if (r1, c1) == (r2, c2) else f":{col_letters(c2)}{r2}")
            args: dict[str, Any] = {"range": f"{_quoted(sheet)}!{ref}", "values": rows, **(colours or {})}
            if create:
                args["create_sheet"], create = True, False
            plan.append({"tool": "write_range", "args": args})
    _check_plan(task, plan, wanted)
    return plan


def _check_plan(task: SheetTask, plan: list[dict[str, Any]],
                wanted: dict[str, dict[tuple[int, int], tuple[Any, dict[str, str] | None]]]) -> None:
    """Replay ``plan`` on each case's input (openpyxl, no LibreOffice) and compare every
    planned cell's value and every answer cell's colours with the golden file."""
    from .sheet_grading import colours_equal

    ranges = parse_answer_position(task.answer_position)
    with tempfile.TemporaryDirectory(prefix="envh-office-ref-") as tmp:
        for case in task.cases:
            path = os.path.join(tmp, "workbook.xlsx")
            shutil.copyfile(case.input, path)
            for op in plan:
                a = op["args"]
                workbook.write_range(path, a["range"], a["values"], fill_color=a.get("fill_color"),
                                     font_color=a.get("font_color"), create_sheet=bool(a.get("create_sheet")))
            got, gold = workbook.load(path), workbook.load(case.answer)
            try:
                for sheet, spots in wanted.items():
                    for row, col in spots:
                        if _write_value(got[sheet].cell(row=row, column=col), True) != _write_value(
                                gold[sheet].cell(row=row, column=col), True):
                            raise _NoReference(f"{sheet}!{col_letters(col)}{row} does not come out as golden")
                for r in ranges:
                    sheet = r.sheet or task.answer_sheet or gold.sheetnames[0]
                    if sheet not in got.sheetnames or sheet not in gold.sheetnames:
                        raise _NoReference(f"sheet {sheet!r} cannot be rebuilt")
                    for row, col in r.cells():
                        if not colours_equal(gold[sheet].cell(row=row, column=col),
                                             got[sheet].cell(row=row, column=col)):
                            raise _NoReference(f"{sheet}!{col_letters(col)}{row}'s colour cannot be rebuilt")
            finally:
                got.close()
                gold.close()


def _plain(value: Any) -> Any:
    """JSON-plain copy of tool arguments (frozen mappings and tuples become dicts/lists)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
