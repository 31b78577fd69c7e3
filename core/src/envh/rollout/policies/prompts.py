"""System prompts for chat policies: tool descriptions, the action format, skills.

Three tool formats: ``native`` (the endpoint's function calling), ``prompted`` (the JSON
schemas in the prompt, ``<tool_call>`` JSON back, for servers whose chat template drops
tools) and ``text`` (``<think>…</think><action>…</action>``, for text envs with one
command tool and for small models). The skills block carries memory items the
rigger distils from earlier episodes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ...types import Observation, ToolSpec
from .calls import example_call, text_tool

DEFAULT_INTRO = ("You are an agent acting in an environment. Each turn you see an observation "
                 "and answer with exactly one action.")

Skills = str | list[str] | Callable[[Observation], "str | list[str] | None"] | None


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """``env.tools()`` in the OpenAI ``tools=[{"type": "function", ...}]`` shape."""
    out = []
    for tool in tools:
        params = dict(tool.parameters or {})
        params.setdefault("type", "object")
        params.setdefault("properties", {})
        out.append({"type": "function", "function": {
            "name": tool.name, "description": tool.description, "parameters": params}})
    return out


def signature(tool: ToolSpec) -> str:
    """``combine(i: integer, j: integer, op: add|sub|mul|div)``."""
    props = (tool.parameters or {}).get("properties") or {}
    parts = []
    for name, schema in props.items():
        kind = "|".join(map(str, schema["enum"])) if schema.get("enum") else schema.get("type", "any")
        items = schema.get("items") if isinstance(schema.get("items"), dict) else None
        if kind == "array" and items:
            kind = "[" + ("|".join(map(str, items["enum"])) if items.get("enum") else items.get("type", "any")) + ", ...]"
        parts.append(f"{name}: {kind}")
    return f"{tool.name}({', '.join(parts)})"


def skills_block(skills: Skills, observation: Observation) -> str:
    """The memory block for ``observation``: a bullet list, or '' when there is none."""
    items = skills(observation) if callable(skills) else skills
    if not items:
        return ""
    if isinstance(items, str):
        return f"Skills from earlier episodes:\n{items.strip()}"
    return "Skills from earlier episodes:\n" + "\n".join(f"- {s.strip()}" for s in items if s.strip())


def format_instructions(tools: list[ToolSpec], *, tool_format: str, think: bool, compact: bool) -> str:
    """How to describe the tools and the reply format for ``tool_format``.

    ``native``: the endpoint passes the schemas to the model, the prompt names the tools;
    ``prompted``: the JSON schemas are in the prompt and calls come back as
    ``<tool_call>`` JSON; ``text``: signatures (or the command tool) and ``<action>``.
    """
    if tool_format == "native":
        return f"Tools: {', '.join(t.name for t in tools)}. Call exactly one tool per turn."
    if tool_format == "prompted":
        schemas = json.dumps([t["function"] for t in to_openai_tools(tools)], separators=(",", ":"),
                             ensure_ascii=False)
        return ("Tools (JSON Schema):\n" + schemas + "\nCall exactly one tool per turn by replying "
                '<tool_call>{"name": TOOL, "arguments": {...}}</tool_call>.')
    single = text_tool(tools)
    if single is not None:
        tool, _param = single
        what = "COMMAND"
        lines = [f"Act by writing a command ({tool.description.strip()})." if tool.description and not compact
                 else "Act by writing a command."]
        example = "look"
    else:
        what = "CALL"
        lines = ["Tools:"] + [f"- {signature(t)}" + ("" if compact or not t.description else f": {t.description}")
                              for t in tools]
        example = example_call(tools[0]) if tools else "tool()"
    if think:
        lines.append(f"Reply as <think>brief reasoning</think><action>{what}</action>, "
                     f"for example <action>{example}</action>.")
    else:
        lines.append(f"Reply with only <action>{what}</action>, for example <action>{example}</action>.")
    return "\n".join(lines)


def system_prompt(tools: list[ToolSpec], observation: Observation, *, intro: str | None, tool_format: str,
                  think: bool, compact: bool, skills: Skills) -> str:
    """The full system message for the current observation."""
    parts = [intro or DEFAULT_INTRO,
             format_instructions(tools, tool_format=tool_format, think=think, compact=compact),
             skills_block(skills, observation)]
    return "\n\n".join(p for p in parts if p)


def observation_text(observation: Observation, *, show_admissible: bool, limit: int = 50) -> str:
    """The observation as the model reads it, with the admissible commands when given."""
    text = observation.text
    admissible = observation.data.get("admissible_commands") if show_admissible else None
    if isinstance(admissible, (list, tuple)) and admissible:
        shown = ", ".join(map(str, admissible[:limit])) + (", ..." if len(admissible) > limit else "")
        text += f"\nAdmissible commands: {shown}"
    return text
