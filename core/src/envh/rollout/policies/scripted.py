"""The ``scripted`` policy: plays a fixed list of actions, for tests and replays.

``scripted:FILE`` reads a JSON or YAML file; in Python pass the list itself or a callable.
An entry is an ``Action``, ``{"tool": ..., "args": {...}}``, or a call string
(``"combine(0, 1, mul)"``, parsed against the env's tools). A mapping from task (its
``suite/split/id`` string or its instance id) to a list replays per task, with the key
``"*"`` as the default. A callable gets ``(observation, tools, index)`` and returns an
entry, or ``None`` when it has nothing more to play.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ... import errors
from ...types import Action, Observation, TaskRef, ToolSpec
from ..policy import PolicyStep
from .calls import ParseError, parse_call, parse_json_call
from .chat import describe

Entry = Action | Mapping[str, Any] | str
Script = list[Entry] | Mapping[str, list[Entry]] | Callable[[Observation, list[ToolSpec], int], "Entry | None"]
WHEN_DONE = ("error", "repeat", "stop")


def load_script(path: str | Path) -> list[Entry] | dict[str, list[Entry]]:
    """Read a script from JSON (``.json``) or YAML (anything else)."""
    text = Path(path).read_text(encoding="utf-8")
    if str(path).endswith(".json"):
        data = json.loads(text)
    else:
        import yaml

        data = yaml.safe_load(text)
    if isinstance(data, Mapping) and set(data) == {"actions"}:
        data = data["actions"]
    if not isinstance(data, (list, Mapping)):
        raise errors.PolicyError(f"{path}: a script is a list of actions or a mapping task → list of actions")
    return data  # type: ignore[return-value]


def to_action(entry: Entry, tools: list[ToolSpec]) -> Action:
    """One script entry as an ``Action``."""
    if isinstance(entry, Action):
        return entry
    if isinstance(entry, str):
        return parse_call(entry, tools) if tools else Action(tool=entry.split("(")[0].strip())
    if isinstance(entry, Mapping):
        if tools:
            return parse_json_call(dict(entry), tools)
        return Action(tool=str(entry.get("tool") or entry.get("name")), args=dict(entry.get("args") or {}))
    raise ParseError(f"a script entry must be an Action, a mapping or a call string, got {type(entry).__name__}")


class ScriptedPolicy:
    """Plays ``script``; ``when_done`` says what happens when it runs out:
    ``error`` (a ``PolicyError``), ``repeat`` (the last action again) or ``stop`` (call the
    tool named ``stop_tool``)."""

    def __init__(self, arg: Script | str | Path | None = None, *, actions: Script | None = None,
                 when_done: str = "error", stop_tool: str = "stop") -> None:
        script = actions if actions is not None else arg
        if script is None:
            raise errors.PolicyError("The scripted policy needs actions: 'scripted:FILE' or actions=[...]")
        if when_done not in WHEN_DONE:
            raise errors.PolicyError(f"Unknown when_done {when_done!r}. Choose one of: {', '.join(WHEN_DONE)}")
        source = str(script) if isinstance(script, (str, Path)) else None
        self.script: Script = load_script(script) if isinstance(script, (str, Path)) else script
        self.when_done, self.stop_tool = when_done, stop_tool
        name = source or getattr(self.script, "__name__", None) or f"{len(self.script)}-actions"  # type: ignore[arg-type]
        self.policy_id = describe("scripted", name)
        self._episode: list[Entry] | None = None
        self._index = 0
        self._last: Entry | None = None

    def start(self, *, task: TaskRef | None, tools: list[ToolSpec], observation: Observation,
              seed: int | None = None) -> None:
        self._index, self._last = 0, None
        if callable(self.script) or isinstance(self.script, list):
            self._episode = None if callable(self.script) else list(self.script)
            return
        keys = [str(task), task.instance_id] if task is not None else []
        chosen = next((self.script[k] for k in [*keys, "*"] if k in self.script), None)
        if chosen is None:
            raise errors.PolicyError(f"The script has no actions for task {task}; keys: {', '.join(self.script)}")
        self._episode = list(chosen)

    def _next_entry(self, observation: Observation, tools: list[ToolSpec]) -> Entry | None:
        if self._episode is None and callable(self.script):
            return self.script(observation, tools, self._index)
        if self._episode is not None and self._index < len(self._episode):
            return self._episode[self._index]
        return None

    def act(self, observation: Observation, tools: list[ToolSpec]) -> PolicyStep:
        entry = self._next_entry(observation, tools)
        if entry is None:
            if self.when_done == "repeat" and self._last is not None:
                entry = self._last
            elif self.when_done == "stop":
                entry = Action(tool=self.stop_tool)
            else:
                raise errors.PolicyError(f"The script ran out after {self._index} actions and the episode "
                                         "goes on; add actions or use when_done='stop'/'repeat'")
        self._index += 1
        self._last = entry
        raw = entry if isinstance(entry, (str, Mapping)) else {"tool": entry.tool, "args": dict(entry.args)}
        try:
            return PolicyStep(action=to_action(entry, tools), raw=raw)
        except ParseError as exc:  # a bad entry is replayed as the invalid output it is
            return PolicyStep(action=None, raw=raw, invalid=str(exc))

    def close(self) -> None:
        """Nothing to release."""
