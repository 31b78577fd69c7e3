"""A run directory of real episodes for the export tests: the openai policy (replay
server, real SDK and HTTP) playing Toy24 through the episode runner, with native tool
calls (one reply broken, one with two parallel calls) and in the text format."""

from __future__ import annotations

import json
import os
from typing import Any

import envh
import pytest
from envh import TaskRef
from envh.rollout.runner import run_episode
from envh.rollout.store import TrajectoryStore
from envh.rollout.trajectory import EpisodeRequest
from envh.testing_llm import LLMReplayServer, Reply, text_reply, tool_reply

EASY = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
HARD = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")
SPEC = {"bridge": "toy24", "layers": []}

NATIVE = [tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}),          # 2*3 → [4, 6]
          tool_reply("combine", '{"i": 0, "j": '),                         # broken JSON: invalid turn
          Reply(tool_calls=[{"name": "combine", "arguments": {"i": 0, "j": 1, "op": "mul"}, "id": "p1"},
                            {"name": "stop", "arguments": {}, "id": "p2"}]),  # 24, and a second call
          tool_reply("stop")]
TEXT = [text_reply("<think>2*3 is 6</think><action>combine(0, 1, mull)</action>"),
        text_reply("<think>4*6</think><action>combine(i=0, j=1, op=\"*\")</action>"),
        text_reply("<action>stop()</action>")]
FAIL = [tool_reply("stop")]  # stops at once: not solved


def request(key: str, task: TaskRef, options: dict[str, Any], seed: int = 0) -> EpisodeRequest:
    return EpisodeRequest(key=key, spec=envh.spec_to_data(envh.parse_spec(SPEC)), spec_id=envh.spec_id(SPEC),
                          task=task, seed=seed, policy="openai:replay-model", policy_options=options, run_id="r1",
                          max_steps=8)


def play(server: LLMReplayServer, replies: list[Reply], key: str, task: TaskRef, **options: Any) -> Any:
    server.add(*replies)
    return run_episode(request(key, task, {"base_url": server.base_url, "backoff_s": 0.01, **options}))


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """(run directory, {name: trajectory}, the chat requests the server received)."""
    out = tmp_path_factory.mktemp("export-run")
    with LLMReplayServer() as server:
        trajectories = {"native": play(server, NATIVE, "native", EASY),
                        "text": play(server, TEXT, "text", EASY, tool_format="text"),
                        "fail": play(server, FAIL, "fail", HARD)}
        requests = server.chat_requests
    with TrajectoryStore(out) as store:
        store.create_run("r1", {"config": {"policy": "openai:replay-model", "spec_id": envh.spec_id(SPEC),
                                           "keys": sorted(trajectories)}})
        for t in trajectories.values():
            store.append(t)
    return out, trajectories, requests


# what vLLM's hermes tool parser answers for SmolLM2: the calls taken out of the text, and
# with logprobs the tokens as generated (``written``), ``<tool_call>`` included
WRITTEN = [("thinking...", [("combine", {"i": 0, "j": 1, "op": "mul"})]),   # 2*3 → [4, 6]
           ("4*6", [("combine", {"i": 0, "j": 1, "op": "mul"})]),           # 24
           ("", [("stop", {})])]


def hermes_text(content: str, calls: list[tuple[str, dict[str, Any]]]) -> str:
    return content + "".join(f'\n<tool_call>\n{json.dumps({"name": n, "arguments": a})}\n</tool_call>'
                             for n, a in calls)


def vllm_body(tokenizer: Any, serial: int, content: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    text = hermes_text(content, calls)
    ids = tokenizer.encode(text, add_special_tokens=False)
    tokens = [tokenizer.decode([i]) for i in ids]
    assert "".join(tokens) == text
    message = {"role": "assistant", "content": content or None, "tool_calls": [
        {"id": f"chatcmpl-tool-{serial}{n}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(args)}} for n, (name, args) in enumerate(calls)]}
    return {"id": f"x{serial}", "object": "chat.completion", "created": 0, "model": "replay-model",
            "prompt_token_ids": [1, 2, 3 + serial],
            "choices": [{"index": 0, "finish_reason": "tool_calls", "token_ids": ids, "message": message,
                         "logprobs": {"content": [{"token": t, "logprob": -0.5} for t in tokens]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": len(ids), "total_tokens": 3 + len(ids)}}


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    from envh.rollout.policies.localmodels import cache_root, load_tokenizer

    if not (cache_root() / "smollm2-135m" / "config.json").exists() and os.environ.get("CI") != "true":
        pytest.skip("the converted SmolLM2 model is not in the cache (dev/setup.d/local_llm.sh)")
    return load_tokenizer("smollm2")  # SmolLM2's own chat template: no tools, no tool calls


@pytest.fixture(scope="module")
def written_played(smollm2_tokenizer):
    """(trajectory, the requests the server received) of an episode whose replies came as
    vLLM gives them with logprobs: native calls, and the text as generated."""
    with LLMReplayServer() as server:
        replies = [Reply(body=vllm_body(smollm2_tokenizer, n, c, calls)) for n, (c, calls) in enumerate(WRITTEN)]
        t = play(server, replies, "written", EASY, token_ids=True)
        requests = server.chat_requests
    assert t.success and all(s.turn.written and "<tool_call>" in s.turn.written for s in t.steps), t.error
    return t, requests
