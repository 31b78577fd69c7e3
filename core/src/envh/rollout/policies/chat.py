"""ChatPolicy: the conversation and action parsing shared by the openai and local policies.

A subclass only says how to get one completion (``_complete``); this base keeps the
conversation (system prompt with tools and skills, observations as user or tool
messages, the model's replies), picks the action format, and turns each reply into a
``PolicyStep``. Output that cannot be parsed is an invalid step (``action=None`` with the
reason), and the reason is fed back to the model with the next observation.
"""

from __future__ import annotations

import re
import time
from typing import Any

import attrs

from ...types import Action, Observation, TaskRef, ToolSpec
from ..policy import PolicyStep
from . import calls, prompts

FORMATS = ("auto", "tools", "text")
_ACTION = re.compile(r"<action>(.*?)</action>", re.S)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


@attrs.frozen(kw_only=True)
class Completion:
    """One model answer: text and/or native tool calls (``arguments`` as raw strings)."""

    text: str | None = None
    tool_calls: list[dict[str, Any]] = attrs.field(factory=list)
    usage: dict[str, int] = attrs.field(factory=dict)
    raw: Any = None


def describe(kind: str, arg: str | None, **options: Any) -> str:
    """A policy id: ``kind:arg`` plus the options that shape behaviour, e.g.
    ``openai:gpt-4o[format=tools,temperature=0.0]``."""
    shown = ",".join(f"{k}={v}" for k, v in sorted(options.items()) if v is not None)
    return f"{kind}{':' + arg if arg else ''}{'[' + shown + ']' if shown else ''}"


