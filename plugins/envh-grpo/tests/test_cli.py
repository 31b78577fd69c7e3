"""``envh train``: dry-run figures, clear errors for impossible configs, the embedded run."""

from __future__ import annotations

import importlib.util
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
    # engine auto on a GPU node: vLLM where it is installed (as the trainer picks), with its share
    engine = "vllm" if importlib.util.find_spec("vllm") else "hf"
    assert mem["engine"] == engine and mem["vllm_reserved"] == (40.0 if engine == "vllm" else 0.0)
    assert mem["total"] > 0 and report["tokens_per_step"]["episodes"] == 2 * 2
    assert report["sources"][0]["tasks"] > 10


GIB = 1024 ** 3


def test_dry_run_of_the_8xh100_paper_config_with_four_episodes_per_micro_batch():
    """Four packed episodes per micro-batch (the config's first setting) do not fit: the
    estimate says so, and the shipped config uses one (next test)."""
    proc = run("h100x8-paper", "--dry-run", "--set", "micro_batch=4", "--set", "logprob_micro_batch=4")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    c = report["config"]
    assert report["processes"] == 8 and c["model"] == "Qwen/Qwen3-8B-Base" and c["temperature"] == 0.4
    assert (c["max_prompt_tokens"], c["max_response_tokens"], c["history"], c["max_turns"]) == (4096, 512, 50, 50)
    assert (c["groups_per_step"], c["micro_batch"], c["steps"], c["loss"]["kl_coef"]) == (16, 4, 150, 0.01)
    # 16 groups x 8 = 128 episodes of up to 50 turns of 512 tokens. history 50 >= max_turns - 1: every
    # prompt extends the previous turn's sequence, so an episode is ONE sequence of at most 4096 + 512
    # tokens (a rollout stops before a prompt and a reply would pass it), its replies included
    assert report["tokens_per_step"] == {"episodes": 128, "generated_max": 128 * 50 * 512, "samples_max": 128,
                                         "trained_max": 128 * 4608, "policy_max": 128 * 4608,
                                         "sequence_max": 4608}
    mem = report["memory_gib_per_gpu"]
    assert mem["params_billion"] == pytest.approx(8.19) and mem["engine"] == "vllm"
    p, n = 8.19e9, 8
    h, layers, vocab, inter = 4096, 36, 151936, 12288  # Qwen3-8B's config.json
    # ZeRO-3 over 8 GPUs, bf16: weights, gradients and the (sharded) reference 2 bytes per parameter,
    # fp32 master + Adam m and v 12 bytes per parameter, all split eight ways
    resident = {"weights": 2 * p / n, "gradients": 2 * p / n, "reference": 2 * p / n, "optimizer": 12 * p / n,
                # DeepSpeed's 5e8-element reduce bucket; ZeRO-3 gathers the LM head (152k x 4096) + 5e7 prefetch
                "zero_buffers": 2 * 5e8 + 2 * (vocab * h + 5e7)}
    for key, value in resident.items():
        assert mem[key] == pytest.approx(value / GIB, abs=0.01), key
    # a micro-batch of 4 packed episodes: the union of their reply positions is the whole 4607
    # targets, each logit costing 16 bytes at the backward pass's peak (bf16 logits, fp32 copy,
    # logsumexp's exp, fp32 gradients) - 41.7 GiB - plus the LM head's input and its weight gradient
    logits = 4 * 4607 * (vocab * 16 + h * 2) + vocab * h * 2
    assert mem["logits_train"] == pytest.approx(4 * 4607 * vocab * 16 / GIB, abs=0.01)
    kept = 4 * 4608 * layers * h * 2  # gradient checkpointing: each layer's input, bf16
    mask = 4 * 4608 * 4608  # the attention mask of padded rows
    train = kept + mask + logits
    assert mem["phases"]["train"] == pytest.approx(train / GIB, abs=0.01) and mem["peak_phase"] == "train"
    # the reference's no-grad pass: 4 rows, 10 bytes per logit, one layer's MLP at a time
    logprob = 4 * 4607 * vocab * 10 + 4 * 4608 * (3 * inter + 4 * h) * 2
    assert mem["phases"]["logprob"] == pytest.approx(logprob / GIB, abs=0.01)
    assert mem["phases"]["step"] == pytest.approx(8 * p / n / GIB, abs=0.01)  # fp32 grads + Adam temporaries
    allocated = sum(resident.values()) + train
    assert mem["allocated_peak"] == pytest.approx(allocated / GIB, abs=0.02)
    # vLLM's half of the 80 GiB device and the CUDA context come on top: 110 GiB, it does not fit
    total = allocated / GIB + 40.0 + 1.0
    assert mem["vllm_reserved"] == 40.0 and mem["total"] == pytest.approx(total, abs=0.02)
    assert total > 100 and mem["fits"] is False and mem["device"] == 80.0
    evo = json.loads(run("h100x8-evoharness", "--dry-run").stdout)["config"]
    assert (evo["group_size"], evo["optim"]["lr"], evo["loss"]["kl_coef"], evo["reward"]["t_max"],
            evo["max_prompt_tokens"]) == (8, 1e-6, 0.01, 70, 12288)


def test_the_8xh100_paper_config_fits_with_one_episode_per_micro_batch():
    proc = run("h100x8-paper", "--dry-run")
    report = json.loads(proc.stdout)
    assert (report["config"]["micro_batch"], report["config"]["logprob_micro_batch"]) == (1, 1)
    mem = report["memory_gib_per_gpu"]
    p, vocab, h = 8.19e9, 151936, 4096
    resident = 2 * p / 8 * 3 + 12 * p / 8 + 2 * 5e8 + 2 * (vocab * h + 5e7)
    train = 4608 * 36 * h * 2 + 4608 * 4608 + 4607 * (vocab * 16 + h * 2) + vocab * h * 2
    total = (resident + train) / GIB + 40.0 + 1.0  # 72.8 GiB
    assert mem["total"] == pytest.approx(total, abs=0.02) and mem["fits"] is True


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
