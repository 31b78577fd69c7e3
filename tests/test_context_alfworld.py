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

pytest.importorskip("alfworld")  # the repository conftest turns this skip into a failure in CI

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
def episode(tmp_path_factory, tokenizer):
    """(stored trajectory, chat requests the server received, the game) of one long episode."""
    from envh.testing_llm import LLMReplayServer, text_reply
    from envh_alfworld.builder import build_games
    from envh_alfworld.examples import EXAMPLE_ROOMS
    from envh_alfworld.rooms import room_from_dict

    data = tmp_path_factory.mktemp("alfworld-context")
    (game,) = build_games([room_from_dict(EXAMPLE_ROOMS["pick_and_place_simple"])], data)
    spec = {"bridge": "alfworld", "config": {"data_path": str(data), "max_steps": 50}}
    replies = [text_reply(f"<action>{COMMANDS[n % 2]}</action>") for n in range(STEPS)]
    with LLMReplayServer(replies) as server:
        options = {"base_url": server.base_url, "backoff_s": 0.01, "tokenizer": "smollm2", "max_context": CONTEXT,
                   "max_tokens": MAX_TOKENS, "think": False}
        request = EpisodeRequest(key="long", spec=envh.spec_to_data(envh.parse_spec(spec)), spec_id=envh.spec_id(spec),
                                 task=game.task, seed=0, policy="openai:replay-model", policy_options=options,
                                 run_id="r", max_steps=STEPS)
        played = run_episode(request)
        sent = [body["messages"] for body in server.chat_requests]
    out = tmp_path_factory.mktemp("alfworld-context-run")
    with TrajectoryStore(out) as store:
        store.append(played)
        (stored,) = list(store.query())  # what a trainer reads back, through JSON
    return stored, sent, game


def _tokens(tokenizer, messages):
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return len(ids["input_ids"] if hasattr(ids, "keys") else ids)


def test_the_episode_is_long_and_sound(episode):
    t, sent, _game = episode
    assert t.error_class is None and t.stop == "max_steps", (t.error_class, t.error)
    assert len(t.steps) == STEPS == len(sent) and all(s.proposed is not None for s in t.steps)
    assert t.verdict is not None and t.verdict.success is False  # looking around never wins: the verdict is the env's


def test_the_recorded_requests_are_exactly_what_was_sent(episode):
    t, sent, _game = episode
    assert request_messages(t.steps) == sent


def test_history_past_the_context_is_trimmed_oldest_first_keeping_the_task(episode, tokenizer):
    t, sent, game = episode
    first_observation = t.initial_observation.text
    assert "Your task is to:" in first_observation
    task_line = first_observation[first_observation.index("Your task is to:"):].splitlines()[0]
    replies = [s.turn.prefill + (s.turn.text or "") for s in t.steps]
    trimmed = 0
    for n, (step, messages) in enumerate(zip(t.steps, sent, strict=True)):
        ctx = step.turn.context
        assert ctx["strategy"] == "drop-oldest+keep-first" and ctx["budget"] == BUDGET, ctx
        assert ctx["counted_with"] == "tokenizer:smollm2" and ctx["fits"], ctx
        # the real tokenizer, on the messages as the server received them
        assert ctx["prompt_tokens"] == _tokens(tokenizer, messages) <= BUDGET
        assert messages[0]["role"] == "system" and task_line in messages[1]["content"]
        kept = [m["content"] for m in messages if m["role"] == "assistant"]
        assert kept == replies[ctx["dropped"]:n]  # the newest exchanges, in order: the oldest went first
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
        untrimmed.append({"role": "assistant", "content": step.turn.prefill + (step.turn.text or "")})
    assert _tokens(tokenizer, untrimmed[:-1]) > BUDGET >= last.turn.context["prompt_tokens"]
