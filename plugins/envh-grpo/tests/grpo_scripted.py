"""Test helpers shared by the rollout tests and the processes they launch: an engine whose
replies are scripted per (episode, turn), one that counts batches, and the equality of two
rollouts term for term."""

from __future__ import annotations

import torch
from envh_grpo.generation import Generation
from envh_grpo.rollout import sample_seed


class Counting:
    """Passes every call to ``engine``; records the size of every batch and every seed."""

    def __init__(self, engine):
        self.engine, self.batches, self.seeds = engine, [], []

    def generate(self, prompts, sampling, seeds):
        self.batches.append(len(prompts))
        self.seeds += list(seeds)
        return self.engine.generate(prompts, sampling, seeds)


class Script:
    """Replies by (episode, turn), found from the per-episode sampling seed: what a reply
    is does not depend on the batch, as with a real engine."""

    def __init__(self, tok, replies, seed):
        self.tok = tok
        self.by_seed = {sample_seed(seed, j, t): text for j, texts in enumerate(replies) for t, text in enumerate(texts)}
        self.turn_of = {sample_seed(seed, j, t): t for j, texts in enumerate(replies) for t in range(len(texts))}

    def generate(self, prompts, sampling, seeds):
        out = []
        for seed in seeds:
            ids = tuple(self.tok(self.by_seed[seed], add_special_tokens=False)["input_ids"])
            out.append(Generation(ids=ids, logprobs=tuple(-0.5 for _ in ids), finish="stop"))
        return out


REPLIES = [
    ["combine(0, 1, mul)</action>", "combine(0, 1, mul)</action>", "stop()</action>"],  # solved
    ["hello</action>", "combine(0, 9, mul)</action>", "stop()</action>"],  # invalid, env error, stop
    ['note("a")</action>', 'note("b")</action>', 'track("world")</action>', 'note("c")</action>',
     'note("d")</action>', "combine(0, 1, mul)</action>"],  # meta-actions past the allowance
    ['recall("x")</action>', 'commit("solve", "todo")</action>', "combine(0, 1, mul)</action>",
     "combine(0, 1, mul)</action>", "stop()</action>"],
]


def assert_equal(inproc, pooled, atol):
    """The same episodes: prompts and completions token for token, log-probs within
    ``atol``, outcome, invalid turns, texts, and the facts the reward reads."""
    assert len(inproc) == len(pooled)
    for a, b in zip(inproc, pooled):
        assert [t.prompt_ids for t in a.turns] == [t.prompt_ids for t in b.turns]
        assert [t.completion_ids for t in a.turns] == [t.completion_ids for t in b.turns]
        for ta, tb in zip(a.turns, b.turns):
            assert torch.allclose(torch.tensor(ta.logprobs), torch.tensor(tb.logprobs), atol=atol)
        assert (a.success, a.score, a.stop, a.invalid_turns, a.texts, a.group) == \
            (b.success, b.score, b.stop, b.invalid_turns, b.texts, b.group)
        assert a.facts == b.facts  # the reward reads the same facts, meta-action counts included
