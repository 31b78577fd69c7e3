"""What a test log itself witnesses about who printed its result lines.

swebench's log parsers build the status map line by line and the last line about a test
wins. Patched code runs inside the test process, so it can print result lines of its own
(from an ``atexit`` hook, a conftest, the repository's package) and swebench then grades
them as the runner's. These checks find lines the test runner cannot have printed:

* ``exit_codes``: the test command's exit status recorded more than once, with different
  values (the eval script records it once);
* ``markers_repeated``: swebench's start or end marker printed more than once (the eval
  script prints each once; a forged end marker moves what swebench reads);
* ``results_after_runner_end``: graded tests whose status changes when the output after
  the runner's own final summary is read (Django's ``Ran N tests``, sympy's ``tests
  finished``, pytest's last ``=== ... in Ns ===`` line, ``go test``'s last package line).
  A runner prints nothing about a test after it;
* ``reported_failed_and_passed``: a test the runner's failure report names (unittest's
  ``FAIL:``/``ERROR:`` header with its docstring line, sympy's ``___ file.py:test ___``)
  also has a passing result line for the same test: same description (method and
  docstring), same file. Two tests that only share a key (a docstring's first line, a
  name in two files) are two tests, as for swebench: the last line about the key wins.

An honest log has none of these, so every honest verdict is swebench's.
"""

from __future__ import annotations

import re
from typing import Any

PASSING = ("PASSED", "XFAIL")
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"  # swebench.harness.constants
RUNNER_END = {
    "unittest": re.compile(r"^Ran \d+ tests? in [\d.]+s$"),
    "sympy": re.compile(r"^=+ tests finished: .* =+$"),
    "pytest": re.compile(r"^=+ .* in [\d.]+s( \([\d:]+\))? =+$"),
    "go": re.compile(r"^(ok|FAIL)\s+\S+\s+([\d.]+s|\(cached\))"),
}
_UNITTEST_HEADER = re.compile(r"^(FAIL|ERROR): (.+)$")
_UNITTEST_DESCRIPTION = re.compile(r"^\S+ \([\w.]+\)$")  # `test_x (module.Class)`, no result
_SYMPY_HEADER = re.compile(r"^_+ (\S+\.py):(\S+) _+$")
_SYMPY_FILE = re.compile(r"^(\S+\.py)\[\d+\]")


def family(parser_name: str) -> str | None:
    """Which runner's output the row's parser reads (None: no check of its layout)."""
    from swebench.harness.log_parsers import PARSER_REGISTRY, go, python

    func = PARSER_REGISTRY[parser_name]
    if func in (python.parse_log_pytest, python.parse_log_pytest_options, python.parse_log_pytest_v2,
                python.parse_log_matplotlib, python.parse_log_seaborn):
        return "pytest"
    return {python.parse_log_django: "unittest", python.parse_log_sympy: "sympy",
            go.parse_log_gotest: "go"}.get(func)


def graded_region(log: str, parser: Any, spec: Any) -> str:
    """The text swebench's ``get_logs_eval`` parses: between the markers, or the whole
    log when nothing between them parses (its fallback)."""
    if START in log and END in log:
        sliced = log.split(START)[1].split(END)[0]
        if parser(sliced, spec):
            return sliced
    return log


def after_runner_end(text: str, kind: str | None, parser: Any, spec: Any, graded: set[str]) -> list[str]:
    """Graded tests whose status the lines after the runner's last summary line change."""
    if kind is None:
        return []
    lines = text.split("\n")
    ends = [i for i, line in enumerate(lines) if RUNNER_END[kind].search(line.strip())]
    if not ends:
        return []
    before, whole = parser("\n".join(lines[:ends[-1] + 1]), spec), parser(text, spec)
    return sorted(t for t in graded if whole.get(t) != before.get(t))


def _line_statuses(line: str, parser: Any, spec: Any) -> dict[str, str]:
    try:
        return dict(parser(line, spec))
    except Exception:  # noqa: BLE001 - a parser given one line out of context
        return {}


def _unittest_reported(lines: list[str], parser: Any, spec: Any, graded: set[str]) -> set[str]:
    failed: set[tuple[str, str | None]] = set()
    for i, line in enumerate(lines):
        header = _UNITTEST_HEADER.match(line.strip())
        if header:  # with a docstring, its first line follows the method's description
            doc = lines[i + 1].strip() if i + 1 < len(lines) else ""
            failed.add((header.group(2).strip(), doc if doc and not doc.startswith("---") else None))
    found, prev = set(), ""
    for line in lines:
        text = line.strip()
        for test, status in _line_statuses(text, parser, spec).items():
            if test in graded and status in PASSING:
                ident = (prev, test) if _UNITTEST_DESCRIPTION.match(prev) else (test, None)
                if ident in failed:
                    found.add(test)
        prev = text or prev
    return found


def _sympy_reported(lines: list[str], parser: Any, spec: Any, graded: set[str]) -> set[str]:
    failed = {(m.group(1), m.group(2)) for m in map(_SYMPY_HEADER.match, (ln.strip() for ln in lines)) if m}
    found, current = set(), ""
    for line in lines:
        text = line.strip()
        in_file = _SYMPY_FILE.match(text)
        if in_file:
            current = in_file.group(1)
            continue
        for test, status in _line_statuses(text, parser, spec).items():
            if test in graded and status in PASSING and (current, test) in failed:
                found.add(test)
    return found


def forgery_signs(log: str, *, parser_name: str, spec: Any, graded: set[str]) -> dict[str, Any]:
    """The signs above found in ``log``; empty for an honest log."""
    from swebench.harness.grading import TEST_EXIT_CODE_RE
    from swebench.harness.log_parsers import PARSER_REGISTRY

    found: dict[str, Any] = {}
    codes = sorted({int(m) for m in TEST_EXIT_CODE_RE.findall(log)})
    if len(codes) > 1:
        found["exit_codes"] = codes
    repeated = [m for m in (START, END) if log.count(m) > 1]
    if repeated:
        found["markers_repeated"] = repeated
    parser, kind = PARSER_REGISTRY[parser_name], family(parser_name)
    text = graded_region(log, parser, spec)
    late = after_runner_end(text, kind, parser, spec, graded)
    if late:
        found["results_after_runner_end"] = late
    lines = text.split("\n")
    reported = (_unittest_reported(lines, parser, spec, graded) if kind == "unittest" else
                _sympy_reported(lines, parser, spec, graded) if kind == "sympy" else set())
    if reported:
        found["reported_failed_and_passed"] = sorted(reported)
    return found
