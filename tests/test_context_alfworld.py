"""Context trimming on a long real ALFWorld episode (envh core + envh-alfworld).

The chat policy talks to the replay server (real SDK, real HTTP) and plays a game built
with ALFWorld's own generator in the real AlfredTWEnv/TextWorld engine, through the
episode runner; prompts are counted with the real SmolLM2 tokenizer against a 1024-token
context. No model is run: the replies are scripted, so the test isolates what the policy
sends (the same fitting code every chat policy uses) and what the trajectory records.
"""

from __future__ import annotations

import os

import envh
import pytest
from envh.rollout.runner import run_episode
from envh.rollout.store import TrajectoryStore
from envh.rollout.trajectory import EpisodeRequest, request_messages

CONTEXT, MAX_TOKENS = 1024, 64
BUDGET = CONTEXT - MAX_TOKENS - 8  # what the prompt may use: the context less the completion
STEPS = 14
COMMANDS = ["look", "inventory"]


@pytest.fixture(scope="module")
def tokenizer():
    from envh.rollout.policies.localmodels import cache_root, load_tokenizer

    if not (cache_root() / "smollm2-135m" / "config.json").exists() and os.environ.get("CI") != "true":
        pytest.skip("the converted SmolLM2 model is not in the cache (dev/setup.d/local_llm.sh)")
    return load_tokenizer("smollm2")


@pytest.fixture(scope="module")
def game(tmp_path_factory):
    # skipped at set-up, not at collection: the repository conftest turns this skip into a
    # failure in CI (a module-level skip at collection would get past it)
    pytest.importorskip("alfworld")
    from envh.hostpaths import granted
    from envh_alfworld.builder import build_games
    from envh_alfworld.examples import EXAMPLE_ROOMS
    from envh_alfworld.rooms import room_from_dict

    data = tmp_path_factory.mktemp("alfworld-context")
    (built,) = build_games([room_from_dict(EXAMPLE_ROOMS["pick_and_place_simple"])], data)
    with granted(data):  # the caller's data (--data), for every spec the tests build on it
        yield built, {"bridge": "alfworld", "config": {"data_path": str(data), "max_steps": 50}}


def _replies(tool_format):
    from envh.testing_llm import Reply, text_reply, tool_reply

    if tool_format == "text":
        return [text_reply(f"<action>{COMMANDS[n % 2]}</action>") for n in range(STEPS)]
    replies = [tool_reply("do", {"command": COMMANDS[n % 2]}) for n in range(STEPS)]
    # two calls in one reply: the second is answered "not executed" until trimming drops it
    replies[1] = Reply(tool_calls=[{"name": "do", "arguments": {"command": "inventory"}, "id": "two-a"},
                                   {"name": "do", "arguments": {"command": "look"}, "id": "two-b"}])
    return replies


@pytest.fixture(scope="module", params=["text", "native"])
def episode(request, tmp_path_factory, tokenizer, game):
    """(stored trajectory, chat requests the server received) of one long episode."""
    from envh.testing_llm import LLMReplayServer

    built, spec = game
    with LLMReplayServer(_replies(request.param)) as server:
        options = {"base_url": server.base_url, "backoff_s": 0.01, "tokenizer": "smollm2", "max_context": CONTEXT,
                   "max_tokens": MAX_TOKENS, "think": False, "tool_format": request.param}
        plan = EpisodeRequest(key="long", spec=envh.spec_to_data(envh.parse_spec(spec)), spec_id=envh.spec_id(spec),
                              task=built.task, seed=0, policy="openai:replay-model", policy_options=options,
                              run_id="r", max_steps=STEPS)
        played = run_episode(plan)
        sent = [body["messages"] for body in server.chat_requests]
    out = tmp_path_factory.mktemp("alfworld-context-run")
    with TrajectoryStore(out) as store:
        store.append(played)
        (stored,) = list(store.query())  # what a trainer reads back, through JSON
    return stored, sent


