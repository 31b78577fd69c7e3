"""What an episode looks like as plain data: ``get_env_state()`` and its JSON Schema.

Components and designers read only this (never the container). It is rich enough for
the paper's flagship contract, "block submit until the tests were run", which needs to
know whether tests actually ran: a step counts when its command runs a test runner in
command position (``is_test_command``) *and* the runner's own output shows tests were
collected and run (``tests_ran_in``: pytest's summary, unittest's "Ran N tests", ...), with
an exit status a test run ends with. ``pytest --version`` or ``false && pytest`` do not
count. Edits are counted whichever tool made them (the editor, or ``sed -i`` and any other
bash command that changes the working tree), so "tests after the last edit" holds.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

OUTPUT_CHARS = 2000
COMMAND_CHARS = 2000
PROBLEM_CHARS = 20_000
MAX_FILES = 200

# Evidence in a runner's own output that it collected and ran at least one test.
_RAN = re.compile(
    r"^=+ .*\b[1-9]\d* (?:passed|failed|errors?|xfailed|xpassed)\b.* in [\d.]+s"  # pytest banner
    r"|^[1-9]\d* (?:passed|failed)\b.*\bin [\d.]+s"  # pytest -q
    r"|^(?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?),? ?)+in [\d.]+s"
    r"|^Ran [1-9]\d* tests? in [\d.]+s"  # unittest, django runtests.py, nose
    r"|tests finished: [1-9]\d* passed|tests finished: \d+ passed, [1-9]\d* failed",  # sympy bin/test
    re.M)
# Exit statuses a test run ends with (pytest 0/1 and unittest 0/1; pytest 2/3: interrupted
# or internal error, 4: usage error, 5: nothing collected).
_RUN_EXIT = {0, 1}

_SPLIT = re.compile(r"[;&|()`\n]+")
_WRAPPERS = {"time", "env", "nice", "sudo", "xvfb-run", "stdbuf", "exec", "command"}
_RUNNERS = {"pytest", "py.test", "tox", "nox", "nosetests", "runtests.py", "test"}
_MODULES = {"pytest", "unittest", "nose", "tox"}


def _runs_tests(words: list[str]) -> bool:
    """Does one simple command (already split into words) run a test suite?"""
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
    """True when ``command`` runs tests: pytest, tox, runtests.py, unittest, ... in
    command position, or the instance's own test command."""
    if any(_runs_tests(part.split()) for part in _SPLIT.split(command)):
        return True
    own = (instance_test_cmd or "").strip()
    return bool(own) and own in command


def tests_ran_in(output: str) -> bool:
    """Does a runner's output show that it collected and ran at least one test?"""
    return bool(_RAN.search(output))


def counts_as_test_run(command: str, exit_code: int | None, output: str, timed_out: bool,
                       instance_test_cmd: str | None = None) -> bool:
    """A test command in command position that ran tests: the evidence is the runner's
    summary in the output and an exit status of a finished test run."""
    return (not timed_out and exit_code in _RUN_EXIT and is_test_command(command, instance_test_cmd)
            and tests_ran_in(output))


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
        "tests_run": _p("boolean", "tests ran this episode: a test command (pytest, tox, runtests.py, "
                        "python -m unittest, or the instance's own test command) whose output shows "
                        "it collected and ran tests"),
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
