"""The ``human`` policy: a person plays from the terminal.

Each turn prints the observation and waits for one line: ``tool key=value ...``
(``combine i=0 j=1 op=mul``), a call (``combine(0, 1, mul)``), JSON
(``{"tool": "stop"}``), or, in a single-tool text env, the command itself. ``?`` lists
the tools again. Input that cannot be parsed is reported and asked for again; the end of
input raises ``PolicyError`` (the episode ends as a policy error).
"""

from __future__ import annotations

import ast
import shlex
import sys
import time
from typing import Any, TextIO

from ... import errors
from ...types import Action, Observation, TaskRef, ToolSpec
from ..policy import PolicyStep
from .calls import ParseError, build_action, parse_call, text_tool
from .prompts import signature


def parse_line(line: str, tools: list[ToolSpec]) -> Action:
    """One line of input as an ``Action`` (see the module docstring for the forms)."""
    line = line.strip()
    single = text_tool(tools)
    if single is not None and not line.startswith(("{", f"{single[0].name}(")):
        return Action(tool=single[0].name, args={single[1]: line})
    if line.startswith("{") or "(" in line.split(" ", 1)[0]:
        return parse_call(line, tools)
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise ParseError(f"cannot split the line: {exc}") from exc
    if not words:
        raise ParseError("empty input")
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        target = value if eq and key.isidentifier() else word
        try:
            parsed: Any = ast.literal_eval(target)
        except (SyntaxError, ValueError):
            parsed = target
        if eq and key.isidentifier():
            kwargs[key] = parsed
        else:
            args.append(parsed)
    return build_action(words[0], args, kwargs, tools)


class HumanPolicy:
    """Reads actions from ``stdin`` and prints observations to ``stdout`` (both injectable)."""

    def __init__(self, arg: str | None = None, *, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 prompt: str = "> ") -> None:
        self.stdin, self.stdout, self.prompt = stdin or sys.stdin, stdout or sys.stdout, prompt
        self.policy_id = "human" + (f":{arg}" if arg else "")

    def _print(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def _help(self, tools: list[ToolSpec]) -> None:
        single = text_tool(tools)
        if single is not None:
            self._print(f"Type a command ({single[0].description}).")
            return
        self._print("Tools (type `tool key=value ...`, `tool(args)` or JSON):")
        for tool in tools:
            self._print(f"  {signature(tool)}  {tool.description}")

    def start(self, *, task: TaskRef | None, tools: list[ToolSpec], observation: Observation,
              seed: int | None = None) -> None:
        self._print(f"=== New episode: {task or 'default task'} ===")
        self._help(tools)

    def act(self, observation: Observation, tools: list[ToolSpec]) -> PolicyStep:
        t0 = time.perf_counter()
        self._print("\n" + observation.text)
        admissible = observation.data.get("admissible_commands")
        if isinstance(admissible, (list, tuple)) and admissible:
            self._print("Admissible: " + ", ".join(map(str, admissible)))
        while True:
            self.stdout.write(self.prompt)
            self.stdout.flush()
            line = self.stdin.readline()
            if not line:
                raise errors.PolicyError("The human policy's input ended (EOF) before the episode did")
            if line.strip() in ("?", "help"):
                self._help(tools)
                continue
            if not line.strip():
                continue
            try:
                action = parse_line(line, tools)
            except ParseError as exc:
                self._print(f"Could not read that: {exc}. Type ? for help.")
                continue
            return PolicyStep(action=action, raw=line.rstrip("\n"), latency_s=time.perf_counter() - t0)

    def close(self) -> None:
        """The terminal is not ours to close."""
