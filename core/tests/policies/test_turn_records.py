"""What a chat policy records per turn, against the replay server (real SDK, real HTTP).

The strongest check: the requests rebuilt from the content-addressed ``ModelTurn``
records equal, message for message, the bodies the server received.
"""

from __future__ import annotations

import json
import os
import socket

import pytest
from envh import Observation, TaskRef, ToolSpec
from envh.errors import EndpointError, PolicyError
from envh.rollout.policies.openai import OpenAIPolicy
from envh.rollout.trajectory import StepRecord, request_messages, tools_block
from envh.testing_llm import error_reply, text_reply, tool_reply

TOOLS = [ToolSpec(name="combine", description="combine two numbers",
                  parameters={"type": "object", "properties": {
                      "i": {"type": "integer"}, "j": {"type": "integer"},
                      "op": {"type": "string", "enum": ["add", "sub", "mul", "div"]}}}),
         ToolSpec(name="pick", description="pick several items",
                  parameters={"type": "object", "properties": {"items": {"type": "array", "items": {"type": "string"}}}}),
         ToolSpec(name="stop", description="finish")]
COMMAND = [ToolSpec(name="act", description="a command",
                    parameters={"type": "object", "properties": {"command": {"type": "string"}}})]
TASK = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")


def make(server, **options):
    return OpenAIPolicy("replay-model", base_url=server.base_url, backoff_s=0.01, **options)


def drive(policy, observations, tools=TOOLS, task=TASK, seed=0):
    """start + one act per observation; returns the steps (as a runner would store them)."""
    policy.start(task=task, tools=tools, observation=observations[0], seed=seed)
    steps = []
    for n, obs in enumerate(observations):
        decision = policy.act(obs, tools)
        steps.append(StepRecord(index=n, observation=obs, turn=decision.turn, raw=decision.raw,
                                proposed=decision.action, invalid=decision.invalid))
    return steps


def obs(text, **data):
    return Observation(text=text, data=data)


def test_rebuilt_requests_equal_what_the_server_received(llm_replay_server):
    llm_replay_server.add(tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}), tool_reply("combine", '{"i": 0, "j": '),
                          text_reply("I would stop now"), tool_reply("stop"))
    steps = drive(make(llm_replay_server), [obs(f"numbers {n}") for n in range(4)])
    sent = [body["messages"] for body in llm_replay_server.chat_requests]
    assert request_messages(steps) == sent
    # each message is stored once: later turns only name the earlier ones
    stored = sum(len(s.turn.blobs) for s in steps)
    assert stored < sum(len(m) for m in sent)
    assert steps[0].turn.tools is not None and tools_block(steps)[1]["function"]["name"] == "pick"
    assert all(s.turn.tool_format == "native" for s in steps)
    assert steps[1].turn.tool_calls[0]["arguments"] == '{"i": 0, "j": '  # the raw string, verbatim
    assert "not valid JSON" in steps[1].turn.parsed[0]["error"]


def test_parallel_calls_are_all_parsed_and_every_call_is_answered(llm_replay_server):
    from envh.testing_replies import Reply

    two = Reply(tool_calls=[{"name": "combine", "arguments": {"i": 0, "j": 1, "op": "x"}, "id": "a"},
                            {"name": "stop", "arguments": {}, "id": "b"}])
    llm_replay_server.add(two, tool_reply("stop"))
    steps = drive(make(llm_replay_server), [obs("numbers 2 3 4"), obs("numbers 6 4")])
    turn = steps[0].turn
    assert turn.parsed == [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "mul"}}, {"tool": "stop", "args": {}}]
    assert steps[0].proposed.args == {"i": 0, "j": 1, "op": "mul"}
    assert {"what": "coerce", "arg": "op", "from": "x", "to": "mul"} in turn.corrections
    assert any(c["what"] == "extra_calls" and c["used"] == 0 for c in turn.corrections)
    # OpenAI servers reject a call without an answer: both ids get a tool message
    second = llm_replay_server.chat_requests[1]["messages"]
    answered = [m["tool_call_id"] for m in second if m["role"] == "tool"]
    assert answered == ["a", "b"] and "Not executed" in second[-1]["content"]


