"""What an episode looks like as plain data: ``get_env_state()`` and its JSON Schema.

Components and designers read only this (never the container). It is rich enough for
the paper's flagship contract, "block submit until the tests were run", which needs to
know whether a test command ran; ``is_test_command`` recognises the usual runners and
the instance's own test command.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

OUTPUT_CHARS = 2000

_SPLIT = re.compile(r"[;&|()`\n]+")
_WRAPPERS = {"time", "env", "nice", "sudo", "xvfb-run", "stdbuf", "exec", "command"}
_RUNNERS = {"pytest", "py.test", "tox", "nox", "nosetests", "runtests.py", "test"}
_MODULES = {"pytest", "unittest", "nose", "tox"}


def _runs_tests(words: list[str]) -> bool:
    """Does one simple command (already split into words) run a test suite?"""
    while words and (re.match(r"^\w+=", words[0]) or words[0] in _WRAPPERS):
        words = words[1:]
    if words and words[0] == "timeout":  # timeout [-s SIG] DURATION COMMAND...
        words = [w for w in words[1:] if not w.startswith("-")][1:]
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
    tests_run: bool = False
    test_runs: int = 0
    last_test_command: str | None = None
    last_test_exit_code: int | None = None
    submitted: bool = False
    patch_chars: int = 0

    def touch(self, paths: list[str]) -> None:
        for path in paths:
            rel = path[len(self.workdir) + 1:] if path.startswith(self.workdir + "/") else path
            if rel not in self.files_touched:
                self.files_touched.append(rel)

    def record(self, tool: str, *, command: str | None = None, exit_code: int | None = None,
               output: str = "", error: str | None = None) -> None:
        self.steps += 1
        self.last_tool, self.last_command, self.last_exit_code = tool, command, exit_code
        self.last_output = output if len(output) <= OUTPUT_CHARS else output[-OUTPUT_CHARS:]
        self.last_error = error

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpisodeState:
        names = {a.name for a in attrs.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _p(type_: str | list[str], description: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "description": description, **extra}


STATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": ("A SWE-bench episode: the policy fixes an issue in a repository inside a "
                    "container using bash, a file editor and submit; hidden tests grade the diff."),
    "properties": {
        "instance_id": _p("string", "SWE-bench instance id, e.g. 'django__django-11099'"),
        "repo": _p("string", "GitHub repository the task comes from, 'owner/name'"),
        "problem_statement": _p("string", "the issue text the policy must resolve"),
        "workdir": _p("string", "absolute path of the repository inside the container"),
        "steps": _p("integer", "actions that reached the environment this episode"),
        "last_tool": _p(["string", "null"], "tool of the last action: bash, str_replace_editor or submit"),
        "last_command": _p(["string", "null"],
                           "last bash command, or 'str_replace_editor <command> <path>' for the editor"),
        "last_exit_code": _p(["integer", "null"], "exit code of the last bash command (-9: killed by timeout)"),
        "last_output": _p("string", f"last observation text, at most its final {OUTPUT_CHARS} characters"),
        "last_error": _p(["string", "null"], "error message of the last action if it failed, else null"),
        "files_touched": _p("array", "repository-relative paths changed so far (editor writes and "
                            "files git reports modified or new after bash commands)", items={"type": "string"}),
        "tests_run": _p("boolean", "a test command ran this episode (pytest, tox, runtests.py, "
                        "python -m unittest, or the instance's own test command)"),
        "test_runs": _p("integer", "how many test commands ran"),
        "last_test_command": _p(["string", "null"], "the most recent test command"),
        "last_test_exit_code": _p(["integer", "null"], "its exit code (0: all collected tests passed)"),
        "submitted": _p("boolean", "submit() was called: the episode is over and its diff captured"),
        "patch_chars": _p("integer", "length of the submitted diff in characters (0 before submit)"),
    },
    "required": ["instance_id", "repo", "problem_statement", "workdir", "steps", "files_touched",
                 "tests_run", "test_runs", "submitted"],
    "additionalProperties": False,
}
