"""Run by test_estimate.py in a fresh process: the peak memory of one training micro-batch
(forward, the trainer's log-probs, backward) of SmolLM2-135M on CPU against the estimate's
``train`` phase. Prints JSON: measured and estimated bytes.

The process's peak resident size (``ru_maxrss``) is read around the pass; the gradients are
allocated by a warm-up pass first, as they are resident for the whole run, not the phase.
"""

from __future__ import annotations

import gc
import json
import resource
import sys

import torch
from envh_grpo.config import from_data
from envh_grpo.estimate import phases
from envh_grpo.loss import token_logprobs
from envh_grpo.trainer import resolve_model
from transformers import AutoModelForCausalLM


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def main(seq: int, rows: int) -> None:
    torch.set_num_threads(1)
    folder = resolve_model("smollm2")
    with open(folder / "config.json") as fh:
        mc = json.load(fh)
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).train()
    config = from_data({"max_prompt_tokens": seq - 16, "max_response_tokens": 16, "history": None,
                        "max_turns": 32, "micro_batch": rows, "dtype": "float32", "engine": "vllm"})
    ids = torch.randint(0, 1000, (rows, seq), generator=torch.Generator().manual_seed(0))
    att = torch.ones_like(ids)
    model(input_ids=ids[:, :8], attention_mask=att[:, :8], use_cache=False).logits.sum().backward()
    gc.collect()
    before = rss()
    keep = torch.arange(seq - 1)  # packed episodes: every target position is some row's reply
    logits = model(input_ids=ids, attention_mask=att, use_cache=False, logits_to_keep=keep).logits
    logp = token_logprobs(logits, ids[:, 1:], 0.7)
    del logits
    logp.sum().backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    print(json.dumps({"measured": peak, "estimated": phases(config, mc, 1)["train"]}))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
