"""What each export sample holds: the replies as the model generated them, per-request
samples that are exactly the requests sent (with their own tools and system message), the
conversation split where the tools change, and verl's RL layout."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import envh
import pytest
from envh import TaskRef, errors
from envh.rollout import export
from envh.rollout.runner import run_episode
from envh.rollout.samples import clean
from envh.rollout.trajectory import EpisodeRequest, ModelTurn, StepRecord, Trajectory
from envh.testing_llm import LLMReplayServer, tool_reply
from envh.types import Observation

from .conftest import EASY, TEXT, WRITTEN, hermes_text, play

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:datasets")


def envh_cli(*args):
    return subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "150"})


def test_replies_are_the_text_the_model_generated_tool_calls_included(written_played, smollm2_tokenizer):
    t, _requests = written_played
    replies = [m for m in export.to_messages(t) if m["role"] == "assistant"]
    assert replies == [{"role": "assistant", "content": hermes_text(c, calls)} for c, calls in WRITTEN]
    # SmolLM2's own template renders no tools and no tool calls: the calls are in the text
    rendered = smollm2_tokenizer.apply_chat_template(export.to_messages(t), tokenize=False)
    assert rendered.count("<tool_call>") == 3 and '{"name": "combine", "arguments": {"i": 0, "j": 1' in rendered
    for sample in export.samples(t, per_request=True):
        assert sample.messages[-1]["content"].startswith(sample.messages[-1]["content"].split("<tool_call>")[0])
        assert "<tool_call>" in sample.messages[-1]["content"]


def test_per_request_samples_are_exactly_the_requests_sent(tmp_path):
    # max_turns=1: the third request holds the system prompt, the first observation, one
    # exchange and the new observation; the conversation holds every exchange before it
    with LLMReplayServer() as server:
        t = play(server, TEXT, "trim", EASY, tool_format="text", max_turns=1)
        sent = [r["messages"] for r in server.chat_requests]
    assert t.success and len(sent) == 3
    [conversation] = export.samples(t)
    third = [n for n, m in enumerate(conversation.messages) if m["role"] == "assistant"][2]
    assert third > len(sent[2])  # the full conversation: more context than the model had
    per_request = export.samples(t, per_request=True)
    assert [s.messages[:s.prompt] for s in per_request] == sent
    assert [s.messages[s.prompt:] for s in per_request] == [[export.reply_message(s.turn)] for s in t.steps]
    assert all(s.tools == [] for s in per_request)  # the text format sends no tools block


def test_the_per_request_option_of_the_cli(played, tmp_path):
    out, ts, requests = played
    path = tmp_path / "r.jsonl"
    proc = envh_cli("export", str(out), "--format", "trl", "--per-request", "-o", str(path))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == sum(len(t.steps) for t in ts.values()) and f"wrote {len(rows)} rows" in proc.stdout
    native = [r for r in rows if r["key"] == "native"]
    assert [r["prompt"] for r in native] == [export.samples(ts["native"], per_request=True)[n].messages[:-1]
                                             for n in range(4)]
    assert [json.loads(r["tools"]) for r in native] == [body["tools"] for body in requests[:4]]
    assert [len(r["completion"]) for r in rows] == [1] * len(rows)
    proc = envh_cli("export", str(out), "--format", "verl-rl", "--per-request", "-o", str(tmp_path / "x.parquet"))
    assert proc.returncode != 0 and "does not apply" in proc.stderr and not (tmp_path / "x.parquet").exists()


#: the leg plays a 4-number puzzle: its tools (positions 0..3) are not leg 0's (0..2, then 0..1)
ALTERNATE = {"bridge": "toy24", "layers": [{"kind": "chain", "mode": "alternate", "legs": [{"bridge": "toy24"}],
                                            "leg_tasks": [{"suite": "toy24", "split": "medium",
                                                           "instance_id": "1,2,6,6"}]}]}


@pytest.fixture(scope="module")
def alternating():
    """A chain in alternate mode: the tools (and so the system message) change every turn."""
    replies = [tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}), tool_reply("stop"), tool_reply("stop"),
               tool_reply("stop")]
    with LLMReplayServer(replies) as server:
        req = EpisodeRequest(key="alt", spec=envh.spec_to_data(envh.parse_spec(ALTERNATE)),
                             spec_id=envh.spec_id(ALTERNATE), task=EASY, seed=0, policy="openai:replay-model",
                             policy_options={"base_url": server.base_url, "backoff_s": 0.01}, max_steps=4)
        t = run_episode(req)
        sent = server.chat_requests
    assert t.error is None and len(sent) == len(t.steps) >= 3, t.error
    assert sent[0]["tools"] != sent[1]["tools"]
    return t, sent


def test_per_request_samples_carry_each_requests_tools_and_system_message(alternating):
    t, sent = alternating
    samples = export.samples(t, per_request=True)
    assert [s.tools for s in samples] == [body["tools"] for body in sent]
    assert [s.messages[0] for s in samples] == [body["messages"][0] for body in sent]
    # as sent, in the form chat templates take (call arguments as mappings, no null content)
    assert [s.messages[:s.prompt] for s in samples] == [[clean(m) for m in body["messages"]] for body in sent]
    assert any(m.get("tool_calls") for body in sent for m in body["messages"])


def test_the_conversation_is_split_where_the_tools_change(alternating, tmp_path):
    t, sent = alternating
    parts = export.samples(t)
    assert [p.turns for p in parts] == [[s.index] for s in t.steps]  # the tools change every turn
    for part in parts:
        body = sent[part.turns[0]]
        assert part.tools == body["tools"] and part.messages[:len(body["messages"])] == [clean(m) for m in body["messages"]]
    assert export.export([t], "messages", tmp_path / "m.jsonl") == len(parts)
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["tools"] for r in rows] == [body["tools"] for body in sent]


def test_token_rows_per_request_are_one_turn_each():
    steps = tuple(StepRecord(index=n, observation=Observation(text=f"o{n}"), turn=turn) for n, turn in enumerate([
        ModelTurn(prompt_token_ids=[1, 2], completion_token_ids=[3]),
        ModelTurn(prompt_token_ids=[3, 4], prompt_shared=2, completion_token_ids=[5])]))
    t = Trajectory(key="k", spec_id="s", steps=steps)
    assert [r["input_ids"] for r in export.token_rows(t)] == [[1, 2, 3, 4, 5]]
    rows = list(export.token_rows(t, per_request=True))
    assert [(r["input_ids"], r["loss_mask"], r["turns"]) for r in rows] == [([1, 2, 3], [0, 0, 1], [0]),
                                                                             ([1, 2, 3, 4, 5], [0, 0, 0, 0, 1], [1])]


def test_verl_rl_rows_hold_the_first_request_and_the_task(played, tmp_path):
    import pyarrow.parquet as pq

    out, ts, requests = played
    path = tmp_path / "rl.parquet"
    assert export.export(ts.values(), "verl-rl", path) == 3
    rows = {r["extra_info"]["key"]: r for r in pq.read_table(path).to_pylist()}
    native = rows["native"]
    assert native["prompt"] == requests[0]["messages"]
    assert native["data_source"] == "envh/toy24"
    assert native["reward_model"] == {"style": "rule", "ground_truth": str(EASY)}
    assert json.loads(native["extra_info"]["tools"]) == requests[0]["tools"]
    assert native["extra_info"]["success"] is True and rows["fail"]["extra_info"]["task"] == str(
        TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6"))
    with pytest.raises(errors.EnvhError, match="does not apply"):
        export.export(ts.values(), "verl-rl", tmp_path / "x.parquet", per_request=True)