def _tokens(tokenizer, messages):
    # SmolLM2's template concatenates ``content``, which a message of only tool calls lacks
    messages = [{**m, "content": m.get("content") or ""} for m in messages]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return len(ids["input_ids"] if hasattr(ids, "keys") else ids)


def test_the_episode_is_long_and_sound(episode):
    t, sent = episode
    assert t.error_class is None and t.stop == "max_steps", (t.error_class, t.error)
    assert len(t.steps) == STEPS == len(sent) and all(s.proposed is not None for s in t.steps)
    assert t.verdict is not None and t.verdict.success is False  # looking around never wins: the verdict is the env's


def test_the_recorded_requests_are_exactly_what_was_sent(episode):
    t, sent = episode
    assert request_messages(t.steps) == sent


def test_history_past_the_context_is_trimmed_oldest_first_keeping_the_task(episode, tokenizer):
    t, sent = episode
    first_observation = t.initial_observation.text
    assert "Your task is to:" in first_observation
    task_line = first_observation[first_observation.index("Your task is to:"):].splitlines()[0]
    replies = [_reply(s.turn) for s in t.steps]
    trimmed = 0
    for n, (step, messages) in enumerate(zip(t.steps, sent, strict=True)):
        ctx = step.turn.context
        assert ctx["strategy"] == "drop-oldest+keep-first" and ctx["budget"] == BUDGET, ctx
        assert ctx["counted_with"] == "tokenizer:smollm2" and ctx["fits"], ctx
        # the real tokenizer, on the messages as the server received them
        assert ctx["prompt_tokens"] == _tokens(tokenizer, messages) <= BUDGET
        assert messages[0]["role"] == "system" and task_line in messages[1]["content"]
        kept = [_said(m) for m in messages if m["role"] == "assistant"]
        assert kept == replies[ctx["dropped"]:n]  # the newest exchanges, in order: the oldest went first
        called = {c["id"] for m in messages for c in m.get("tool_calls") or []}
        assert all(m["tool_call_id"] in called for m in messages if m["role"] == "tool")  # no orphaned answer
        assert ctx["exchanges"] == n
        trimmed += ctx["dropped"] > 0
    # the later requests only fit because exchanges were dropped
    assert trimmed >= 4 and t.steps[0].turn.context["dropped"] == 0
    drops = [s.turn.context["dropped"] for s in t.steps]
    assert drops == sorted(drops), drops
    last = t.steps[-1]
    untrimmed = [sent[0][0]]
    for step, messages in zip(t.steps, sent, strict=True):
        untrimmed.append(messages[-1])  # each turn's new observation
        untrimmed.append({"role": "assistant", "content": _reply(step.turn)})
    assert _tokens(tokenizer, untrimmed[:-1]) > BUDGET >= last.turn.context["prompt_tokens"]


def _reply(turn):
    """What the model said in a turn: its text, or its calls."""
    if turn.tool_calls:
        return " ".join(f"{c['name']}{c['arguments']}" for c in turn.tool_calls)
    return turn.prefill + (turn.text or "")


def _said(message):
    if message.get("tool_calls"):
        return " ".join(f"{c['function']['name']}{c['function']['arguments']}" for c in message["tool_calls"])
    return message["content"]


def test_the_conversation_export_of_a_trimmed_episode_has_each_turn_once(episode):
    from envh.rollout.export import to_messages

    t, sent = episode
    messages = to_messages(t, raw_arguments=True)
    said = [_said(m) if m.get("tool_calls") else m["content"] for m in messages if m["role"] == "assistant"]
    assert said == [_reply(s.turn) for s in t.steps]
    assert messages[:2] == sent[0] and [m["role"] for m in messages].count("system") == 1
    # every observation the policy was shown appears once, in order (the last one's reply ended the run)
    shown = [m["content"] for m in messages if m["role"] in ("user", "tool") and "Not executed" not in m["content"]]
    newest = [next(m for m in reversed(r) if "Not executed" not in (m["content"] or "")) for r in sent]
    assert shown == [m["content"] for m in newest]
