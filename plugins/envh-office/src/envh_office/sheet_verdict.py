"""The SpreadsheetBench verifier: replay the recorded solution on every test case,
recalculate the outputs, compare them with the golden workbooks' cached values by the
benchmark's rules.

A mixin of ``SpreadsheetBenchEnv`` (it reads the episode's task, ops, work file and
sandbox); kept apart so the episode's tools and its grading each fit in one file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from envh import EvaluationResult, errors

from . import recalc, sandbox, sheet_grading, workbook
from .workbook import WorkbookError

_SOUND: set[tuple[str, int, int]] = set()  # dataset workbooks already seen to open (path, mtime, size)
# golden answer cells with a formula and no cached value, by (path, mtime, size, answer_position)
_UNCACHED: dict[tuple[str, int, int, str], list[tuple[str, str]]] = {}


class SheetVerdict:
    """Grading for ``SpreadsheetBenchEnv``: Pass@1 is ``success``, Mean Score is ``score``."""

    task: Any
    ops: list[dict[str, Any]]
    recalc_timeout: float
    python_timeout: float
    _verdicts: dict[str, EvaluationResult]
    _replays: dict[tuple[str, int], bytes | str]
    _bad_recalc: dict[str, Exception]

    def _recalc_outputs(self, paths: list[str]) -> list[str | Exception]:
        """Recalculated copies of policy-made workbooks. When LibreOffice fails on them but
        recalculates a fresh canary, the failure is the workbook's (a formula that hangs or
        crashes the office): that path gets the exception instead. Otherwise InfraError."""
        keys = [recalc.content_key(p) for p in paths]
        todo = [p for p, k in zip(paths, keys) if k not in self._bad_recalc]
        done: dict[str, str] = {}
        try:
            done = dict(zip(todo, recalc.recalculate(todo, timeout=self.recalc_timeout)))
        except errors.InfraError as exc:
            if not recalc.healthy():
                raise
            # remembered by content, so the same workbook is not fed to the office again
            if len(todo) == 1:
                self._bad_recalc[recalc.content_key(todo[0])] = exc
            else:
                for path in todo:
                    try:
                        done[path] = recalc.recalculate([path], timeout=self.recalc_timeout)[0]
                    except errors.InfraError as one:
                        self._bad_recalc[recalc.content_key(path)] = one
        return [done[p] if p in done else self._bad_recalc[k] for p, k in zip(paths, keys)]

    def _check_dataset_file(self, path: str, what: str) -> None:
        """A dataset workbook that is missing or does not open is the dataset's fault, never
        the policy's: ``EnvError`` naming the file."""
        assert self.task is not None
        try:
            st = os.stat(path)
            stamp = (path, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp in _SOUND:
            return
        try:
            workbook.load(path).close()
            if stamp is not None:
                _SOUND.add(stamp)
        except WorkbookError as exc:
            raise errors.EnvError(f"SpreadsheetBench task {self.task.id}: {what} {path} is unusable: {exc} "
                                  "Restore the dataset file (`envh office check` lists such files).") from exc

    def _golden_fills(self, case: Any) -> sheet_grading.Fills:
        """The golden file is graded by its cached values, as the benchmark grades it (never
        recalculated: LibreOffice cannot compute XLOOKUP, FILTER, LET ... and would turn a
        right golden value into #NAME?). Only a golden answer cell with a formula and no
        cached value takes LibreOffice's value; when that is an error value the task cannot
        be graded and is set aside (``EnvError`` with the reason), never scored."""
        assert self.task is not None
        self._check_dataset_file(case.answer, f"test case {case.index}'s golden workbook")
        st = os.stat(case.answer)
        key = (case.answer, st.st_mtime_ns, st.st_size, self.task.answer_position)
        if key not in _UNCACHED:
            _UNCACHED[key] = sheet_grading.uncached_formulas(case.answer, self.task.answer_position)
        missing = _UNCACHED[key]
        if not missing:
            return {}
        values = sheet_grading.cell_values(
            recalc.recalculate([case.answer], timeout=self.recalc_timeout)[0], missing)
        errs = [f"{sheet}!{name} = {value}" for (sheet, name), value in values.items()
                if sheet_grading.is_error_value(value)]
        if errs:
            raise errors.EnvError(
                f"SpreadsheetBench task {self.task.id} is set aside: test case {case.index}'s golden workbook "
                f"{case.answer} has formula cells without a cached value that LibreOffice computes as errors "
                f"({', '.join(errs[:5])}); it cannot be graded. Restore the dataset file with its cached values.")
        return values

    # -- verifier -------------------------------------------------------------------------
    def _replay(self, index: int) -> bytes | str:
        """Test case ``index``'s output: the recorded solution applied to its input
        (bytes), or why that failed (str)."""
        assert self.task is not None
        key = (json.dumps(self.ops, sort_keys=True), index)
        if key in self._replays:
            return self._replays[key]
        case = self.task.cases[index]
        self._check_dataset_file(case.input, f"test case {case.index}'s input")
        with tempfile.TemporaryDirectory(prefix="envh-office-replay-") as tmp:
            path = os.path.join(tmp, "workbook.xlsx")
            shutil.copyfile(case.input, path)
            result: bytes | str | None = None
            for op in self.ops:
                try:
                    if op["tool"] == "write_range":
                        a = op["args"]
                        workbook.write_range(path, a["range"], a.get("values"), fill_color=a.get("fill_color"),
                                             font_color=a.get("font_color"),
                                             create_sheet=bool(a.get("create_sheet", False)))
                    else:
                        with open(path, "rb") as f:
                            before = f.read()
                        try:
                            reply = self._run_code(op["args"]["code"], before, 1000)
                        except sandbox.SandboxGone:
                            result = f"the solution stopped the sandbox on test case {case.index}"
                            break
                        if reply.get("workbook") is not None:
                            with open(path, "wb") as f:
                                f.write(reply["workbook"])
                except WorkbookError as exc:
                    result = f"the solution failed on test case {case.index}: {exc}"
                    break
            if result is None:
                with open(path, "rb") as f:
                    result = f.read()
        self._replays[key] = result
        return result

    def evaluate(self) -> EvaluationResult:
        """Pass@1 (``success``) and Mean Score (``score``) over every test case."""
        state = self._live()
        assert self.task is not None
        task = self.task
        key = json.dumps(self.ops, sort_keys=True) + recalc.content_key(self.work)
        if key in self._verdicts:
            return self._verdicts[key]
        with tempfile.TemporaryDirectory(prefix="envh-office-eval-") as tmp:
            outputs: list[str | None] = []
            reasons: dict[int, str] = {}
            for i, case in enumerate(task.cases):
                out = os.path.join(tmp, f"{case.index}_output.xlsx")
                produced = self._replay(i) if i else None
                if isinstance(produced, str):
                    reasons[i] = produced
                    outputs.append(None)
                    continue
                if produced is None:
                    shutil.copyfile(self.work, out)
                else:
                    with open(out, "wb") as f:
                        f.write(produced)
                try:  # a workbook that does not open fails its case: the policy's doing
                    workbook.check_file(out)
                    workbook.check_contents(out)
                    workbook.load(out).close()
                    outputs.append(out)
                except WorkbookError as exc:
                    reasons[i] = f"output cannot be opened: {exc}"
                    outputs.append(None)
            # golden files first: a failure there is the dataset's or the infrastructure's,
            # never the policy's
            fills = [self._golden_fills(case) for case in task.cases]
            made = iter(self._recalc_outputs([o for o in outputs if o is not None]))
            got: list[str | None] = []
            for i, o in enumerate(outputs):
                result = next(made) if o is not None else None
                if isinstance(result, Exception):
                    reasons[i] = f"LibreOffice could not recalculate the output: {result}"
                    result = None
                got.append(result)
            results = []
            for i, case in enumerate(task.cases):
                if got[i] is None:
                    results.append(0)
                    continue
                try:
                    verdict = sheet_grading.compare_workbooks(case.answer, got[i], task.answer_position, fills[i])
                except ValueError as exc:
                    raise errors.EnvError(f"Task {task.id}, test case {case.index}: {exc}") from exc
                results.append(int(verdict.passed))
                if not verdict.passed:
                    reasons[i] = verdict.reason
        hard = int(all(results))
        soft = sum(results) / len(results)
        result = EvaluationResult(success=bool(hard), score=soft, metrics={
            "pass_at_1": hard, "mean_score": soft, "test_case_results": results,
            "submitted": state.submitted, "instruction_type": task.instruction_type,
            "failures": {str(task.cases[i].index): r for i, r in sorted(reasons.items())}})
        self._verdicts[key] = result
        return result
