"""The replay server, driven through the real openai SDK (what third parties will do)."""

from __future__ import annotations

import json
import threading
import time

import openai
import pytest
from envh.testing_llm import LLMReplayServer, error_reply, load_replies, slow, text_reply, tool_reply

MESSAGES = [{"role": "user", "content": "hello"}]


def client(server, **kw):
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, **kw)


def ask(c, text="hello"):
    return c.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])


def test_replies_in_order_in_both_formats(llm_replay_server):
    llm_replay_server.add(tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}),
                          text_reply("<action>stop()</action>"), tool_reply("combine", "{not json"))
    c = client(llm_replay_server)
    call = ask(c).choices[0]
    assert call.finish_reason == "tool_calls"
    assert json.loads(call.message.tool_calls[0].function.arguments) == {"i": 0, "j": 1, "op": "mul"}
    text = ask(c).choices[0]
    assert text.message.content == "<action>stop()</action>" and text.message.tool_calls is None
    assert ask(c).choices[0].message.tool_calls[0].function.arguments == "{not json"
    assert llm_replay_server.remaining == 0
    assert [r["messages"][0]["content"] for r in llm_replay_server.chat_requests] == ["hello"] * 3


def test_an_exhausted_script_is_a_clear_client_error(llm_replay_server):
    with pytest.raises(openai.BadRequestError, match="no recorded reply left for chat request #1"):
        ask(client(llm_replay_server))


def test_errors_and_slow_replies(llm_replay_server):
    llm_replay_server.add(error_reply(500), error_reply(429, "slow down"), slow(text_reply("late"), 2.0),
                          slow(text_reply("on time"), 0.2))
    c = client(llm_replay_server, timeout=0.5)
    with pytest.raises(openai.InternalServerError):
        ask(c)
    with pytest.raises(openai.RateLimitError, match="slow down"):
        ask(c)
    with pytest.raises(openai.APITimeoutError):
        ask(c)
    assert ask(c).choices[0].message.content == "on time"


def test_keyed_replies_match_by_substring_of_the_last_message():
    replies = {"kitchen": text_reply("<action>go to kitchen</action>"),
               "garden": [text_reply("first"), text_reply("then always this")]}
    with LLMReplayServer([text_reply("fallback")], keyed=replies) as server:
        c = client(server)
        assert ask(c, "You are in the kitchen.").choices[0].message.content == "<action>go to kitchen</action>"
        assert ask(c, "kitchen").choices[0].message.content == "<action>go to kitchen</action>"
        assert [ask(c, "garden").choices[0].message.content for _ in range(3)] == \
            ["first", "then always this", "then always this"]
        assert ask(c, "somewhere else").choices[0].message.content == "fallback"


def test_a_custom_key_function():
    with LLMReplayServer(keyed={"m-big": text_reply("big")}, key=lambda body: body["model"]) as server:
        reply = client(server).chat.completions.create(model="m-big", messages=MESSAGES)
        assert reply.choices[0].message.content == "big"


def test_requests_run_concurrently(llm_replay_server):
    llm_replay_server.add(*[slow(text_reply(str(n)), 0.5) for n in range(4)])
    c = client(llm_replay_server)
    threads = [threading.Thread(target=ask, args=(c,)) for _ in range(4)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.monotonic() - t0 < 1.5


def test_embeddings_and_models(llm_replay_server):
    c = client(llm_replay_server)
    data = c.embeddings.create(model="e", input=["move the red block", "move the red cube", "bake a cake"]).data
    a, b, z = (d.embedding for d in data)
    assert len(a) == 32 and abs(sum(x * x for x in a) - 1) < 1e-9

    def cos(u, v):
        return sum(x * y for x, y in zip(u, v, strict=True))

    assert cos(a, b) > cos(a, z)
    again = c.embeddings.create(model="e", input="move the red block").data[0].embedding
    assert again == a
    assert [m.id for m in c.models.list().data] == ["replay-model"]


def test_recordings_load_from_json_and_jsonl(tmp_path, llm_replay_server):
    verbatim = {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "verbatim"}}]}
    lines = [{"content": "<action>look</action>"}, {"status": 500}, verbatim]
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    (tmp_path / "r.json").write_text(json.dumps([{"tool_calls": [{"name": "stop", "arguments": {}}]}]))
    llm_replay_server.add(*load_replies(tmp_path / "r.jsonl"), *load_replies(tmp_path / "r.json"))
    c = client(llm_replay_server)
    assert ask(c).choices[0].message.content == "<action>look</action>"
    with pytest.raises(openai.InternalServerError):
        ask(c)
    assert ask(c).choices[0].message.content == "verbatim"
    assert ask(c).choices[0].message.tool_calls[0].function.name == "stop"
    (tmp_path / "bad.json").write_text(json.dumps([{"contnet": "typo"}]))
    with pytest.raises(ValueError, match=r"Unknown reply fields \['contnet'\]"):
        load_replies(tmp_path / "bad.json")


def test_stop_cuts_slow_replies_short():
    server = LLMReplayServer([slow(text_reply("never"), 30.0)]).start()
    thread = threading.Thread(target=lambda: pytest.raises(openai.APIConnectionError, ask, client(server)))
    thread.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    server.stop()
    thread.join(timeout=5)
    assert time.monotonic() - t0 < 3 and not thread.is_alive()