def test_text_format_corrections_keep_the_original(llm_replay_server):
    llm_replay_server.add(text_reply("<think>multiply</think><action>combine(0, 1, mull)</action>"),
                          text_reply("<action>Go to the kitchen.</action>"))
    policy = make(llm_replay_server, tool_format="text")
    step = drive(policy, [obs("numbers 2 3 4")])[0]
    assert step.proposed.args["op"] == "mul"
    assert step.turn.corrections == [{"what": "coerce", "arg": "op", "from": "mull", "to": "mul"}]
    assert step.turn.text.endswith("<action>combine(0, 1, mull)</action>")  # what the model wrote
    rooms = drive(make(llm_replay_server), [obs("hall", admissible_commands=["go to kitchen", "look"])], tools=COMMAND)
    note = rooms[0].turn.corrections[0]
    assert note["what"] == "admissible" and note["from"] == "Go to the kitchen." and note["to"] == "go to kitchen"
    assert rooms[0].turn.tool_format == "text" and "tools" not in llm_replay_server.chat_requests[-1]


def test_prompted_format_puts_the_schemas_in_the_prompt(llm_replay_server):
    llm_replay_server.add(text_reply('<tool_call>{"name": "pick", "arguments": {"items": ["a", "b"]}}</tool_call>'))
    step = drive(make(llm_replay_server, tool_format="prompted"), [obs("choose")])[0]
    body = llm_replay_server.chat_requests[0]
    assert "tools" not in body
    system = body["messages"][0]["content"]
    assert '"name":"pick"' in system and '"items":{"type":"array"' in system and "<tool_call>" in system
    assert step.proposed.args == {"items": ["a", "b"]} and step.turn.tool_format == "prompted"


def test_native_can_be_refused_and_formats_are_checked(llm_replay_server):
    with pytest.raises(ValueError, match="Unknown tool_format 'xml'"):
        make(llm_replay_server, tool_format="xml")
    from envh.rollout.policies.chat import ChatPolicy

    with pytest.raises(ValueError, match="no native function calling"):
        ChatPolicy(tool_format="native")


@pytest.mark.parametrize(("reply", "expected"), [
    (text_reply("<action>pick([apple, pear])</action>"), ["apple", "pear"]),
    (text_reply('<action>pick(items=["a b", "c"])</action>'), ["a b", "c"]),
    (tool_reply("pick", {"items": '["x", "y"]'}), ["x", "y"]),
    (tool_reply("pick", {"items": ["x"]}), ["x"]),
])
def test_array_arguments(llm_replay_server, reply, expected):
    llm_replay_server.add(reply)
    step = drive(make(llm_replay_server, tool_format="text" if reply.content else "native"), [obs("choose")])[0]
    assert step.invalid is None, step.invalid
    assert list(step.proposed.args["items"]) == expected


def test_array_spread_as_positional_arguments_gets_a_useful_error(llm_replay_server):
    llm_replay_server.add(text_reply("<action>pick(apple, pear)</action>"))
    step = drive(make(llm_replay_server, tool_format="text"), [obs("choose")])[0]
    assert "pass the items array in brackets" in step.invalid


def test_an_invalid_reply_is_followed_by_the_last_valid_observation(llm_replay_server):
    llm_replay_server.add(text_reply("no idea"), tool_reply("stop"))
    policy = make(llm_replay_server)
    first = obs("Target 24. Numbers: [0] 2, [1] 3, [2] 4.")
    error = obs("Error: your output is not a valid action (no tool call in the reply).")
    drive(policy, [first, error])
    told = llm_replay_server.chat_requests[1]["messages"][-1]["content"]
    assert "no tool call in the reply" in told and "Numbers: [0] 2, [1] 3, [2] 4." in told


def test_an_env_error_shows_the_last_valid_observation_with_its_commands(llm_replay_server):
    llm_replay_server.add(text_reply("<action>go to kitchen</action>"), text_reply("<action>look</action>"))
    hall = obs("You are in the hall.", admissible_commands=["go to kitchen", "look"])
    drive(make(llm_replay_server), [hall, obs("Error: 'go to kitchen' is not admissible here.")], tools=COMMAND)
    told = llm_replay_server.chat_requests[1]["messages"][-1]["content"]
    assert told.startswith("Error: 'go to kitchen'") and "Admissible commands: go to kitchen, look" in told


