"""The ``--dry-run`` estimate against what the code builds and what a pass allocates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from envh_grpo.config import from_data
from envh_grpo.estimate import (
    logit_positions,
    policy_tokens_per_sample,
    resident,
    samples_per_episode,
    tokens_per_step,
)
from envh_grpo.rollout import PREFILL
from envh_grpo.sequences import ChatSegments, Conversation, Turn, pack

REPLY = 5


def episode(segments: ChatSegments, history: int | None, turns: int, first: str = "start") -> list[Turn]:
    """A full-length episode as the rollout builds it: each prompt from the conversation."""
    conv = Conversation(segments, segments.head("Play.", first), history)
    out = []
    for t in range(turns):
        completion = tuple(range(300 + t, 300 + t + REPLY))
        out.append(Turn(prompt_ids=tuple(conv.prompt()), completion_ids=completion, logprobs=(0.0,) * REPLY))
        conv.add(completion, segments.user(f"observation {t}"))
    return out


@pytest.mark.parametrize("history", [None, 0, 1, 2, 3, 4, 10])
def test_sequences_per_episode_are_those_pack_builds(tokenizer, history):
    segments = ChatSegments(tokenizer, PREFILL)
    config = from_data({"max_turns": 4, "history": history, "max_response_tokens": REPLY, "micro_batch": 2})
    samples = pack(episode(segments, history, 4), [1.0] * 4)
    # history >= max_turns - 1 (3): one sequence; a window of h turns: 4 - h sequences
    assert len(samples) == samples_per_episode(config) == {None: 1, 0: 4, 1: 3, 2: 2}.get(history, 1)
    assert max(sum(s.mask) for s in samples) == policy_tokens_per_sample(config)
    assert tokens_per_step(config)["samples_max"] == config.episodes_per_step * len(samples)


def test_logit_positions_cover_the_replies_of_a_packed_micro_batch(tokenizer):
    """Two packed episodes with heads of other lengths: the trainer's ``logits_to_keep`` is
    the union of their reply positions: the replies of both rows, not one reply per row."""
    segments = ChatSegments(tokenizer, PREFILL)
    config = from_data({"max_turns": 4, "history": 3, "max_response_tokens": REPLY, "micro_batch": 2,
                        "max_prompt_tokens": 512})
    rows = [pack(episode(segments, 3, 4, first), [1.0] * 4)[0] for first in ("short", "a much longer first view")]
    width = max(len(s.ids) for s in rows)
    mask = torch.zeros((2, width))
    for r, s in enumerate(rows):
        mask[r, :len(s.ids)] = torch.tensor(s.mask, dtype=torch.float32)
    keep = int(mask[:, 1:].any(dim=0).sum())  # as GRPOTrainer._logp picks them
    # more than one row's replies (they sit at other positions), at most both rows' (some may coincide)
    assert 4 * REPLY < keep <= logit_positions(config) == 2 * 4 * REPLY


def test_reference_is_sharded_only_under_zero3():
    mc = {"params": 1e9, "hidden_size": 1024, "num_hidden_layers": 8, "vocab_size": 1000}
    z3 = from_data({"loss": {"kl_coef": 0.1}, "deepspeed": {"zero_stage": 3, "bf16": "true"}})
    z2 = from_data({"loss": {"kl_coef": 0.1}, "deepspeed": {"zero_stage": 2, "bf16": "true"}})
    assert resident(z3, mc, 4)["reference"] == 2e9 / 4  # partitioned like the policy
    assert resident(z2, mc, 4)["reference"] == 2e9  # a full bf16 copy on every GPU
    assert resident(from_data({"deepspeed": {"bf16": "true"}}), mc, 4)["reference"] == 0.0  # no KL: none


@pytest.mark.slow
def test_train_phase_estimate_matches_a_measured_micro_batch():
    """SmolLM2-135M (fp32, CPU), 2 rows of 512 tokens whose every target trains: the
    logits (49k vocabulary) dominate; the estimate is within 15 % of the peak."""
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("estimate_child.py")), "512", "2"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["estimated"] == pytest.approx(got["measured"], rel=0.15), got
