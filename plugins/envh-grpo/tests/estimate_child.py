"""Run by test_estimate.py in a fresh process: the peak memory of one training micro-batch
(forward, the trainer's log-probs, backward) of SmolLM2-135M on CPU against the estimate's
``train`` phase. Prints JSON: measured and estimated bytes.

The process's peak resident size is read around the pass (its high-water mark reset just
before, where the kernel allows it); the gradients are allocated by a warm-up pass first, as
they are resident for the whole run, not the phase. The weights are copied into the
process's own memory first: loaded from an fp32 file they are mapped pages of it, which a
machine short of memory drops and the pass faults back in, so they counted as the pass's
(3.04 GB measured against 2.47 GB, with another test's DeepSpeed run beside it).
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


def reset_peak() -> None:
    """Reset the kernel's high-water mark of resident memory (``VmHWM``) where it can (else
    the peak stays the process's whole life's, as ``ru_maxrss``)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def peak() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main(seq: int, rows: int) -> None:
    torch.set_num_threads(1)
    folder = resolve_model("smollm2")
    with open(folder / "config.json") as fh:
        mc = json.load(fh)
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).train()
    with torch.no_grad():
        for param in model.parameters():  # tied weights are one parameter: the tie holds
            param.data = param.data.clone()
    config = from_data({"max_prompt_tokens": seq - 16, "max_response_tokens": 16, "history": None,
                        "max_turns": 32, "micro_batch": rows, "dtype": "float32", "engine": "vllm"})
    ids = torch.randint(0, 1000, (rows, seq), generator=torch.Generator().manual_seed(0))
    att = torch.ones_like(ids)
    model(input_ids=ids[:, :8], attention_mask=att[:, :8], use_cache=False).logits.sum().backward()
    gc.collect()
    before = rss()
    reset_peak()
    keep = torch.arange(seq - 1)  # packed episodes: every target position is some row's reply
    logits = model(input_ids=ids, attention_mask=att, use_cache=False, logits_to_keep=keep).logits
    logp = token_logprobs(logits, ids[:, 1:], 0.7)
    del logits
    logp.sum().backward()
    print(json.dumps({"measured": peak() - before, "estimated": phases(config, mc, 1)["train"]}))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
