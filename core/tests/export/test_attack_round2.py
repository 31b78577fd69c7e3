"""Attacks on the exports (round 2): conversations of trimmed episodes, and token rows
whose logprobs or prompt ids were not recorded for every turn."""

from __future__ import annotations

from envh.rollout import export
from envh.rollout.trajectory import ModelTurn, StepRecord, Trajectory, token_ids
from envh.testing_llm import LLMReplayServer
from envh.types import Observation

from .conftest import EASY, TEXT, play


def test_a_conversation_whose_history_was_all_dropped_has_each_observation_once():
    # max_turns=0: every request is the system prompt, the first observation (kept, it
    # states the task) and the current one, joined into one user message
    with LLMReplayServer() as server:
        t = play(server, TEXT, "text0", EASY, tool_format="text", max_turns=0)
        requests = server.chat_requests
    assert t.success and len(requests) == 3
    first = requests[0]["messages"][1]["content"]
    assert requests[1]["messages"][1]["content"].startswith(first + "\n\n")  # what the model saw
    messages = export.to_messages(t)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users[0] == first and all(not u.startswith(first) for u in users[1:])
    # each new observation is the one the model got that turn, after the kept first one
    assert users[1:] == [r["messages"][1]["content"][len(first) + 2:] for r in requests[1:]]


def _step(index: int, turn: ModelTurn) -> StepRecord:
    return StepRecord(index=index, observation=Observation(text=f"o{index}"), turn=turn)


def test_prompt_ids_rebuild_across_a_turn_that_recorded_no_completion_ids():
    # the policy shares prefixes with its last prompt whenever a prompt had ids; a turn
    # whose engine gave prompt ids but no completion ids still moves that prefix
    steps = [_step(0, ModelTurn(prompt_token_ids=[1, 2, 3], completion_token_ids=[4])),
             _step(1, ModelTurn(prompt_token_ids=[5, 6], prompt_shared=3, completion_token_ids=None)),
             _step(2, ModelTurn(prompt_token_ids=[7], prompt_shared=5, completion_token_ids=[8]))]
    rebuilt = token_ids(steps)
    assert rebuilt[1] is None
    assert rebuilt[2] == ([1, 2, 3, 5, 6, 7], [8])


def test_token_rows_do_not_claim_certainty_for_tokens_without_logprobs():
    steps = [_step(0, ModelTurn(prompt_token_ids=[1, 2], completion_token_ids=[3, 4], logprobs=[-0.5, -1.0])),
             _step(1, ModelTurn(prompt_token_ids=[9], prompt_shared=2 + 0, completion_token_ids=[5], logprobs=None))]
    # turn 1's prompt is [1, 2, 9]: not an extension of row 0 ([1, 2, 3, 4]), so two rows
    t = Trajectory(key="k", spec_id="s", steps=tuple(steps))
    rows = list(export.token_rows(t))
    assert rows[0]["logprobs"] == [0.0, 0.0, -0.5, -1.0]
    # a log-probability of 0.0 says the sampler was certain: a trainer would take it as the
    # behaviour policy's; a turn that recorded none has none in its row
    assert rows[1]["logprobs"] is None
    merged = Trajectory(key="k", spec_id="s", steps=(
        steps[0], _step(1, ModelTurn(prompt_token_ids=[3, 4, 9], prompt_shared=2, completion_token_ids=[5]))))
    [row] = list(export.token_rows(merged))
    assert row["input_ids"] == [1, 2, 3, 4, 9, 5] and row["logprobs"] is None


def _body(logprobs: list[dict[str, object]]) -> dict[str, object]:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "replay-model", "prompt_token_ids": [1, 2, 3],
            "choices": [{"index": 0, "finish_reason": "stop", "token_ids": [7, 8],
                         "message": {"role": "assistant", "content": "<action>stop()</action>"},
                         "logprobs": {"content": logprobs}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


def test_malformed_logprobs_from_a_server_are_not_recorded_as_numbers():
    from envh.testing_llm import Reply

    good = [{"token": "a", "logprob": -0.25}, {"token": "b", "logprob": -1}]
    bad = [[{"token": "a", "logprob": None}, good[1]],     # null: was a TypeError, the episode lost
           [{"token": "a"}, good[1]],                      # missing: was 0.0, a certain token
           [{"token": "a", "logprob": "nan"}, good[1]]]    # was NaN in the store
    with LLMReplayServer() as server:
        ts = [play(server, [Reply(body=_body(lp))], f"lp{n}", EASY, tool_format="text", token_ids=True)
              for n, lp in enumerate([good, *bad])]
    for t in ts:
        assert t.error_class is None and t.steps[0].turn.completion_token_ids == [7, 8], t.error
    assert ts[0].steps[0].turn.logprobs == [-0.25, -1.0]
    assert [t.steps[0].turn.logprobs for t in ts[1:]] == [None, None, None]
