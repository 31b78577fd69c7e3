"""The scripted, random and human policies on Toy24 and on a text env."""

from __future__ import annotations

import io
import json
import random

import envh
import pytest
from envh import Action, TaskRef, ToolSpec
from envh.errors import PolicyError
from envh.rollout.policies.human import HumanPolicy, parse_line
from envh.rollout.policies.random_calls import RandomPolicy, sample
from envh.rollout.policies.scripted import ScriptedPolicy
from envh.rollout.warm import resolve_policy
from envh.validation import compile_tools

EASY = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
WIN = ["combine(0, 1, mul)", {"tool": "combine", "args": {"i": 0, "j": 1, "op": "mul"}}, Action(tool="stop")]


def test_scripted_list_wins(toy24, play):
    episode = play(toy24, ScriptedPolicy(WIN), EASY)
    assert episode.success and len(episode.steps) == 3
    assert episode.steps[0].raw == "combine(0, 1, mul)"


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_scripted_file_through_the_registry(tmp_path, toy24, play, suffix):
    path = tmp_path / f"script{suffix}"
    data = {"toy24/easy/2,3,4": ["combine(0, 1, mul)", "combine(0, 1, mul)", "stop()"], "*": ["stop"]}
    path.write_text(json.dumps(data))  # JSON is YAML too
    policy = resolve_policy(f"scripted:{path}")
    assert play(toy24, policy, EASY).success
    other = TaskRef(suite="toy24", split="easy", instance_id="1,3,8")
    assert [s.action.tool for s in play(toy24, policy, other).steps] == ["stop"]
    assert str(path) in policy.policy_id


def test_scripted_callable_and_running_out(toy24, play):
    def solver(observation, tools, index):
        return toy24.solve()[0] if index < 3 else None

    assert play(toy24, ScriptedPolicy(solver), EASY).success
    with pytest.raises(PolicyError, match="ran out after 1 actions"):
        play(toy24, ScriptedPolicy(["combine(0, 1, add)"]), EASY)
    stopped = play(toy24, ScriptedPolicy(["combine(0, 1, add)"], when_done="stop"), EASY)
    assert [s.action.tool for s in stopped.steps] == ["combine", "stop"]


def test_scripted_bad_entries_replay_as_invalid_steps(toy24, play):
    episode = play(toy24, ScriptedPolicy(["fly(1)", "combine(0, 1, 2, 3, 4)", "stop"]), EASY)
    assert "unknown tool 'fly'" in episode.steps[0].invalid
    assert "takes 3 arguments" in episode.steps[1].invalid
    assert episode.steps[2].action.tool == "stop"


NESTED = ToolSpec(name="book", description="nested arguments", parameters={
    "type": "object", "required": ["who", "when", "seats"], "additionalProperties": False,
    "properties": {
        "who": {"type": "object", "required": ["name", "age"], "additionalProperties": False,
                "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 5},
                               "age": {"type": "integer", "minimum": 18, "maximum": 99},
                               "vip": {"type": "boolean"}}},
        "when": {"type": "string", "enum": ["today", "tomorrow"]},
        "seats": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "integer", "minimum": 1}},
        "price": {"type": "number", "minimum": 0, "maximum": 50},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}})


def test_random_calls_are_valid_against_nested_schemas():
    check = compile_tools([NESTED])["book"]
    rng = random.Random(0)
    for _ in range(300):
        args = sample(NESTED.parameters, rng)
        assert check(args, "book") is None, args
        assert 18 <= args["who"]["age"] <= 99 and 1 <= len(args["seats"]) <= 3


def test_random_policy_is_seeded_and_fuzzes_toy24(toy24, play):
    def run(seed):
        policy = resolve_policy(f"random:{seed}", weights={"stop": 0.1, "reset": 0.2})
        return [[s.action for s in play(toy24, policy, EASY, max_steps=15).steps] for _ in range(3)]

    first = run(7)
    assert first == run(7) and first != run(8)
    assert len({repr(ep) for ep in first}) > 1  # the episode counter varies repeats of one task
    check = compile_tools(toy24.tools())
    assert all(check[a.tool](a.args, a.tool) is None for ep in first for a in ep)


def test_random_policy_can_break_the_schema(toy24, play):
    policy = RandomPolicy(3, invalid_rate=0.5, weights={"stop": 0.05})
    episode = play(toy24, policy, EASY, max_steps=40)
    errors = [o.text for o in episode.observations if o.text.startswith("Error:")]
    assert any("Unknown tool" in e or "Invalid call" in e for e in errors)


def test_random_policy_picks_admissible_commands(rooms, play):
    episode = play(rooms, RandomPolicy(1, admissible_rate=1.0), None, max_steps=30)
    assert not [o for o in episode.observations if o.text.startswith("Error:")]


def test_human_policy_reads_the_terminal(toy24, play):
    stdin = io.StringIO("?\n\nfly away\ncombine i=0 j=1 op=mul\ncombine(0, 1, '*')\n{\"tool\": \"stop\"}\n")
    stdout = io.StringIO()
    episode = play(toy24, resolve_policy("human", stdin=stdin, stdout=stdout), EASY)
    assert episode.success
    shown = stdout.getvalue()
    assert "combine(i: integer, j: integer, op: add|sub|mul|div)" in shown
    assert "Could not read that: unknown tool 'fly'" in shown and "Target: 24. Numbers: [0] 2" in shown


def test_human_policy_end_of_input_is_a_policy_error(toy24, play):
    with pytest.raises(PolicyError, match="EOF"):
        play(toy24, HumanPolicy(stdin=io.StringIO(""), stdout=io.StringIO()), EASY)


def test_human_lines_in_a_text_env(rooms):
    assert parse_line("go to kitchen", rooms.tools()) == Action(tool="act", args={"command": "go to kitchen"})
    assert parse_line('{"tool": "act", "args": {"command": "look"}}', rooms.tools()).args == {"command": "look"}


def test_builtin_policies_are_registered():
    names = envh.get_registry().policies()
    assert {"scripted", "random", "human", "openai", "local"} <= set(names)
    assert names["local"].factory == "envh.rollout.policies.local:LocalPolicy"
