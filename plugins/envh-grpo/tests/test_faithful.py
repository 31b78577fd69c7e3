"""Token faithfulness on a real model: the ids trained on are the ids the engine produced,
the mask covers only the policy's tokens, across turns; the verdict is the base's."""

from __future__ import annotations

from collections import Counter

import envh
import pytest
import torch
from envh_grpo.generation import HFEngine, SamplingConfig
from envh_grpo.loss import token_logprobs
from envh_grpo.rollout import PREFILL, Job, play, verdict
from envh_grpo.sequences import ChatSegments, pack

pytestmark = pytest.mark.slow


class Recording:
    """Passes every call to the real engine and keeps what went in and came out."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []

    def generate(self, prompts, sampling, seeds):
        out = self.engine.generate(prompts, sampling, seeds)
        self.calls += [(tuple(p), g) for p, g in zip(prompts, out)]
        return out


@pytest.fixture(scope="module")
def played(smollm2):
    _, tok, model = smollm2
    engine = Recording(HFEngine(model, tok))
    seg = ChatSegments(tok, PREFILL)
    task = envh.make("toy24").list_tasks("easy")[0]
    jobs = [Job(env=envh.make("toy24"), task=task, seed=i, group=0) for i in range(2)]
    sampling = SamplingConfig(max_new_tokens=6, temperature=1.0)
    episodes = play(jobs, engine, seg, sampling, max_turns=2, max_context=4096, seed=3)
    return tok, model, engine, episodes


def test_turns_hold_exactly_what_the_engine_saw_and_produced(played):
    _, _, engine, episodes = played
    turns = [t for ep in episodes for t in ep.turns]
    assert len(turns) == len(engine.calls) >= 3
    made = Counter((p, g.ids, g.logprobs) for p, g in engine.calls)
    kept = Counter((t.prompt_ids, t.completion_ids, t.logprobs) for t in turns)
    assert kept == made
    assert any(len(ep.turns) == 2 for ep in episodes)  # multi-turn included


def test_samples_train_on_the_generated_ids_with_a_policy_only_mask(played):
    tok, model, _, episodes = played
    for ep in (e for e in episodes if len(e.turns) == 2):
        t0, t1 = ep.turns
        assert t1.prompt_ids[:len(t0.prompt_ids) + len(t0.completion_ids)] == t0.prompt_ids + t0.completion_ids
        (sample,) = pack(ep.turns, [1.0, -1.0])
        assert sample.ids == t1.prompt_ids + t1.completion_ids
        policy = [i for i, m in zip(sample.ids, sample.mask) if m]
        assert policy == list(t0.completion_ids + t1.completion_ids)
        between = sample.ids[len(t0.prompt_ids) + len(t0.completion_ids):len(t1.prompt_ids)]
        assert all(m == 0 for m in sample.mask[len(t0.prompt_ids) + len(t0.completion_ids):len(t1.prompt_ids)])
        assert "<|im_start|>user" in tok.decode(list(between))  # the env turn is there, masked out
        # the trainer's log-probs of those positions equal the engine's sampling log-probs
        ids = torch.tensor([sample.ids])
        with torch.no_grad():
            logp = token_logprobs(model(input_ids=ids).logits[:, :-1], ids[:, 1:], 1.0)[0]
        positions = [k - 1 for k, m in enumerate(sample.mask) if m]
        got = logp[positions]
        want = torch.tensor(t0.logprobs + t1.logprobs)
        assert torch.allclose(got, want, atol=2e-3), (got, want)
        return
    pytest.fail("no two-turn episode to check")


def test_windowed_history_packs_one_sample_per_turn(smollm2):
    _, tok, model = smollm2
    seg = ChatSegments(tok, PREFILL)
    task = envh.make("toy24").list_tasks("easy")[0]
    eps = play([Job(env=envh.make("toy24"), task=task, seed=0, group=0)], HFEngine(model, tok), seg,
               SamplingConfig(max_new_tokens=4, temperature=1.0, stop=()), max_turns=3, max_context=4096,
               history=0, seed=1)
    (ep,) = eps
    samples = pack(ep.turns, [1.0] * len(ep.turns))
    if ep.stop == "max_turns":
        assert len(samples) == 3
    for s, t in zip(samples, ep.turns):
        assert s.ids == t.prompt_ids + t.completion_ids and sum(s.mask) == len(t.completion_ids)


def test_verdict_comes_from_the_base_or_a_chain_of_base_verdicts():
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "chain", "legs": [{"bridge": "toy24"}]}]})
    env.reset(task=envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4"))
    for action in (envh.Action(tool="combine", args={"i": 0, "j": 1, "op": "mul"}),
                   envh.Action(tool="combine", args={"i": 0, "j": 1, "op": "mul"}), envh.Action(tool="stop")):
        env.step(action)
    assert envh.iter_layers(env)[-1].evaluate().success  # the first leg alone is solved
    assert verdict(env).success is False  # the chain needs its second leg as well
    plain = envh.make("toy24")
    plain.reset(task=envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4"))
    for action in (envh.Action(tool="combine", args={"i": 0, "j": 1, "op": "mul"}),
                   envh.Action(tool="combine", args={"i": 0, "j": 1, "op": "mul"}), envh.Action(tool="stop")):
        plain.step(action)
    assert verdict(plain).success is True


def test_a_completion_does_not_depend_on_the_rest_of_its_batch(smollm2):
    """Each prompt samples from its own seeded stream: alone or batched with others (other
    lengths, so other padding) it gets the same tokens; another seed gets other tokens."""
    _, tok, model = smollm2
    engine = HFEngine(model, tok)
    sampling = SamplingConfig(max_new_tokens=8, temperature=1.0, top_p=0.95, stop=())
    a = tok("The capital of France is", add_special_tokens=False)["input_ids"]
    b = tok("Once upon a time, in a land far away, there lived", add_special_tokens=False)["input_ids"]
    (alone,) = engine.generate([a], sampling, [11])
    together = engine.generate([b, a, b], sampling, [5, 11, 6])
    assert together[1].ids == alone.ids and len(alone.ids) == 8
    assert torch.allclose(torch.tensor(together[1].logprobs), torch.tensor(alone.logprobs), atol=1e-4)
    assert together[0].ids != together[2].ids  # same prompt, other seed: another sample
    others = [engine.generate([a], sampling, [s])[0].ids for s in (12, 13, 14)]
    assert any(o != alone.ids for o in others)
    # the log-probs are under the sampling distribution (top-p as transformers warps it)
    ids = torch.tensor([list(a) + list(alone.ids)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(a) - 1:-1].float()
    from transformers import TopPLogitsWarper

    warped = torch.log_softmax(TopPLogitsWarper(0.95)(ids, logits), -1)  # transformers' own top-p
    want = warped[torch.arange(8), torch.tensor(alone.ids)]
    assert torch.allclose(want, torch.tensor(alone.logprobs), atol=1e-3)
    with pytest.raises(ValueError, match="as many seeds"):
        engine.generate([a, b], sampling, [1])