class ChatPolicy:
    """Base of chat-model policies; subclasses implement ``_complete``.

    :param action_format: ``tools``, ``text`` or ``auto`` (text for single-tool text envs
        or when observations carry admissible commands, tools otherwise).
    :param system_prompt: replaces the default first paragraph of the system message.
    :param skills: memory items (a list, or one rendered block) for the system prompt, or a
        callable returning them for the current observation (skill retrieval plugs in here).
    :param think: ask for ``<think>…</think>`` before the action (text format).
    :param compact: one line per tool, no descriptions (for small models).
    :param lenient: also accept a bare ``tool(...)`` call without ``<action>`` tags.
    :param max_turns: keep only the last N exchanges in the prompt (``None``: all).
    :param normalise_cutoff: difflib similarity needed to snap a command to an admissible one.
    """

    kind = "chat"
    native_tools = False

    def __init__(self, *, action_format: str = "auto", system_prompt: str | None = None,
                 skills: prompts.Skills = None, think: bool = True, compact: bool = False, lenient: bool = False,
                 max_turns: int | None = None, show_admissible: bool = True, normalise_cutoff: float = 0.6) -> None:
        if action_format not in FORMATS:
            raise ValueError(f"Unknown action format {action_format!r}. Choose one of: {', '.join(FORMATS)}")
        self.action_format, self.intro, self.skills = action_format, system_prompt, skills
        self.think, self.compact, self.lenient, self.max_turns = think, compact, lenient, max_turns
        self.show_admissible, self.normalise_cutoff = show_admissible, normalise_cutoff
        self.policy_id = self.kind
        self._format = "text"
        self._turns: list[list[dict[str, Any]]] = []
        self._pending_call: str | None = None
        self._last_invalid: str | None = None

    # -- the Policy protocol -------------------------------------------------------------
    def start(self, *, task: TaskRef | None, tools: list[ToolSpec], observation: Observation,
              seed: int | None = None) -> None:
        self._episode_seed = seed
        self._format = self.choose_format(tools, observation)
        self._turns, self._pending_call, self._last_invalid = [], None, None

    def act(self, observation: Observation, tools: list[ToolSpec]) -> PolicyStep:
        t0 = time.perf_counter()
        system = prompts.system_prompt(tools, observation, intro=self.intro, action_format=self._format,
                                       think=self.think, native=self.native_tools, compact=self.compact,
                                       skills=self.skills)
        obs_message = self._observation_message(observation)
        messages = [{"role": "system", "content": system}, *self._window(), obs_message]
        native = self._format == "tools" and self.native_tools
        prefill = "<action>" if self._format == "text" and not self.think else ""
        completion = self._complete(messages, prompts.to_openai_tools(tools) if native else None, prefill)
        step = self._interpret(completion, tools, observation)
        self._record(obs_message, completion, step)
        return attrs.evolve(step, latency_s=time.perf_counter() - t0)

    def close(self) -> None:
        """Nothing to release here; subclasses close clients or models."""

    # -- hooks for subclasses --------------------------------------------------------------
    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  prefill: str) -> Completion:
        """One completion for ``messages``; ``tools`` is set for native function calling.

        ``prefill`` is text the reply should start with; a model that can be primed
        returns it as part of ``text``, others ignore it.
        """
        raise NotImplementedError

    # -- internals ---------------------------------------------------------------------
    def choose_format(self, tools: list[ToolSpec], observation: Observation) -> str:
        """Resolve ``auto``: text for command envs, function calling otherwise."""
        if self.action_format != "auto":
            return self.action_format
        if calls.text_tool(tools) is not None or "admissible_commands" in observation.data:
            return "text"
        return "tools"

    def _observation_message(self, observation: Observation) -> dict[str, Any]:
        text = prompts.observation_text(observation, show_admissible=self.show_admissible)
        if self._pending_call is not None:
            return {"role": "tool", "tool_call_id": self._pending_call, "content": text}
        if self._last_invalid and self._last_invalid not in text:  # the runner may say it already
            text = f"Your last reply was not a valid action: {self._last_invalid}\n\n{text}"
        return {"role": "user", "content": text}

    def _window(self) -> list[dict[str, Any]]:
        turns = self._turns[-self.max_turns:] if self.max_turns else self._turns
        if self.max_turns == 0:
            turns = []
        out = [dict(m) for turn in turns for m in turn]
        if out and out[0]["role"] == "tool":  # its assistant call was trimmed away
            out[0] = {"role": "user", "content": out[0]["content"]}
        return out

    def _record(self, obs_message: dict[str, Any], completion: Completion, step: PolicyStep) -> None:
        call = completion.tool_calls[0] if completion.tool_calls else None
        if call is not None and step.action is not None and self._format == "tools" and self.native_tools:
            assistant: dict[str, Any] = {"role": "assistant", "content": completion.text, "tool_calls": [
                {"id": call["id"], "type": "function",
                 "function": {"name": call["name"], "arguments": call["arguments"]}}]}
            self._pending_call = call["id"]
        else:
            shown = completion.text or "".join(f"{c['name']}({c['arguments']})" for c in completion.tool_calls)
            assistant = {"role": "assistant", "content": shown}
            self._pending_call = None
        self._last_invalid = step.invalid
        self._turns.append([obs_message, assistant])

    def _interpret(self, completion: Completion, tools: list[ToolSpec], observation: Observation) -> PolicyStep:
        raw: dict[str, Any] = {"response": completion.raw, "text": completion.text}
        try:
            action, note = self._parse(completion, tools, observation)
        except calls.ParseError as exc:
            return PolicyStep(action=None, raw=raw, invalid=str(exc), usage=completion.usage)
        if note:
            raw["normalised"] = note
        return PolicyStep(action=action, raw=raw, usage=completion.usage)

    def _parse(self, completion: Completion, tools: list[ToolSpec],
               observation: Observation) -> tuple[Action, dict[str, Any] | None]:
        if completion.tool_calls:
            call = completion.tool_calls[0]
            return calls.parse_json_call({"name": call["name"], "arguments": call["arguments"]}, tools), None
        text = completion.text or ""
        if not text.strip():
            raise calls.ParseError("the reply is empty")
        tagged = _TOOL_CALL.findall(text)
        if tagged:
            return calls.parse_call(tagged[-1].strip(), tools), None
        found = _ACTION.findall(text)
        if found:
            body = found[-1].strip()
        elif self.lenient and "<action>" in text:
            body = text.rsplit("<action>", 1)[1].strip()
        elif self.lenient and calls.find_call(text, tools):
            body = calls.find_call(text, tools) or ""
        else:
            want = "tool call" if self._format == "tools" else "<action>...</action> block"
            raise calls.ParseError(f"no {want} in the reply")
        if not body:
            raise calls.ParseError("the <action> block is empty")
        return self._text_action(body, tools, observation)

    def _text_action(self, body: str, tools: list[ToolSpec],
                     observation: Observation) -> tuple[Action, dict[str, Any] | None]:
        single = calls.text_tool(tools)
        if single is None:
            return calls.parse_call(body, tools), None
        tool, param = single
        if re.match(rf"^{re.escape(tool.name)}\s*\(", body):
            body = str(next(iter(calls.parse_call(body, tools).args.values()), ""))
        admissible = observation.data.get("admissible_commands")
        if isinstance(admissible, list) and admissible:
            command, score = calls.normalise_command(body, [str(a) for a in admissible], self.normalise_cutoff)
            note = {"from": body, "to": command, "score": round(score, 3)} if command != body else None
            return Action(tool=tool.name, args={param: command}), note
        return Action(tool=tool.name, args={param: body}), None