def test_per_request_seeds_differ_by_turn_and_task_and_reproduce(llm_replay_server):
    llm_replay_server.add(*[tool_reply("stop")] * 6)
    other = TaskRef(suite="toy24", split="easy", instance_id="1,2,3")
    for task in (TASK, other, TASK):
        drive(make(llm_replay_server), [obs("a"), obs("b")], task=task, seed=0)
    seeds = [b["seed"] for b in llm_replay_server.chat_requests]
    assert seeds[0] != seeds[1] and seeds[:2] != seeds[2:4] and seeds[:2] == seeds[4:6]
    assert all(b["temperature"] > 0 for b in llm_replay_server.chat_requests)  # K rollouts differ by default
    llm_replay_server.add(tool_reply("stop"))
    steps = drive(make(llm_replay_server, seed=None, temperature=0.0), [obs("a")])
    assert "seed" not in llm_replay_server.chat_requests[-1] and steps[0].turn.sampling["temperature"] == 0.0


@pytest.mark.parametrize(("reply", "kind", "status"), [(error_reply(503), "server", 503),
                                                       (error_reply(429), "rate_limit", 429)])
def test_endpoint_failures_are_typed(llm_replay_server, reply, kind, status):
    llm_replay_server.add(reply, reply)
    policy = make(llm_replay_server, retries=1)
    policy.start(task=TASK, tools=TOOLS, observation=obs("x"), seed=0)
    with pytest.raises(EndpointError) as info:
        policy.act(obs("x"), TOOLS)
    assert info.value.kind == kind and info.value.status == status and isinstance(info.value, PolicyError)
    assert info.value.error_class == "policy_error"


def test_a_dead_endpoint_is_a_transport_failure():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the request: connection refused
    policy = OpenAIPolicy("m", base_url=f"http://127.0.0.1:{port}/v1", retries=1, backoff_s=0.01, timeout=2)
    policy.start(task=TASK, tools=TOOLS, observation=obs("x"), seed=0)
    with pytest.raises(EndpointError) as info:
        policy.act(obs("x"), TOOLS)
    assert info.value.kind == "transport" and info.value.status is None


def test_a_refusal_is_not_an_endpoint_failure(llm_replay_server):
    llm_replay_server.add(error_reply(400, "context too long"))
    policy = make(llm_replay_server)
    policy.start(task=TASK, tools=TOOLS, observation=obs("x"), seed=0)
    with pytest.raises(PolicyError) as info:
        policy.act(obs("x"), TOOLS)
    assert not isinstance(info.value, EndpointError)


def test_history_is_trimmed_to_the_budget_keeping_the_task(llm_replay_server):
    llm_replay_server.add(*[text_reply("<action>look</action>")] * 12)
    policy = make(llm_replay_server, max_context=400, max_tokens=64)
    observations = [obs("Your task is: put a mug in the sink.", admissible_commands=["look"])] + [
        obs(f"Room {n}: " + "a long description of the room. " * 8, admissible_commands=["look"]) for n in range(11)]
    steps = drive(policy, observations, tools=COMMAND)
    budget = 400 - 64 - 8
    for step, body in zip(steps, llm_replay_server.chat_requests, strict=True):
        ctx = step.turn.context
        assert ctx["budget"] == budget and ctx["prompt_tokens"] <= budget and ctx["fits"]
        assert ctx["counted_with"] == "estimate:chars/3" and ctx["strategy"] == "drop-oldest+keep-first"
        assert policy._count_tokens(body["messages"], None) == ctx["prompt_tokens"]
        assert "put a mug in the sink" in json.dumps(body["messages"])  # the task stays in view
    assert steps[-1].turn.context["dropped"] > 0 and steps[0].turn.context["dropped"] == 0
    roles = [m["role"] for m in llm_replay_server.chat_requests[-1]["messages"]]
    assert roles[0] == "system" and all(a != b or a != "user" for a, b in zip(roles, roles[1:], strict=False))


