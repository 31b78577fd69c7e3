"""The rollout loop on bad and good replies: invalid, empty and pathological output is data,
a broken env ends only its own episode, a solved episode earns the base verdict's reward.

The engine here replays fixed replies (as token ids of the real tokenizer): the loop, the
parser, the env stack and the reward are what is under test, not the model."""

from __future__ import annotations

import envh
import pytest
from envh_grpo.generation import Generation, SamplingConfig
from envh_grpo.rewards import RewardConfig, cost_aware
from envh_grpo.rollout import PREFILL, Job, parse_reply, play
from envh_grpo.sequences import ChatSegments, pack

TASK = envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
SAMPLING = SamplingConfig(max_new_tokens=64)


class Replay:
    def __init__(self, tok, replies):
        self.tok, self.replies, self.calls = tok, list(replies), 0

    def generate(self, prompts, sampling, seeds):
        out = []
        for _ in prompts:
            text = self.replies[self.calls]
            ids = tuple(self.tok(text, add_special_tokens=False)["input_ids"]) if text else ()
            out.append(Generation(ids=ids, logprobs=tuple(-1.0 for _ in ids), finish="stop"))
        self.calls += 1
        return out


class BrokenToy24(type(envh.make("toy24"))):
    """A bridge whose engine dies on the second step."""

    def _step(self, action):
        if self.steps >= 1:
            raise envh.errors.EnvError("engine crashed")
        return super()._step(action)


def _play(tok, replies, env=None, **kw):
    seg = ChatSegments(tok, PREFILL)
    opts = {"max_turns": len(replies), "max_context": 4096} | kw
    (ep,) = play([Job(env=env or envh.make("toy24"), task=TASK, seed=0, group=0)], Replay(tok, replies), seg,
                 SAMPLING, **opts)
    return ep


def test_a_solved_episode_earns_the_verdict_and_every_term(tokenizer):
    ep = _play(tokenizer, ["combine(0, 1, mul)</action>", "combine(0, 1, mul)</action>", "stop()</action>"])
    assert ep.success and ep.stop == "terminated" and ep.facts.turns == 3 and ep.facts.invalid == 0
    terms = cost_aware(ep.facts, RewardConfig(), epoch=0)
    assert terms.solved == 10.0 and terms.efficiency == pytest.approx(1 - 3 / 70)
    assert terms.spam == pytest.approx(-0.1)  # the second reply repeats the first token for token
    assert terms.diversity == pytest.approx(0.5 * 2 / 3)  # combine(0,1,mul) twice, then stop


def test_empty_invalid_and_pathological_replies_are_invalid_turns(tokenizer):
    replies = ["", "((((" * 300 + "</action>", "combine(0, 1, pow)</action>", "combine(7, 9, add)</action>"]
    ep = _play(tokenizer, replies)
    assert ep.stop == "max_turns" and not ep.success and len(ep.turns) == 4
    assert ep.invalid_turns == (True, True, True, True)  # parse errors and an env error alike
    assert ep.turns[0].completion_ids == ()
    (sample,) = pack(ep.turns, [1.0] * 4)
    assert sum(sample.mask) == sum(len(t.completion_ids) for t in ep.turns)
    assert "not a valid action" in tokenizer.decode(list(ep.turns[1].prompt_ids))


def test_a_broken_env_ends_its_episode_only(tokenizer):
    ep = _play(tokenizer, ["combine(0, 1, mul)</action>", "combine(0, 1, mul)</action>", "stop()</action>"],
               env=BrokenToy24())
    assert ep.stop.startswith("env_error") and "engine crashed" in ep.stop and len(ep.turns) == 2
    assert not ep.success


def test_an_episode_that_cannot_fit_the_context_stops_before_generating(tokenizer):
    ep = _play(tokenizer, ["stop()</action>"], max_context=10)
    assert ep.stop == "context" and ep.turns == () and pack(ep.turns, []) == []


@pytest.mark.parametrize("text", ["", "   ", "</action>", "\x00\x01", "combine(0, 1, " + "9" * 5000 + ")",
                                  "combine(i=[[[[[[]]]]]], j=0, op=add)", "stop()" * 2000])
def test_parse_reply_never_raises(text):
    tools = envh.make("toy24").tools()
    action, problem = parse_reply(text, tools)
    assert (action is None) != (problem is None)


def test_a_workspace_layers_meta_action_counts_reach_diversity_and_spam(tokenizer):
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "workspace"}]})
    replies = ['note("try products first")</action>', 'note("again")</action>', 'note("and again")</action>',
               'note("once more")</action>', 'track("world")</action>', 'note("bad", 3)</action>',
               "combine(0, 1, mul)</action>", "combine(0, 1, mul)</action>", "stop()</action>"]
    ep = _play(tokenizer, replies, env=env)
    assert ep.success and ep.stop == "terminated"
    # the counts come from the workspace layer's state: 4 notes (the refused one is not counted), 1 track
    assert ep.facts.meta == {"track": 1, "commit": 0, "recall": 0, "note": 4}
    assert ep.facts.meta_turns == ("note", "note", "note", "note", "track", "", "", "", "")
    assert ep.invalid_turns[5]  # the workspace refused note's extra argument
    terms = cost_aware(ep.facts, RewardConfig(), epoch=0)
    distinct = len(set(ep.facts.actions)) / 9  # valid actions: 4 notes, track, 2× combine, stop
    assert terms.raw_diversity == pytest.approx(0.5 * (distinct + 2 / 4))
    assert terms.raw_spam == 1 + 1  # one repeated reply + one note beyond the allowance of 3
    plain = _play(tokenizer, replies[6:])
    assert plain.facts.meta is None  # no workspace layer: the terms are the plain ones


def test_meta_actions_are_read_from_the_answered_effect_and_from_older_records() -> None:
    from envh_grpo.rollout import meta_action

    now = {"envh": [{"layer": "workspace", "kind": "workspace", "action": "answered", "meta": "note"}]}
    before = {"envh": [{"layer": "workspace", "kind": "workspace", "action": "meta", "meta": "track"}]}
    assert (meta_action(now), meta_action(before)) == ("note", "track")
    assert meta_action({**now, "error": {"type": "invalid_arguments", "message": "m"}}) == ""  # refused
    assert meta_action({"envh": [{"kind": "other", "action": "answered", "meta": "note"}]}) == ""
