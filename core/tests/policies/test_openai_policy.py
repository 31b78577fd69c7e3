"""The openai policy against the replay server: real SDK, real HTTP, real Toy24."""

from __future__ import annotations

import json
import time

import envh
import httpx
import pytest
from envh import TaskRef
from envh.errors import PolicyError
from envh.rollout.policies.openai import OpenAIPolicy
from envh.testing_llm import error_reply, slow, text_reply, tool_reply

EASY = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
SOLUTION = [tool_reply("combine", {"i": 0, "j": 1, "op": "add"}),   # 2+3 → [4, 5]
            tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}),   # wrong: 20, not 24
            tool_reply("reset"),
            tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}),   # 2*3 → [4, 6]
            tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}),   # 24
            tool_reply("stop")]


def make(server, **options):
    return OpenAIPolicy("replay-model", base_url=server.base_url, backoff_s=0.01, **options)


def test_function_calls_solve_toy24(llm_replay_server, toy24, play):
    llm_replay_server.add(*SOLUTION)
    policy = make(llm_replay_server)
    episode = play(toy24, policy, EASY)
    assert episode.success
    assert [s.action.tool for s in episode.steps] == ["combine", "combine", "reset", "combine", "combine", "stop"]
    first = llm_replay_server.chat_requests[0]
    assert first["model"] == "replay-model" and first["temperature"] == 0.7
    assert [t["function"]["name"] for t in first["tools"]] == ["combine", "reset", "stop"]
    assert first["tools"][0]["function"]["parameters"]["properties"]["op"]["enum"] == ["add", "sub", "mul", "div"]
    # after a call, the env's answer goes back as the tool message of that call
    second = llm_replay_server.chat_requests[1]["messages"]
    assert second[-2]["tool_calls"][0]["id"] == second[-1]["tool_call_id"]
    assert "[0] 4, [1] 5" in second[-1]["content"]
    step = episode.steps[0]
    assert step.usage["total_tokens"] == step.usage["prompt_tokens"] + step.usage["completion_tokens"] > 0
    assert step.latency_s > 0
    assert step.raw["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "combine"
    assert policy.policy_id.startswith("openai:replay-model")


def test_malformed_output_is_an_invalid_step_and_the_episode_goes_on(llm_replay_server, toy24, play):
    llm_replay_server.add(tool_reply("combine", '{"i": 0, "j": '),        # broken JSON arguments
                          text_reply("I think we should multiply."),      # no call at all
                          text_reply(""),                                 # empty
                          tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}),
                          tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}),
                          tool_reply("stop"))
    episode = play(toy24, make(llm_replay_server), EASY)
    assert episode.success
    invalid = [s.invalid for s in episode.steps[:3]]
    assert all(s.action is None for s in episode.steps[:3])
    assert "not valid JSON" in invalid[0] and invalid[1] == "no tool call in the reply" and invalid[2] == "the reply is empty"
    # the model is told what was wrong with the next observation: the answer to its call
    told = llm_replay_server.chat_requests[1]["messages"][-1]
    assert told["role"] == "tool" and "not valid JSON" in told["content"]
    assert "[0] 2, [1] 3, [2] 4" in told["content"]  # and the world it was acting on


def test_500s_are_retried_then_succeed(llm_replay_server, toy24):
    llm_replay_server.add(error_reply(500), error_reply(503), tool_reply("stop"))
    policy = make(llm_replay_server, retries=3)
    obs = toy24.reset(task=EASY).observation
    policy.start(task=EASY, tools=toy24.tools(), observation=obs)
    step = policy.act(obs, toy24.tools())
    assert step.action == envh.Action(tool="stop")
    assert len(llm_replay_server.chat_requests) == 3
    assert len(step.raw["response"]["envh_failures"]) == 2


def test_backoff_grows_exponentially(llm_replay_server, toy24):
    llm_replay_server.add(error_reply(500), error_reply(500), error_reply(500), tool_reply("stop"))
    policy = make(llm_replay_server, retries=3)
    policy.backoff_s = 0.05
    obs = toy24.reset(task=EASY).observation
    policy.start(task=EASY, tools=toy24.tools(), observation=obs)
    policy.act(obs, toy24.tools())
    times = [r["time"] for r in llm_replay_server.requests if r["path"].endswith("/chat/completions")]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1 and gaps[2] >= 0.2