def test_an_observation_larger_than_the_context_is_cut_in_the_middle(llm_replay_server):
    llm_replay_server.add(text_reply("<action>look</action>"))
    huge = "START " + "x" * 20_000 + " END"
    step = drive(make(llm_replay_server, max_context=600, max_tokens=32), [obs(huge, admissible_commands=["look"])],
                 tools=COMMAND)[0]
    sent = llm_replay_server.chat_requests[0]["messages"][-1]["content"]
    assert sent.startswith("START") and "characters cut to fit the context" in sent and step.turn.context["fits"]
    assert step.turn.context["cut_chars"] > 15_000


def test_the_servers_context_is_used_when_it_reports_one(llm_replay_server):
    from envh.testing_llm import LLMReplayServer

    llm_replay_server.add(tool_reply("stop"))
    assert drive(make(llm_replay_server), [obs("x")])[0].turn.context["budget"] is None  # none reported
    with LLMReplayServer([text_reply("<action>look</action>")] * 8, max_model_len=600) as server:
        long = [obs("Your task: find the key. " + "The hall is long and dim. " * 30, admissible_commands=["look"])
                for _ in range(8)]
        steps = drive(make(server, max_tokens=100), long, tools=COMMAND)
    budget = 600 - 100 - 8
    assert all(s.turn.context["budget"] == budget and s.turn.context["prompt_tokens"] <= budget for s in steps)
    assert steps[-1].turn.context["dropped"] > 0


def test_duplicate_call_ids_get_their_own_answers(llm_replay_server):
    from envh.testing_replies import Reply

    same = Reply(tool_calls=[{"name": "stop", "arguments": {}, "id": "a"}, {"name": "stop", "arguments": {}, "id": "a"}])
    llm_replay_server.add(same, tool_reply("stop"))
    steps = drive(make(llm_replay_server), [obs("x"), obs("y")])
    answered = [m["tool_call_id"] for m in llm_replay_server.chat_requests[1]["messages"] if m["role"] == "tool"]
    assert answered == ["a", "a_1"]
    assert {"what": "call_field", "field": "tool_calls[1].id", "from": "a", "to": "a_1"} in steps[0].turn.corrections


def test_tokenizer_counts_native_turns_whose_content_is_empty(llm_replay_server):
    """SmolLM2's template concatenates ``content``; an assistant tool call has none."""
    from envh.rollout.policies.localmodels import cache_root

    if not (cache_root() / "smollm2-135m" / "config.json").exists() and os.environ.get("CI") != "true":
        pytest.skip("the converted SmolLM2 model is not in the cache (dev/setup.d/local_llm.sh)")
    llm_replay_server.add(tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}), tool_reply("stop"))
    steps = drive(make(llm_replay_server, tokenizer="smollm2", max_context=4096), [obs("a"), obs("b")])
    assert all(s.turn.context["counted_with"] == "tokenizer:smollm2" for s in steps)
    assert steps[1].turn.context["prompt_tokens"] > steps[0].turn.context["prompt_tokens"]


def test_text_a_tool_parser_took_calls_out_of_is_kept_as_written(llm_replay_server):
    from envh.testing_replies import Reply

    tokens = ["<tool_call>", '{"name": "stop", ', '"arguments": {}}', "</tool_call>"]
    llm_replay_server.add(Reply(body={
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "prompt_token_ids": [1, 2, 3],
        "choices": [{"index": 0, "finish_reason": "tool_calls", "token_ids": [7, 8, 9, 10],
                     "logprobs": {"content": [{"token": t, "logprob": -0.5, "bytes": None, "top_logprobs": []}
                                              for t in tokens]},
                     "message": {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "c", "type": "function", "function": {"name": "stop", "arguments": "{}"}}]}}]}))
    step = drive(make(llm_replay_server, token_ids=True), [obs("x")])[0]
    turn = step.turn
    assert turn.written == "".join(tokens) and turn.text is None and step.proposed.tool == "stop"
    assert turn.prompt_token_ids == [1, 2, 3] and turn.completion_token_ids == [7, 8, 9, 10]
    assert turn.logprobs == [-0.5] * 4
    body = llm_replay_server.chat_requests[0]
    assert body["logprobs"] is True and body["return_token_ids"] is True
    assert "token_ids" not in json.dumps(step.raw)  # stored once, on the turn
