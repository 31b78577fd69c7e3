"""A run trained with ``save_final=False`` (``envh experiment``, which deletes an arm's
checkpoints once it is done) writes no checkpoint of its last step. What it leaves on disk
after its last step is what a kill before the caller's ``done.json`` leaves: resuming from
it redoes the last step from the one before, to the same numbers and held-out episodes,
with each metrics row once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _trainer(out: Path, model: Path, *, resume: bool = False):  # type: ignore[no-untyped-def]
    """Two steps of the small model whose rewards differ within a group (four episodes a group:
    no spread in either of two groups has probability 0.02), so the redone step is an update."""
    from envh_grpo.config import from_data
    from envh_grpo.trainer import GRPOTrainer

    config = from_data({
        "group_size": 4, "groups_per_step": 2, "max_turns": 2, "max_response_tokens": 6, "steps": 2,
        "micro_batch": 4, "optim": {"lr": 1e-4}, "deepspeed": {"enabled": "false"}, "threads": 1, "seed": 1,
        "save_every": 1, "eval": {"every": 1, "episodes": 1}, "model": str(model),
        "envs": [{"spec": "toy24", "split": "easy"}], "output_dir": str(out),
        "log": {"tensorboard": "false", "wandb": "false", "progress": False}})
    return GRPOTrainer(config, resume=resume, save_final=False)


def test_a_run_without_its_last_checkpoint_redoes_the_last_step_once(tmp_path, repeating_model):
    out = tmp_path / "run"
    first = _trainer(out, repeating_model)
    try:
        done = first.train()
    finally:
        first.close()
    assert (out / "checkpoints" / "latest").read_text() == "step-1"  # step 1 saved, step 2 not
    assert not (out / "checkpoints" / "step-2").exists()
    held_out = (out / "eval" / "step-2.jsonl").read_text()
    again = _trainer(out, repeating_model, resume=True)
    try:
        assert again.step_no == 1
        redone = again.train()
    finally:
        again.close()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "reward" in r] == [1, 2]
    assert [r["step"] for r in rows if "eval/success" in r] == [1, 2]
    assert len(redone) == 1
    assert all(r["groups/nonzero_adv"] > 0 for r in done), "no reward spread in a step: try another seed"
    for key in ("loss", "policy_loss", "reward", "gen_tokens", "policy_tokens", "grad_norm"):
        assert redone[0][key] == done[-1][key], key
    assert (out / "eval" / "step-2.jsonl").read_text() == held_out
    assert not (out / "checkpoints" / "step-2").exists()
