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
from envh_grpo.loss import grpo_loss, token_logprobs  # noqa: E402
from envh_grpo.rollout import PREFILL, Job, play  # noqa: E402
from envh_grpo.sequences import ChatSegments, Turn, pack  # noqa: E402
from envh_grpo.trainer import resolve_model  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

#: The rollout temperature, below 1: the engine's log-probs agree with the trainer's only if
#: they are those of the sampling distribution (temperature applied), not the raw model's
TEMPERATURE = 0.7


def forward(model, sample):
    ids = torch.tensor([sample.ids])
    with torch.no_grad():
        logp = token_logprobs(model(input_ids=ids).logits[:, :-1], ids[:, 1:], TEMPERATURE)[0]
    return logp[[k - 1 for k, m in enumerate(sample.mask) if m]].tolist()


def mismatch(trainer_lp, engine_lp):
    """The trainer's sampling-mismatch metrics of one sample's policy tokens (TIS, cap 3)."""
    old, vllm = torch.tensor([trainer_lp]), torch.tensor([engine_lp])
    parts = grpo_loss(old, old, torch.tensor([1.0]), torch.ones_like(old), behavior_logp=vllm, tis_cap=3.0)
    return {"is_weight": parts.is_weight, "is_clipped": parts.is_clipped, "logp_diff": parts.logp_diff}


def main(out_path: str) -> None:
    torch.set_num_threads(1)
    folder = resolve_model("smollm2")
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    engine = VLLMEngine(str(folder), dtype="float32", max_model_len=1024, seed=0, kv_cache_bytes=64 << 20)
    try:
        seg = ChatSegments(tok, PREFILL)
        task = envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
        sampling = SamplingConfig(max_new_tokens=6, temperature=TEMPERATURE, stop=())
        (ep,) = play([Job(env=envh.make("toy24"), task=task, seed=0, group=0)], engine, seg, sampling,
                     max_turns=2, max_context=1024, seed=5)
        (sample,) = pack(ep.turns, [1.0] * len(ep.turns))
        result = {"turns": [[list(t.prompt_ids), list(t.completion_ids), list(t.logprobs)] for t in ep.turns],
                  "sample_ids": list(sample.ids), "sample_mask": list(sample.mask),
                  "forward": forward(model, sample)}
        result["tis"] = mismatch(result["forward"], [x for t in ep.turns for x in t.logprobs])
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
    result["step"] = train_step(os.path.dirname(out_path))
    with open(out_path, "w") as fh:
        json.dump(result, fh)


def train_step(folder: str) -> dict:
    """One GRPO step of the trainer generating with vLLM: its metrics record."""
    from envh_grpo.config import from_data
    from envh_grpo.trainer import GRPOTrainer

    config = from_data({"engine": "vllm", "group_size": 2, "groups_per_step": 1, "steps": 1, "max_turns": 2,
                        "max_response_tokens": 6, "temperature": TEMPERATURE, "dtype": "float32",
                        "deepspeed": {"enabled": "false"}, "output_dir": os.path.join(folder, "run"),
                        "log": {"tensorboard": "false", "wandb": "false", "progress": False}})
    trainer = GRPOTrainer(config)
    try:
        return trainer.train_step()
    finally:
        trainer.close()


if __name__ == "__main__":
    main(sys.argv[1])
