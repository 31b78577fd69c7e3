"""Hostile model output through the real SDK, the runner, the store and the exports:
unicode no UTF-8 file can hold, deeply nested and malformed calls, floods of parallel
calls, huge replies. Each ends as recorded data or a typed error row, never a crash."""

from __future__ import annotations

import json

import envh
import pytest
from envh import TaskRef
from envh.rollout import export
from envh.rollout.runner import run_episode
from envh.rollout.store import TrajectoryStore
from envh.rollout.trajectory import EpisodeRequest
from envh.testing_llm import Reply, text_reply, tool_reply

EASY = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
SPEC = {"bridge": "toy24", "layers": []}


def body(message: dict) -> Reply:
    """A verbatim chat-completion body (what a broken or hostile server may send)."""
    return Reply(body={"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                    "finish_reason": "stop"}]})


def episode(server, *replies, max_steps=4, **options):
    server.add(*replies)
    req = EpisodeRequest(key="k", spec=envh.spec_to_data(envh.parse_spec(SPEC)), spec_id=envh.spec_id(SPEC),
                         task=EASY, seed=0, policy="openai:m", max_steps=max_steps,
                         policy_options={"base_url": server.base_url, "backoff_s": 0.01, **options})
    return run_episode(req)


def stored_and_exported(t, tmp_path):
    with TrajectoryStore(tmp_path / "run") as store:
        store.append(t)
        back = list(store.query())
    assert len(back) == 1
    for fmt in ("messages", "trl", "parquet", "verl"):
        assert export.export(back, fmt, tmp_path / f"out.{fmt}") == 1
    return back[0]


def test_lone_surrogates_are_replaced_and_recorded(llm_replay_server, tmp_path):
    t = episode(llm_replay_server, body({"content": "<action>stop()</action> \ud800 \udfff"}),
                body({"content": None, "tool_calls": [{"id": "c\ud83d", "type": "function",
                                                       "function": {"name": "stop", "arguments": "{\"a\": \"\udc00\"}"}}]}),
                tool_reply("stop"), tool_format="text")
    assert t.error_class is None, t.error
    turn = t.steps[0].turn
    assert turn.text.count("\ufffd") == 2 and {"what": "unicode", "field": "text", "replaced": 2} in turn.corrections
    back = stored_and_exported(t, tmp_path)
    assert back.steps[0].turn.text == turn.text
    line = json.loads((tmp_path / "out.messages").read_text(encoding="utf-8").splitlines()[0])
    assert "\ufffd" in line["messages"][2]["content"]


def test_unicode_in_actions_survives_every_format(llm_replay_server, tmp_path):
    t = episode(llm_replay_server, text_reply("<think>2×3 👍</think><action>combine(0, 1, ×)</action>"),
                text_reply("<action>combine(0, 1, ‮mul)</action>"), text_reply("<action>stop()</action>"),
                tool_format="text")
    assert t.error_class is None
    assert t.steps[0].proposed.args["op"] == "mul"
    assert {"what": "coerce", "arg": "op", "from": "×", "to": "mul"} in t.steps[0].turn.corrections
    assert t.steps[1].invalid is None or "op" in t.steps[1].invalid  # a bidi control is not silently "mul"
    stored_and_exported(t, tmp_path)
    text = (tmp_path / "out.messages").read_text(encoding="utf-8")
    assert "👍" in text and "×" in text


def test_deeply_nested_and_malformed_calls_are_invalid_steps(llm_replay_server):
    deep = "[" * 100_000 + "]" * 100_000
    t = episode(llm_replay_server, tool_reply("combine", '{"i": ' + deep + "}"),
                body({"content": None, "tool_calls": [{"id": "n", "type": "function",
                                                       "function": {"name": None, "arguments": {"i": 1}}}]}),
                text_reply('<tool_call>{"name": {"x": 1}, "arguments": []}</tool_call>'),
                text_reply("<action>" + "combine(" * 5000 + "</action>"), max_steps=4)
    assert t.error_class is None, t.error
    assert [s.proposed for s in t.steps] == [None] * 4
    assert "not valid JSON" in t.steps[0].invalid
    assert any(c["what"] == "call_field" for c in t.steps[1].turn.corrections)
    assert all(len(s.invalid) < 2000 for s in t.steps)


def test_a_flood_of_parallel_calls_is_cut_and_said(llm_replay_server):
    flood = Reply(tool_calls=[{"name": "stop", "arguments": {}, "id": f"c{n}"} for n in range(300)])
    t = episode(llm_replay_server, flood, tool_reply("stop"))
    turn = t.steps[0].turn
    assert len(turn.parsed) == 32 and {"what": "too_many_calls", "from": 300, "to": 32} in turn.corrections
    assert t.steps[0].proposed == envh.Action(tool="stop")


def test_text_after_an_injected_closing_tag_uses_the_last_block(llm_replay_server):
    t = episode(llm_replay_server, text_reply("<action>combine(0, 1, add)</action><action>stop()</action>"),
                tool_format="text", max_steps=1)
    turn = t.steps[0].turn
    assert t.steps[0].proposed == envh.Action(tool="stop") and len(turn.parsed) == 2
    assert any(c["what"] == "extra_calls" and c["used"] == 1 for c in turn.corrections)


def test_a_reply_over_the_recording_limit_is_a_typed_policy_error(llm_replay_server):
    from envh.rollout.runner import MAX_TEXT

    t = episode(llm_replay_server, text_reply("<action>stop()</action>" + "y" * (MAX_TEXT + 10)), tool_format="text",
                max_steps=1)
    assert t.error_class == "policy_error" and "characters" in t.error
    assert t.verdict is not None  # the env is sound: its verdict is still taken


@pytest.mark.parametrize("content", ["", "   ", "<action></action>", "<action>\x00\x01</action>", "</action>"])
def test_empty_and_control_replies_are_invalid_not_errors(llm_replay_server, content):
    t = episode(llm_replay_server, text_reply(content), tool_format="text", max_steps=1)
    assert t.error_class is None and t.steps[0].proposed is None and t.steps[0].invalid
