"""What an episode looks like as plain data: ``get_env_state()`` and its JSON Schema.

Components and designers read only this (never the container). It is rich enough for
the paper's flagship contract, "block submit until the tests were run", which needs to
know whether tests actually ran. That is never read from a command's text or output (a
command can print "1 passed" itself): a step counts when its command is a plain test
invocation (``witnessed_call``), which the bridge then runs itself under the witness
(``_witness.py``), and the witness reports tests that ran. Edits are counted whichever tool made them (the editor, or ``sed -i`` and any other
bash command that changes the working tree), so "tests after the last edit" holds.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Any

import attrs

OUTPUT_CHARS = 2000
COMMAND_CHARS = 2000
PROBLEM_CHARS = 20_000
MAX_FILES = 200

_SPLIT = re.compile(r"[;&|()`\n]+")
_WRAPPERS = {"time", "env", "nice", "sudo", "xvfb-run", "stdbuf", "exec", "command"}
_RUNNERS = {"pytest", "py.test", "tox", "nox", "nosetests", "runtests.py", "test"}
_MODULES = {"pytest", "unittest", "nose", "tox"}


def _runs_tests(words: list[str]) -> bool:
    """Does one simple command (already split into words) look like a test suite run?"""
    while words and (re.match(r"^\w+=", words[0]) or words[0] in _WRAPPERS):
        words = words[1:]
    if words and words[0] == "timeout":  # timeout [-s SIG] [-k T] DURATION COMMAND...
        rest = words[1:]
        while rest and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in ("-s", "-k", "--signal", "--kill-after") else rest[1:]
        return _runs_tests(rest[1:])
    if not words:
        return False
    prog = words[0].rsplit("/", 1)[-1]
    if prog in _RUNNERS and (prog != "test" or "/" in words[0]):  # bin/test, not test(1)
        return True
    if prog in ("make", "gmake"):
        return any(w in ("test", "tests", "check") for w in words[1:])
    if re.fullmatch(r"python[\d.]*", prog):
        rest = words[1:]
        if "-m" in rest and rest.index("-m") + 1 < len(rest):
            return rest[rest.index("-m") + 1] in _MODULES
        script = next((w for w in rest if not w.startswith("-")), "")
        name = script.rsplit("/", 1)[-1]
        return name == "runtests.py" or (name in ("manage.py", "setup.py") and "test" in rest)
    return False


def is_test_command(command: str, instance_test_cmd: str | None = None) -> bool:
    """True when ``command`` looks like a test run (pytest, tox, runtests.py, unittest, ...
    in command position, or the instance's own test command). Only a hint: whether tests
    ran is what the witness reports (``witnessed_call``), never what a command says."""
    if any(_runs_tests(part.split()) for part in _SPLIT.split(command)):
        return True
    own = (instance_test_cmd or "").strip()
    return bool(own) and own in command


# -- witnessed test runs -------------------------------------------------------------------
# A bash command counts as a test run only when the bridge ran it itself, under the
# witness (``_witness.py``), and the witness reported tests that ran. The bridge does that
# for a command that is nothing but a test invocation, so no alias, function, PATH entry,
# variable, redirection or second command of the policy's is part of it:
#
#   [cd DIR &&] [timeout [-s SIG] [-k T] DURATION] RUNNER ARGS... [2>&1] [| tail|head [-n] N]
#
# RUNNER: pytest | py.test | PYTHON [-u|-B|-X OPT|-W OPT]... (-m pytest | -m unittest | SCRIPT),
# where SCRIPT is a runtests.py (Django's runner) and PYTHON a bare python, python3 or
# python3.N found on the image's PATH. Anything else (`;`, `$`, `VAR=...`, `> file`, a
# pipe to anything but head or tail, ...) runs in bash as typed and never counts.
_UNSAFE = re.compile(r"[$`\\\n\r\x00]")
_WORD = re.compile(r"[^\s;&|()<>]+")
_OPERATOR = re.compile(r"[;&|()<>]+")
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?")
_DURATION = re.compile(r"\d+(?:\.\d+)?[smhd]?")
_SIGNAL = re.compile(r"-?(?:[A-Z]+|\d+)")


@attrs.frozen
class TestCall:
    """A plain test invocation, as the bridge will run it under the witness."""

    mode: str  # pytest | pytest-module | unittest-module | script
    args: tuple[str, ...]
    python: str | None = None  # None: the interpreter of `script`'s #! line, else python3, else python
    script: str | None = None  # the pytest script named (pytest, py.test, pytest-3, py.test-3)
    python_flags: tuple[str, ...] = ()
    cd: str | None = None
    timeout: tuple[str, ...] = ()  # the words after `timeout`
    pipe: tuple[str, int] | None = None  # ("tail" | "head", lines)


def _tokens(command: str) -> list[str] | None:
    if _UNSAFE.search(command):
        return None
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split, lex.commenters = True, ""  # bash reads `a#b` as one word
    try:
        words = list(lex)
    except ValueError:  # unbalanced quotes
        return None
    # a comment, `~` or `{a,b}`: bash would read or expand it, so it runs as typed, in bash
    return None if any(w.startswith(("#", "~")) or ("{" in w and "}" in w) for w in words) else words


def _inside(path: str, workdir: str) -> bool:
    full = posixpath.normpath(posixpath.join(workdir, path))
    return full == workdir or full.startswith(workdir.rstrip("/") + "/")


def witnessed_call(command: str, workdir: str = "/testbed") -> TestCall | None:
    """The test invocation ``command`` is, if it is nothing else (see above); else None.
    A ``cd`` must stay in the repository and a ``runtests.py`` must be the repository's."""
    words = _tokens(command)
    if not words:
        return None
    cd = None
    if len(words) > 3 and words[0] == "cd" and words[2] == "&&" and _WORD.fullmatch(words[1]):
        cd, words = words[1], words[3:]
        if cd.startswith(("-", "~")) or not _inside(cd, workdir):  # `cd --` goes home, `cd -` back
            return None
    here = posixpath.normpath(posixpath.join(workdir, cd or "."))
    pipe = None
    if len(words) > 2 and words[-3] == "|" and words[-2] in ("tail", "head") and re.fullmatch(r"-\d+", words[-1]):
        pipe, words = (words[-2], int(words[-1][1:])), words[:-3]
    elif len(words) > 3 and words[-4] == "|" and words[-3] in ("tail", "head") and words[-2] == "-n" \
            and words[-1].isdigit():
        pipe, words = (words[-3], int(words[-1])), words[:-4]
    if words[-3:] == ["2", ">&", "1"]:
        words = words[:-3]
    if any(_OPERATOR.fullmatch(w) for w in words):
        return None  # an operator, a redirection, a second command (a quoted word stays one word)
    timeout: tuple[str, ...] = ()
    if words and words[0] == "timeout":
        i = 1
        while i < len(words) - 1 and words[i] in ("-s", "-k", "--signal", "--kill-after"):
            ok = _SIGNAL.fullmatch(words[i + 1]) if words[i] in ("-s", "--signal") else _DURATION.fullmatch(words[i + 1])
            if not ok:
                return None
            i += 2
        if i >= len(words) or not _DURATION.fullmatch(words[i]):
            return None
        timeout, words = tuple(words[1:i + 1]), words[i + 1:]
    if not words:
        return None
    head, rest = words[0], words[1:]
    common = {"cd": cd, "timeout": timeout, "pipe": pipe}
    if head in ("pytest", "py.test", "pytest-3", "py.test-3"):
        return TestCall(mode="pytest", args=tuple(rest), script=head, **common)
    if head.endswith("runtests.py") and "/" in head and _inside(posixpath.join(here, head), workdir):
        return TestCall(mode="script", args=(head, *rest), **common)
    if not _PYTHON.fullmatch(head):
        return None
    flags: list[str] = []
    while rest and rest[0] in ("-u", "-B", "-X", "-W"):
        if rest[0] in ("-X", "-W"):
            if len(rest) < 2:
                return None
            flags += rest[:2]
            rest = rest[2:]
        else:
            flags.append(rest[0])
            rest = rest[1:]
    if len(rest) >= 2 and rest[0] == "-m" and rest[1] in ("pytest", "unittest"):
        mode = "pytest-module" if rest[1] == "pytest" else "unittest-module"
        return TestCall(mode=mode, args=tuple(rest[2:]), python=head, python_flags=tuple(flags), **common)
    if rest and rest[0].endswith("runtests.py") and _inside(posixpath.join(here, rest[0]), workdir):
        return TestCall(mode="script", args=tuple(rest), python=head, python_flags=tuple(flags), **common)
    return None


def witnessed_command(call: TestCall, source: str) -> str:
    """The bash command the bridge runs for ``call``: every word quoted, the interpreter
    found on the image's PATH (``exec``: no function or alias of the policy's can stand
    in, and each call's shell is fresh), the witness given as ``-c`` source."""
    q = shlex.quote
    line = " ".join([*(["timeout", *map(q, call.timeout)] if call.timeout else []), '"$envh_py"', "-s",
                     *map(q, call.python_flags), "-c", q(source), q(call.mode), *map(q, call.args)])
    pick = (f"envh_py={q(call.python)}" if call.python else
            "envh_py=python3; command -v python3 >/dev/null 2>&1 || envh_py=python")
    if call.script:  # the interpreter the script itself names, as running it would use
        pick += (f'; s="$(command -v {q(call.script)})" && IFS= read -r l < "$s" && case "$l" in '
                 """'#!/'*) l="${l#??}"; l="${l%% *}"; case "$l" in */python*) [ -x "$l" ] && envh_py="$l" ;; """
                 "esac ;; esac")  # `#!/usr/bin/env python3` keeps python3 from PATH
    return f"{'cd ' + q(call.cd) + ' && ' if call.cd else ''}{pick}; exec {line}"


def witnessed_pipe(call: TestCall, output: str) -> str:
    """``| tail -n N`` / ``| head -n N`` applied to the run's output, as the shell would."""
    if call.pipe is None:
        return output
    kind, n = call.pipe
    lines = output.splitlines(keepends=True)
    return "".join(lines[-n:] if n else []) if kind == "tail" else "".join(lines[:n])


def witnessed_ran(report: Any, exit_code: int | None, timed_out: bool) -> bool:
    """Did the witness see tests run to the end: at least one test called (its call
    phase, not only set up), and the process exiting as a finished test run does (0:
    passed, 1: failures) with the status the witness recorded?"""
    if not isinstance(report, dict) or timed_out or exit_code not in (0, 1):
        return False
    ran = report.get("ran")
    return isinstance(ran, int) and ran >= 1 and report.get("exit") == exit_code


def changed_paths(porcelain: str) -> list[str]:
    """Paths from ``git status --porcelain`` output (the new name of a rename)."""
    out = []
    for line in porcelain.splitlines():
        if len(line) > 3:
            path = line[3:].split(" -> ")[-1].strip().strip('"')
            out.append(path)
    return out


@attrs.define
class EpisodeState:
    """Mutable tracker of one episode; ``to_json`` is ``get_env_state()``."""

    instance_id: str
    repo: str
    problem_statement: str
    workdir: str
    steps: int = 0
    last_tool: str | None = None
    last_command: str | None = None
    last_exit_code: int | None = None
    last_output: str = ""
    last_error: str | None = None
    files_touched: list[str] = attrs.Factory(list)
    files_touched_more: int = 0
    edits: int = 0
    last_edit_step: int | None = None
    tests_run: bool = False
    test_runs: int = 0
    last_test_command: str | None = None
    last_test_exit_code: int | None = None
    last_test_step: int | None = None
    tests_since_last_edit: bool = False
    submitted: bool = False
    patch_chars: int = 0

    def __attrs_post_init__(self) -> None:
        if len(self.problem_statement) > PROBLEM_CHARS:
            self.problem_statement = self.problem_statement[:PROBLEM_CHARS] + "\n[... cut ...]"

    def touch(self, paths: list[str]) -> None:
        for path in paths:
            rel = path[len(self.workdir) + 1:] if path.startswith(self.workdir + "/") else path
            if rel in self.files_touched:
                continue
            if len(self.files_touched) < MAX_FILES:
                self.files_touched.append(rel[:500])
            else:
                self.files_touched_more += 1

    def edited(self) -> None:
        """The working tree changed in the step being recorded."""
        self.edits += 1
        self.last_edit_step = self.steps + 1
        self.tests_since_last_edit = False

    def tested(self, command: str, exit_code: int | None) -> None:
        """Tests ran in the step being recorded."""
        self.tests_run, self.test_runs = True, self.test_runs + 1
        self.last_test_command = _cut(command, COMMAND_CHARS)
        self.last_test_exit_code, self.last_test_step = exit_code, self.steps + 1
        self.tests_since_last_edit = True

    def record(self, tool: str, *, command: str | None = None, exit_code: int | None = None,
               output: str = "", error: str | None = None) -> None:
        self.steps += 1
        self.last_tool, self.last_exit_code = tool, exit_code
        self.last_command = None if command is None else _cut(command, COMMAND_CHARS)
        self.last_output = output if len(output) <= OUTPUT_CHARS else output[-OUTPUT_CHARS:]
        self.last_error = None if error is None else _cut(error, OUTPUT_CHARS)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpisodeState:
        names = {a.name for a in attrs.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + "[...]"


def _p(type_: str | list[str], description: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "description": description, **extra}


STATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": ("A SWE-bench episode: the policy fixes an issue in a repository inside a "
                    "container using bash, a file editor and submit; hidden tests grade the diff."),
    "properties": {
        "instance_id": _p("string", "SWE-bench instance id, e.g. 'django__django-11099'"),
        "repo": _p("string", "GitHub repository the task comes from, 'owner/name'"),
        "problem_statement": _p("string", f"the issue text the policy must resolve (first {PROBLEM_CHARS} characters)"),
        "workdir": _p("string", "absolute path of the repository inside the container"),
        "steps": _p("integer", "actions that reached the environment this episode"),
        "last_tool": _p(["string", "null"], "tool of the last action: bash, str_replace_editor or submit"),
        "last_command": _p(["string", "null"],
                           "last bash command, or 'str_replace_editor <command> <path>' for the editor"),
        "last_exit_code": _p(["integer", "null"], "exit code of the last bash command (-9: killed by timeout)"),
        "last_output": _p("string", f"last observation text, at most its final {OUTPUT_CHARS} characters"),
        "last_error": _p(["string", "null"], "error message of the last action if it failed, else null"),
        "files_touched": _p("array", f"repository-relative paths changed so far (editor writes and "
                            f"files git reports modified or new after bash commands; at most {MAX_FILES})",
                            items={"type": "string"}),
        "files_touched_more": _p("integer", f"changed paths beyond the first {MAX_FILES}, not listed"),
        "edits": _p("integer", "steps that changed the working tree (editor writes, sed -i, any bash command)"),
        "last_edit_step": _p(["integer", "null"], "step number (1-based) of the last such change"),
        "tests_run": _p("boolean", "tests ran this episode: a bash command that is a plain test invocation "
                        "(pytest, python -m pytest, python -m unittest or a runtests.py, optionally after "
                        "'cd DIR &&', with 'timeout N', '2>&1' or '| tail -n N'), run by the environment "
                        "with a witness that saw at least one test run to a finished result; a compound "
                        "command, or what a command prints, never counts"),
        "test_runs": _p("integer", "how many test runs there were"),
        "last_test_command": _p(["string", "null"], "the most recent test command"),
        "last_test_exit_code": _p(["integer", "null"], "its exit code (0: all collected tests passed)"),
        "last_test_step": _p(["integer", "null"], "step number (1-based) of the last test run"),
        "tests_since_last_edit": _p("boolean", "tests ran after the last change to the working tree"),
        "submitted": _p("boolean", "submit() was called: the episode is over and its diff captured"),
        "patch_chars": _p("integer", "length of the submitted diff in characters (0 before submit)"),
    },
    "required": ["instance_id", "repo", "problem_statement", "workdir", "steps", "files_touched",
                 "tests_run", "test_runs", "submitted"],
    "additionalProperties": False,
}
