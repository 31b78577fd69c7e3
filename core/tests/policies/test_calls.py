"""Parsing model text into tool calls: the shapes models really write."""

from __future__ import annotations

import pytest
from envh import Action
from envh.bridges.toy24 import TOOLS
from envh.rollout.policies.calls import ParseError, find_call, normalise_command, parse_call
from envh.rollout.policies.prompts import skills_block, to_openai_tools
from envh.types import Observation

MUL = Action(tool="combine", args={"i": 0, "j": 1, "op": "mul"})


@pytest.mark.parametrize("text", [
    "combine(0, 1, mul)", "combine(0, 1, 'mul')", 'combine(i=0, j=1, op="mul")', "combine(0,1,*)",
    "combine(0, 1, x)", "combine(\"0\", \"1\", \"Mul\")", "`combine(0, 1, mul)`", "combine(0, j=1, op=times)",
    '{"tool": "combine", "args": {"i": 0, "j": 1, "op": "mul"}}',
    '{"name": "combine", "arguments": "{\\"i\\": 0, \\"j\\": 1, \\"op\\": \\"mul\\"}"}',
    "Combine(0, 1, multiply)",
])
def test_call_shapes(text):
    assert parse_call(text, TOOLS) == MUL


def test_bare_tool_names_and_unknown_values():
    assert parse_call("stop", TOOLS) == Action(tool="stop")
    assert parse_call("stop()", TOOLS) == Action(tool="stop")
    # a value the schema cannot take is passed on for the env to refuse, not guessed
    assert parse_call("combine(0, 1, pow)", TOOLS).args["op"] == "pow"


@pytest.mark.parametrize("text, message", [
    ("jump(1)", "unknown tool 'jump'"), ("combine(0, 1, mul, 4)", "takes 3 arguments"),
    ("{not json", "not valid JSON"), ("let me think about it", r"expected a call like combine\(0, 1, add\)"),
])
def test_parse_errors_say_what_was_wrong(text, message):
    with pytest.raises(ParseError, match=message):
        parse_call(text, TOOLS)


def test_find_call_in_prose():
    text = "I will multiply: combine(0, (1), mul) and then stop."
    assert find_call(text, TOOLS) == "combine(0, (1), mul)"
    assert find_call("no call here", TOOLS) is None


def test_normalise_command():
    admissible = ["go to desk 1", "go to drawer 2", "take mug 1 from desk 1", "look"]
    assert normalise_command("Go to  desk 1.", admissible) == ("go to desk 1", 1.0)
    command, score = normalise_command("take the mug from desk 1", admissible)
    assert command == "take mug 1 from desk 1" and 0.6 < score < 1
    assert normalise_command("dance wildly", admissible) == ("dance wildly", 0.0)


def test_openai_tool_schema_and_skills():
    tools = to_openai_tools(TOOLS)
    assert tools[0]["type"] == "function" and tools[0]["function"]["parameters"]["required"] == ["i", "j", "op"]
    assert tools[1]["function"]["parameters"] == {"type": "object", "properties": {}, "additionalProperties": False}
    obs = Observation(text="x")
    assert skills_block(None, obs) == "" and skills_block([], obs) == ""
    assert skills_block(lambda o: "- one\n- two", obs) == "Skills from earlier episodes:\n- one\n- two"
