"""``envh train``: dry-run figures, clear errors for impossible configs, the embedded run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import envh
import pytest
from envh_grpo.config import check, from_data, load

ENVH = [sys.executable, "-c", "from envh.cli import main; main()"]


def run(*args: str, timeout: int = 600, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    return subprocess.run([*ENVH, "train", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def test_the_plugin_registers_a_trainer_and_stays_cheap_to_import():
    registry = envh.make_plugin_manager()
    assert "grpo" in registry.trainers()
    code = "import sys, envh_grpo, envh_grpo.hooks, envh_grpo.cli, envh_grpo.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_dry_run_prints_config_memory_and_tokens():
    proc = run("--dry-run", "--set", "group_size=2")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["config"]["group_size"] == 2 and report["config"]["model"] == "smollm2"
    mem = report["memory_gib_per_gpu"]
    assert mem["params_billion"] == pytest.approx(0.1345, abs=2e-3)  # SmolLM2-135M from its config.json
    assert mem["total"] > 0 and mem["vllm_reserved"] == 0.0  # the CPU default generates with transformers
    assert report["tokens_per_step"]["episodes"] == 2 * 2
    assert report["sources"][0]["tasks"] > 10


def test_dry_run_of_the_8xh100_paper_config():
    proc = run("h100x8-paper", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    c = report["config"]
    assert report["processes"] == 8 and c["model"] == "Qwen/Qwen3-8B-Base" and c["temperature"] == 0.4
    assert (c["max_prompt_tokens"], c["max_response_tokens"], c["history"], c["max_turns"]) == (4096, 512, 50, 50)
    assert (c["groups_per_step"], c["micro_batch"], c["steps"], c["loss"]["kl_coef"]) == (16, 4, 150, 0.01)
    mem = report["memory_gib_per_gpu"]
    assert mem["params_billion"] == pytest.approx(8.19) and mem["vllm_reserved"] == 40.0
    # ZeRO-3 over 8 GPUs: Adam's 12 bytes per parameter split eight ways
    assert mem["optimizer"] == pytest.approx(12 * 8.19e9 / 8 / 1024 ** 3, rel=1e-3)
    # a micro-batch of 4 turn samples of 4096 + 512 tokens: layer inputs kept (gradient checkpointing),
    # fp32 logits + log-softmax only where the 4 rows train (4 x 512 positions, not the whole 4608)
    acts = 4 * 4608 * 36 * 2 * 4096 + 4 * min(4608, 4 * 512) * 151936 * 8
    assert mem["activations"] == pytest.approx(acts / 1024 ** 3, abs=0.01)
    assert mem["total"] == pytest.approx(sum(mem[k] for k in ("weights", "gradients", "optimizer", "reference",
                                                              "activations", "vllm_reserved")), abs=0.05)
    assert mem["fits"] is True and mem["device"] == 80.0
    # 16 groups x 8 = 128 episodes; up to 50 turns of 512 tokens; each turn its own sample (history 50)
    assert report["tokens_per_step"] == {"episodes": 128, "generated_max": 128 * 50 * 512,
                                         "trained_max": 128 * 50 * 4608, "sequence_max": 4608}
    evo = json.loads(run("h100x8-evoharness", "--dry-run").stdout)["config"]
    assert (evo["group_size"], evo["optim"]["lr"], evo["loss"]["kl_coef"], evo["reward"]["t_max"],
            evo["max_prompt_tokens"]) == (8, 1e-6, 0.01, 70, 12288)


@pytest.mark.parametrize(("sets", "message"), [
    (["group_size=1"], "group_size is 1"),
    (["groups_per_step=3", "nproc=2"], "does not split over 2 processes"),
    (["max_prompt_tokens=8000", "max_response_tokens=512"], "exceeds the model's context of 8192"),
    (["temperature=0"], "GRPO needs sampling"),
    (["ppo_mini_batch=3"], "must divide"),
    (["deepspeed.offload_params=true"], "needs zero_stage 3"),
    (["loss.baseline=median"], "loss.baseline"),
    (["optim.lrr=1"], "extra fields found (lrr) @ $.optim"),
    (["envs=[{spec: toy24, split: nosuch}]"], "nosuch"),
    (["rollout.executor=pol"], "rollout.executor 'pol': choose one of inline, pool, ray"),
    (["rollout.workers=0"], "rollout.workers must be >= 1"),
])
def test_impossible_configs_stop_before_any_work(sets, message):
    proc = run("--dry-run", *[a for s in sets for a in ("--set", s)])
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("sets", "message"), [
    (["groups_per_step=12"], "groups_per_step=12 does not split over 8 processes"),
    (["max_prompt_tokens=32768"], "exceeds the model's context of 32768"),
    (["vllm.tensor_parallel=2"], "vllm.tensor_parallel=2 with 8 processes"),
    (["vllm.gpu_memory_utilization=1.0"], "must be in (0, 1)"),
    (["ppo_mini_batch=48"], "must divide the 128 episodes"),
])
def test_impossible_variants_of_the_8xh100_config_stop_before_any_work(sets, message):
    proc = run("h100x8-paper", "--dry-run", *[a for s in sets for a in ("--set", s)])
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_config_files_fail_clearly(tmp_path):
    with pytest.raises(envh.errors.SpecError, match="Shipped configs: h100x8-evoharness, h100x8-paper"):
        load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("group_size: [1,\n")
    with pytest.raises(envh.errors.SpecError, match="not valid YAML"):
        load(bad)
    with pytest.raises(envh.errors.SpecError, match="must be a mapping"):
        from_data([1, 2])  # type: ignore[arg-type]
    with pytest.raises(envh.errors.SpecError, match="t_max"):
        from_data({"reward": {"t_max": 0}})
    check(from_data({}), world_size=2)  # the embedded default splits over two processes


@pytest.mark.slow
def test_embedded_default_runs_logs_evaluates_and_checkpoints(tmp_path):
    out = tmp_path / "run"
    proc = run("--steps", "1", "--output-dir", str(out), "--set", "group_size=2", "--set", "groups_per_step=1",
               "--set", "max_turns=1", "--set", "max_response_tokens=4", "--set", "eval.every=1",
               "--set", "eval.episodes=1", "--set", "log.wandb=false", timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "step 1/1" in proc.stdout
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["step"] == 1 and "reward/invalid" in records[0]
    assert records[1]["eval/episodes"] == 1 and "eval/success" in records[1]
    assert (out / "checkpoints" / "latest").read_text() == "step-1"
    assert list((out / "tensorboard").glob("events.*"))
    shutil.rmtree(out / "checkpoints")  # 1.6 GB (model and optimizer state): not kept for the session