def test_timeouts_exhaust_retries_into_a_policy_error(llm_replay_server, toy24):
    llm_replay_server.add(*[slow(tool_reply("stop"), 5.0)] * 3)
    policy = make(llm_replay_server, timeout=0.3, retries=2)
    obs = toy24.reset(task=EASY).observation
    policy.start(task=EASY, tools=toy24.tools(), observation=obs)
    t0 = time.monotonic()
    with pytest.raises(PolicyError, match="failed 3 times: APITimeoutError"):
        policy.act(obs, toy24.tools())
    assert time.monotonic() - t0 < 3.0
    assert len(llm_replay_server.chat_requests) == 3


def test_client_errors_are_not_retried(llm_replay_server, toy24):
    llm_replay_server.add(error_reply(401, "bad key"), tool_reply("stop"))
    policy = make(llm_replay_server)
    obs = toy24.reset(task=EASY).observation
    policy.start(task=EASY, tools=toy24.tools(), observation=obs)
    with pytest.raises(PolicyError, match="refused the request.*401"):
        policy.act(obs, toy24.tools())
    assert len(llm_replay_server.chat_requests) == 1


def test_missing_api_key_without_base_url_says_which_variable(monkeypatch):
    monkeypatch.delenv("ENVH_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(PolicyError, match=r"\$ENVH_TEST_NO_SUCH_KEY"):
        OpenAIPolicy("gpt-4o-mini", api_key_env="ENVH_TEST_NO_SUCH_KEY")


def test_api_key_is_read_from_the_named_variable(llm_replay_server, toy24, monkeypatch):
    monkeypatch.setenv("MY_ENDPOINT_KEY", "sk-test-123")
    llm_replay_server.add(tool_reply("stop"))
    policy = make(llm_replay_server, api_key_env="MY_ENDPOINT_KEY")
    obs = toy24.reset(task=EASY).observation
    policy.start(task=EASY, tools=toy24.tools(), observation=obs)
    policy.act(obs, toy24.tools())
    assert llm_replay_server.requests[-1]["headers"]["authorization"] == "Bearer sk-test-123"


def test_text_format_on_toy24_parses_calls(llm_replay_server, toy24, play):
    llm_replay_server.add(text_reply("<think>2*3=6, 6*4=24</think><action>combine(0, 1, *)</action>"),
                          text_reply("<think>now 4 and 6</think><action>combine(i=0, j=1, op=\"mul\")</action>"),
                          text_reply('<action>{"tool": "stop", "args": {}}</action>'))
    episode = play(toy24, make(llm_replay_server, action_format="text"), EASY)
    assert episode.success
    system = llm_replay_server.chat_requests[0]["messages"][0]["content"]
    assert "combine(i: integer, j: integer, op: add|sub|mul|div)" in system and "<think>" in system
    assert "tools" not in llm_replay_server.chat_requests[0]


def test_text_format_normalises_to_admissible_commands(llm_replay_server, rooms, play):
    llm_replay_server.add(text_reply("<think>kitchen</think><action>Go to the kitchen.</action>"),
                          text_reply("<think>done</think><action>stop</action>"))
    policy = make(llm_replay_server)  # auto: a single command tool → the text format
    episode = play(rooms, policy, None)
    assert episode.success
    first = episode.steps[0]
    assert first.action == envh.Action(tool="act", args={"command": "go to kitchen"})
    assert first.raw["normalised"]["from"] == "Go to the kitchen." and first.raw["normalised"]["to"] == "go to kitchen"
    user = llm_replay_server.chat_requests[0]["messages"][1]["content"]
    assert "Admissible commands: go to kitchen, go to garden, look, stop" in user


def test_text_format_without_action_tags_is_invalid(llm_replay_server, rooms, play):
    llm_replay_server.add(text_reply("go to kitchen"), text_reply("<action>go to kitchen</action>"),
                          text_reply("<action>stop</action>"))
    episode = play(rooms, make(llm_replay_server), None)
    assert episode.steps[0].invalid == "no <action>...</action> block in the reply"
    assert episode.success


def test_skills_are_in_the_system_prompt(llm_replay_server, toy24):
    llm_replay_server.add(tool_reply("stop"), tool_reply("stop"))
    seen = []

    def retrieve(observation):
        seen.append(observation.text)
        return ["Multiply early when a 4 and a 6 are available."]

    for skills in (["Check the target before stopping."], retrieve):
        policy = make(llm_replay_server, skills=skills)
        obs = toy24.reset(task=EASY).observation
        policy.start(task=EASY, tools=toy24.tools(), observation=obs)
        policy.act(obs, toy24.tools())
    systems = [r["messages"][0]["content"] for r in llm_replay_server.chat_requests]
    assert "Skills from earlier episodes:\n- Check the target before stopping." in systems[0]
    assert "- Multiply early when a 4 and a 6 are available." in systems[1] and seen == [obs.text]


def test_keyed_replies_and_the_registry(llm_replay_server, toy24):
    llm_replay_server.add_keyed("[0] 2, [1] 3, [2] 4", tool_reply("combine", {"i": 1, "j": 2, "op": "mul"}))
    from envh.rollout.warm import resolve_policy

    policy = resolve_policy("openai:replay-model", base_url=llm_replay_server.base_url)
    obs = toy24.reset(task=EASY).observation
    policy.start(task=EASY, tools=toy24.tools(), observation=obs)
    for _ in range(2):  # keyed replies are reusable
        assert policy.act(obs, toy24.tools()).action.args == {"i": 1, "j": 2, "op": "mul"}
    body = json.dumps(llm_replay_server.chat_requests[-1])
    assert "[0] 2, [1] 3, [2] 4" in body
    policy.close()


def _request(policy_options, **kw):
    from envh.rollout.trajectory import EpisodeRequest

    spec = {"bridge": "toy24", "layers": []}
    return EpisodeRequest(key="k#0", spec=envh.spec_to_data(envh.parse_spec(spec)), spec_id=envh.spec_id(spec),
                          task=EASY, seed=0, policy="openai:replay-model", policy_options=policy_options, **kw)


def test_through_the_episode_runner(llm_replay_server):
    from envh.rollout.runner import run_episode
    from envh.rollout.trajectory import trajectory_from_json, trajectory_to_json

    llm_replay_server.add(error_reply(500), text_reply("no idea"), *SOLUTION[3:])
    t = run_episode(_request({"base_url": llm_replay_server.base_url, "backoff_s": 0.01}))
    assert t.success and t.error_class is None and t.invalid_steps == 1
    assert t.policy_id.startswith("openai:replay-model")
    assert t.usage["total_tokens"] > 0 and t.steps[1].raw["response"]["choices"][0]["message"]["tool_calls"]
    assert trajectory_from_json(trajectory_to_json(t)) == t


def test_an_endpoint_that_keeps_timing_out_fails_only_its_episode(llm_replay_server):
    from envh.rollout.runner import run_episode

    llm_replay_server.add(*[slow(tool_reply("stop"), 5.0)] * 2, *SOLUTION[3:])
    options = {"base_url": llm_replay_server.base_url, "timeout": 0.2, "retries": 1, "backoff_s": 0.01}
    failed = run_episode(_request(options))
    assert failed.error_class == "policy_error" and "APITimeoutError" in failed.error
    assert run_episode(_request(options)).success  # the next episode is unaffected


def test_tool_call_tags_in_text_are_parsed(llm_replay_server, toy24, play):
    # servers without a tool-call parser hand the model's <tool_call> JSON back as text
    llm_replay_server.add(text_reply('<tool_call>{"name": "combine", "arguments": {"i": 0, "j": 1, "op": "mul"}}'
                                     "</tool_call>"),
                          text_reply('<tool_call>{"name": "combine", "arguments": {"i": 0, "j": 1, "op": "mul"}}'
                                     "</tool_call>"),
                          tool_reply("stop"))
    assert play(toy24, make(llm_replay_server), EASY).success


@pytest.mark.parametrize(("message", "limit", "prompt", "fitted", "budget"), [
    # vLLM: counting stops at the limit + 1 ("at least"), so the shortfall is unknown: halve
    ("This model's maximum context length is 1024 tokens. However, your prompt contains at least 1025 input "
     "tokens, which exceeds this limit even without any output tokens.", 1024, 1025, (1000, 1000), 500),
    # vLLM with an exact count: scale by how far the count fell short
    ("This model's maximum context length is 1024 tokens. However, your prompt contains 2000 input tokens, "
     "which exceeds this limit even without any output tokens.", 1024, 2000, (1000, 1000), 492),
    # OpenAI's wording: the request's size includes the reply's tokens
    ("This model's maximum context length is 4097 tokens. However, you requested 4162 tokens (3662 in the "
     "messages, 500 in the completion).", 4097, 4162, (4000, 3600), 3000),
])
def test_a_context_length_refusal_is_read_for_the_refit(message, limit, prompt, fitted, budget):
    import openai
    from envh.rollout.policies.openai import _context_overflow

    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    exc = openai.BadRequestError(message, response=httpx.Response(400, request=request), body=None)
    overflow = _context_overflow(exc, "http://127.0.0.1:1/v1", 16)
    assert overflow is not None and (overflow.limit, overflow.prompt_tokens) == (limit, prompt)
    assert overflow.budget_after(*fitted) == budget
    other = openai.BadRequestError("temperature must be >= 0", response=httpx.Response(400, request=request),
                                   body=None)
    assert _context_overflow(other, "http://127.0.0.1:1/v1", 16) is None
