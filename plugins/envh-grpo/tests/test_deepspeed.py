"""Two GRPO steps under DeepSpeed ZeRO-2, two processes on gloo, and an exact resume: the
step after a checkpoint is the same whether or not the run stopped. Episodes run on one
pool for the job (rank 0's), as ``rollout.executor: pool`` does.

The model is a small random one of SmolLM2's shape whose replies repeat now and then
(``write_random_model(repeats=True)``): rewards differ within a group, so the update is
real, at a quarter of SmolLM2-135M's time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from envh_grpo import procs

pytestmark = pytest.mark.slow

SETTINGS = ["steps=2", "save_every=1", "group_size=4", "groups_per_step=2", "max_turns=2",
            "max_response_tokens=6", "micro_batch=2", "loss.kl_coef=0.05", "optim.lr=1e-4", "threads=1",
            "log.progress=false", "log.tensorboard=false", "log.wandb=false",
            "envs=[{spec: toy24, split: easy}]", "seed=1",  # seed 1: both steps have a group whose rewards differ
            # one executor for the job (rank 0's pool of 2) plays both ranks' episodes; they equal
            # the in-process ones (test_remote), so the rewards and the resume are the same
            "rollout.executor=pool", "rollout.workers=2", "rollout.options={isolation: none, memory_mb: 4096}"]


def _launch(out: Path, model: Path, *extra: str, nproc: int = 2, env_extra: dict[str, str] | None = None,
            expect: int = 0) -> subprocess.CompletedProcess[str]:
    """torchrun --standalone (its store binds a free port itself: no port picked here that
    another test could take first); every process of the job is reaped whatever happens."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "envh_grpo.launch", *extra]
    for s in [*SETTINGS, f"model={model}", f"output_dir={out}"]:
        cmd += ["--set", s]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore", GLOO_SOCKET_IFNAME="lo",
               OMP_NUM_THREADS="1", **(env_extra or {}))
    proc = procs.run_job(cmd, env=env, timeout=800, capture=True)
    assert proc.returncode == expect, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "mp_rank_00_model_states.pt", map_location="cpu", weights_only=False)["module"]


def _link_tree(source: Path, target: Path) -> None:
    """A checkpoint's copy as hard links: a ZeRO checkpoint of a real model is large
    (SmolLM2-135M's ~2 GB, optimizer partitions in fp32); real copies filled small CI disks."""
    shutil.copytree(source, target, copy_function=os.link)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, repeating_model):
    root = tmp_path_factory.mktemp("envh-grpo-ds")
    try:
        full = root / "full"
        _launch(full, repeating_model)
        resumed = root / "resumed"
        (resumed / "checkpoints").mkdir(parents=True)
        _link_tree(full / "checkpoints" / "step-1", resumed / "checkpoints" / "step-1")
        (resumed / "checkpoints" / "latest").write_text("step-1")
        # as if killed after logging step 2, before its checkpoint was complete: its row is there
        shutil.copyfile(full / "metrics.jsonl", resumed / "metrics.jsonl")
        proc = _launch(resumed, repeating_model, "--resume")
        yield full, resumed, proc
    finally:  # checkpoints: gone with the module, not at the end of the session
        shutil.rmtree(root, ignore_errors=True)


def test_two_zero2_steps_train_and_log_every_reward_term(runs, repeating_model):
    full, _, _ = runs
    first, second = _records(full)
    assert (first["step"], second["step"]) == (1, 2) and first["episodes"] == 8
    for record in (first, second):
        assert all(isinstance(v, (int, float)) and v == v for v in record.values())  # finite, no NaN
        for term in ("solved", "efficiency", "diversity", "spam", "invalid"):
            assert f"reward/{term}" in record
        assert record["policy_tokens"] > 0 and record["gen_tokens"] == record["policy_tokens"]
    for record in (first, second):  # four episodes a group: no spread in either group has probability 0.02
        assert record["groups/nonzero_adv"] > 0, f"no reward spread in step {record['step']}: try another seed"
    assert first["grad_norm"] > 0
    assert first["rollout/workers"] == 2  # one executor for the job, not one per process
    assert second["kl"] > 0  # the policy moved away from the frozen reference
    from transformers import AutoModelForCausalLM

    original = AutoModelForCausalLM.from_pretrained(str(repeating_model), dtype=torch.float32).state_dict()
    after = _weights(full / "checkpoints" / "step-1")
    changed = [k for k, v in after.items() if k in original and not torch.equal(v.float(), original[k].float())]
    assert changed, "step 1 did not change any weight"
    # ZeRO-2: each of the two processes holds its own optimizer partition
    assert len(list((full / "checkpoints" / "step-1").glob("zero_pp_rank_*_optim_states.pt"))) == 2


def test_resume_reproduces_the_next_step_exactly(runs):
    """The step after the checkpoint, again: the same numbers and weights, and its row
    logged once (the killed run's row for it is dropped before it is logged again)."""
    full, resumed, proc = runs
    kept, continued = _records(resumed)
    assert kept == _records(full)[0]
    expected = _records(full)[1]
    for key in ("step", "loss", "policy_loss", "kl", "grad_norm", "reward", "gen_tokens", "policy_tokens"):
        assert continued[key] == expected[key], key
    a, b = _weights(full / "checkpoints" / "step-2"), _weights(resumed / "checkpoints" / "step-2")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert "step 2/2" in proc.stdout and "step 1/2" not in proc.stdout
    assert not list(resumed.glob("*.tmp"))


def test_resume_refuses_a_different_config(runs, repeating_model, tmp_path):
    full, _, _ = runs
    target = tmp_path / "other"
    _link_tree(full / "checkpoints", target / "checkpoints")
    settings = [*SETTINGS, f"model={repeating_model}", f"output_dir={target}", "loss.kl_coef=0.2"]
    cmd = [sys.executable, "-m", "envh_grpo.launch", "--resume", *[a for s in settings for a in ("--set", s)]]
    env = dict(os.environ, WORLD_SIZE="1", RANK="0", HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    env.pop("LOCAL_RANK", None)
    proc = procs.run_job(cmd, env=env, timeout=600, capture=True)
    assert proc.returncode == 2 and "different training config" in proc.stderr, proc.stderr[-3000:]


def test_a_job_whose_launcher_dies_leaves_no_worker_behind(tmp_path):
    """The launcher killed mid-run (a timeout): its workers, in sessions of their own, are reaped too."""
    script = tmp_path / "sleep.py"
    script.write_text("import time\ntime.sleep(600)\n")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script)]
    tag = procs.new_tag()
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", **{procs.TAG: tag})
    launcher = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(procs.tagged(tag)) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(procs.tagged(tag)) == 3  # torchrun and its two workers
        launcher.kill()  # what a timeout does to the launcher: its workers live on, orphaned
        launcher.wait()
        time.sleep(1)
        assert len(procs.tagged(tag)) == 2
    finally:
        procs.reap(tag)
    assert procs.tagged(tag) == []
