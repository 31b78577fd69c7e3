"""Which deadlines are the endpoint's failure, and the refit after a context-length refusal,
against the replay server (the real openai SDK over HTTP): a healthy server answering a
long episode's requests is the episode's timeout, not a retryable endpoint failure; a
server that leaves one request unanswered (or answers 503 through the back-off) for half
the limit is; the verdict is not waited for after an endpoint failure (it is re-played);
a refusal the policy cannot fit to fails instead of shrinking every later prompt."""

from __future__ import annotations

import socket
import time

import envh
import pytest
from envh import TaskRef
from envh.rollout.runner import run_episode
from envh.rollout.trajectory import EpisodeRequest
from envh.testing_llm import LLMReplayServer, error_reply, slow, text_reply, tool_reply

EASY = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")


def request(options: dict, timeout_s: float, spec: dict | None = None, max_steps: int = 50) -> EpisodeRequest:
    spec = spec or {"bridge": "toy24", "layers": []}
    return EpisodeRequest(key="k#0", spec=envh.spec_to_data(envh.parse_spec(spec)), spec_id=envh.spec_id(spec),
                          task=EASY, seed=0, policy="openai:replay-model", policy_options=options,
                          timeout_s=timeout_s, max_steps=max_steps)


def test_a_healthy_server_answering_a_long_episode_is_a_timeout_not_an_endpoint_failure():
    with LLMReplayServer() as server:
        server.add(*[slow(tool_reply("reset"), 0.4)] * 30)
        played = run_episode(request({"base_url": server.base_url, "backoff_s": 0.01}, 2.0))
    assert len(played.steps) >= 2
    assert played.error_class == "timeout" and not played.retryable, (played.error_class, played.error)


def test_an_overloaded_server_through_the_back_off_is_an_endpoint_failure():
    with LLMReplayServer() as server:
        server.add(*[error_reply(503)] * 20)
        played = run_episode(request({"base_url": server.base_url, "backoff_s": 1.0, "retries": 8}, 2.0))
    assert played.error_class == "policy_error" and played.error_type == "EndpointError" and played.retryable, \
        (played.error_class, played.error)


def test_a_silent_server_fails_the_episode_at_its_limit_without_waiting_for_the_verdict():
    """The endpoint accepts the connection and never answers. The episode ends at its 2 s
    limit as a retryable endpoint failure, and its verdict is not taken (the episode is
    re-played), so no executor's grace runs out on a slow evaluate()."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        t0 = time.monotonic()
        played = run_episode(request({"base_url": f"http://127.0.0.1:{port}/v1", "timeout": 60,
                                      "max_context": 4096}, 2.0))
        elapsed = time.monotonic() - t0
    assert played.error_type == "EndpointError" and played.retryable and played.verdict is None, played.error
    assert "did not answer a request" in (played.error or "")
    assert elapsed < 10


def test_a_context_refusal_without_numbers_or_budget_is_a_policy_error_not_a_blind_model():
    from envh.rollout.policies.openai import OpenAIPolicy

    with LLMReplayServer() as server:
        server.add(error_reply(400, "the request exceeds the available context length"), tool_reply("reset"))
        policy = OpenAIPolicy("replay-model", base_url=server.base_url, backoff_s=0.01)
        with envh.make({"bridge": "toy24", "layers": []}) as env:
            obs = env.reset(task=EASY, seed=0).observation
            policy.start(task=EASY, tools=env.tools(), observation=obs, seed=0)
            with pytest.raises(envh.errors.PolicyError, match="too long"):
                policy.act(obs, env.tools())
        assert policy._refit_budget is None


def test_a_refit_holds_for_its_episode_only():
    from envh.rollout.policies.openai import OpenAIPolicy

    refusal = ("This model's maximum context length is 2000 tokens. However, your prompt contains at least 2001 "
               "input tokens, which exceeds this limit even without any output tokens.")
    with LLMReplayServer() as server:
        server.add(error_reply(400, refusal), tool_reply("reset"), tool_reply("reset"))
        policy = OpenAIPolicy("replay-model", base_url=server.base_url, backoff_s=0.01, max_context=4000,
                              max_tokens=16)
        with envh.make({"bridge": "toy24", "layers": []}) as env:
            for _episode in range(2):
                obs = env.reset(task=EASY, seed=0).observation
                policy.start(task=EASY, tools=env.tools(), observation=obs, seed=0)
                step = policy.act(obs, env.tools())
                assert step.turn is not None
                budgets = step.turn.context
                if _episode == 0:
                    assert budgets["refit"]["budget"] < budgets["refit"]["budget_before"]
                else:  # a new episode starts from the configured budget again
                    assert "refit" not in budgets and budgets["budget"] == 4000 - 16 - 8


def test_a_model_writing_nan_in_a_tool_call_made_an_invalid_step():
    with LLMReplayServer() as server:
        server.add(tool_reply("combine", '{"i": 0, "j": 1, "op": "add", "note": NaN}'), tool_reply("stop"))
        played = run_episode(request({"base_url": server.base_url, "backoff_s": 0.01}, 30.0, max_steps=2))
    assert played.error_class is None, played.error
    assert played.steps[0].invalid is not None and "NaN" in played.steps[0].invalid


def test_text_replies_are_not_endpoint_marked():
    """A deadline in the policy's own work after the endpoint answered stays a timeout."""
    with LLMReplayServer() as server:
        server.add(*[text_reply("thinking")] * 200)
        played = run_episode(request({"base_url": server.base_url, "backoff_s": 0.01, "tool_format": "text"}, 1.5,
                                     max_steps=500))
    assert played.error_class in (None, "timeout") and not played.retryable
