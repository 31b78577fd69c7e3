"""Run by test_vllm.py in a fresh process: vLLM's in-process engine changes process-wide
state (it replaces ``torch.set_num_threads``, binds the memory node, starts a
torch.distributed group), none of which may leak into the test session.

Plays a 2-turn rollout with the engine, syncs changed weights by rebuild and generates
again; writes what the engine returned and the HF forward log-probs to compare with.
"""

from __future__ import annotations

import json
import os
import sys

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"

import envh  # noqa: E402
import torch  # noqa: E402
from envh_grpo.generation import SamplingConfig, VLLMEngine  # noqa: E402
from envh_grpo.loss import token_logprobs  # noqa: E402
from envh_grpo.rollout import PREFILL, Job, play  # noqa: E402
from envh_grpo.sequences import ChatSegments, Turn, pack  # noqa: E402
from envh_grpo.trainer import resolve_model  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402


def forward(model, sample):
    ids = torch.tensor([sample.ids])
    with torch.no_grad():
        logp = token_logprobs(model(input_ids=ids).logits[:, :-1], ids[:, 1:], 1.0)[0]
    return logp[[k - 1 for k, m in enumerate(sample.mask) if m]].tolist()


def main(out_path: str) -> None:
    torch.set_num_threads(1)
    folder = resolve_model("smollm2")
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    engine = VLLMEngine(str(folder), dtype="float32", max_model_len=1024, seed=0, kv_cache_bytes=64 << 20)
    try:
        seg = ChatSegments(tok, PREFILL)
        task = envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
        sampling = SamplingConfig(max_new_tokens=6, temperature=1.0, stop=())
        (ep,) = play([Job(env=envh.make("toy24"), task=task, seed=0, group=0)], engine, seg, sampling,
                     max_turns=2, max_context=1024, seed=5)
        (sample,) = pack(ep.turns, [1.0] * len(ep.turns))
        result = {"turns": [[list(t.prompt_ids), list(t.completion_ids), list(t.logprobs)] for t in ep.turns],
                  "sample_ids": list(sample.ids), "sample_mask": list(sample.mask),
                  "forward": forward(model, sample)}
        changed = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
        with torch.no_grad():
            gen = torch.Generator().manual_seed(0)
            for p in changed.model.layers[-1].mlp.parameters():
                p.add_(torch.randn(p.shape, generator=gen) * 0.05)
        builds = engine.builds
        engine.sync(changed)
        prompt = ep.turns[0].prompt_ids
        (again,) = engine.generate([prompt], sampling, seeds=[1])
        resample = pack([Turn(prompt_ids=prompt, completion_ids=again.ids, logprobs=again.logprobs)], [1.0])[0]
        result.update(rebuilds=engine.builds - builds, served=list(again.logprobs),
                      forward_changed=forward(changed, resample), forward_original=forward(model, resample))
    finally:
        engine.close()
    with open(out_path, "w") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    main(sys.argv[1])
