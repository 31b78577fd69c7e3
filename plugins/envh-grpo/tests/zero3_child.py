"""Run by test_gpu_paths.py under ``torchrun --nproc_per_node 2`` on gloo: the model in the
second argument (a small random one of SmolLM2's shape: tied embeddings, as SmolLM2's, and
layers whose every weight moves the log-probs, so a wrongly gathered shard shows) under
DeepSpeed ZeRO-3 with ``engine: hf``.

Each rank checks that its reference model holds only its partition of the weights, that
the sharded reference gives the same log-probs (and so the same k3 KL) as a full local
copy on the same samples, and writes what it saw to ``rank{r}.json``. Before that it takes
one whole GRPO step (rollouts with transformers ``generate``, then the update).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from envh_grpo.config import load
from envh_grpo.sequences import Sample
from envh_grpo.trainer import GRPOTrainer
from transformers import AutoModelForCausalLM

SETTINGS = {"deepspeed.enabled": True, "deepspeed.zero_stage": 3, "engine": "hf", "loss.kl_coef": 0.05,
            "group_size": 2, "groups_per_step": 2, "max_turns": 2, "max_response_tokens": 6, "micro_batch": 2, "logprob_micro_batch": 1,
            "optim.lr": 1e-4, "threads": 1, "seed": 1, "steps": 1, "log.progress": False,
            "log.tensorboard": False, "log.wandb": False, "envs": [{"spec": "toy24", "split": "easy"}]}


def k3(logp: torch.Tensor, ref: torch.Tensor, mask: torch.Tensor) -> float:
    """The per-token k3 KL estimate, averaged over the trained tokens."""
    d = (ref - logp)[:mask.shape[0]]  # rows are as wide as their batch
    return float(((torch.exp(d) - d - 1) * mask).sum() / mask.sum().clamp(min=1))


TEXTS = ["The reference model is frozen.", "A policy learns from rewards; the KL keeps it near its start.",
         "Numbers: 4 + 6 = 10, 3 * 8 = 24."]


def samples_of(tok: object, rank: int) -> list[Sample]:
    """Rank 0 three sequences, rank 1 one: the sharded forwards must still pair up."""
    out = []
    for i, text in enumerate(TEXTS if rank == 0 else TEXTS[1:2]):
        ids = tok(text)["input_ids"]  # type: ignore[operator]
        mask = tuple(int(t >= 2) for t in range(len(ids)))
        out.append(Sample(ids=tuple(ids), mask=mask, engine_logprobs=(0.0,) * len(ids),
                          advantages=(1.0,) * len(ids), episode=i))
    return out


def main() -> None:
    out, model = Path(sys.argv[1]), sys.argv[2]
    config = load(None, {**SETTINGS, "model": model, "output_dir": str(out / "run")})
    trainer = GRPOTrainer(config)
    rank = trainer.rank
    # first, as in a run: the rollout is the policy's first forward (ZeRO-3 gathers its
    # persistent parameters there), then the update's backward uses those parameters
    record = trainer.train_step()
    params = list(getattr(trainer.ref, "module", trainer.ref).parameters())
    full_numel = sum(getattr(p, "ds_numel", p.numel()) for p in params)
    local_numel = sum(p.ds_tensor.numel() if hasattr(p, "ds_tensor") else p.numel() for p in params)
    empty = sum(p.numel() == 0 for p in params)
    statuses = sorted({p.ds_status.name if hasattr(p, "ds_status") else "full" for p in params})
    # ZeRO-3 keeps parameters under the persistence threshold (TRL's 10 x hidden: the norms)
    # whole after a forward; every larger one must hold nothing outside a forward
    threshold = 10 * trainer.model.config.hidden_size
    big_whole = sum(p.numel() > 0 for p in params if getattr(p, "ds_numel", p.numel()) > threshold)

    samples = samples_of(trainer.tok, rank)
    full = AutoModelForCausalLM.from_pretrained(str(trainer.model_dir), dtype=trainer.dtype).eval()
    sharded_ref = trainer._no_grad_logp(trainer.ref, samples)
    local_ref = trainer._no_grad_logp(full, samples)
    policy = trainer._no_grad_logp(trainer.engine, samples)
    diff = max(float((a - b).abs().max()) for a, b in zip(sharded_ref, local_ref))
    # the KL against a policy away from the reference: its log-probs moved token by token
    moved = [p + 0.3 * torch.sin(torch.arange(p.shape[0], dtype=p.dtype)) for p in policy]
    kl_sharded = [k3(p, r, torch.tensor(s.mask[1:], dtype=torch.float32))
                  for p, r, s in zip(moved, sharded_ref, samples)]
    kl_local = [k3(p, r, torch.tensor(s.mask[1:], dtype=torch.float32))
                for p, r, s in zip(moved, local_ref, samples)]

    report = {"rank": rank, "ref_full_numel": full_numel, "ref_local_numel": local_numel, "ref_params": len(params),
              "ref_empty": empty, "ref_status": statuses,
              "ref_big_whole": big_whole, "threshold": threshold, "ref_logp_max_diff": diff, "samples": len(samples),
              "kl_sharded": kl_sharded, "kl_local": kl_local, "global_steps": trainer.engine.global_steps,
              "loss": record["loss"], "kl": record["kl"], "policy_tokens": record["policy_tokens"],
              "finite": all(math.isfinite(v) for v in record.values() if isinstance(v, float))}
    (out / f"rank{rank}.json").write_text(json.dumps(report))
    trainer.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
