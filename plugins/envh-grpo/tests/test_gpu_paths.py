"""The paths a GPU user hits first, run on CPU (gloo): plain ``envh train`` as one DeepSpeed
process, ZeRO-3 with ``engine: hf`` on two processes (a sharded reference model),
tri-state keys from YAML booleans, and ``--resume`` that refuses to start over."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import envh
import pytest
from envh_grpo import procs
from envh_grpo.cli import _overrides
from envh_grpo.config import check, deepspeed_bf16, load, weights_dtype
from envh_grpo.metrics import Metrics

ENVH = [sys.executable, "-c", "from envh.cli import main; main()"]
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
SMALL = ["group_size=2", "groups_per_step=1", "max_turns=1", "max_response_tokens=4", "micro_batch=2",
         "threads=1", "log.progress=false", "log.tensorboard=false", "log.wandb=false",
         "envs=[{spec: toy24, split: easy}]", "seed=1"]


def envh_train(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``envh train`` as a user runs it: no launcher variables in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env |= {"HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    return procs.run_job([*ENVH, "train", *args], env=env, timeout=timeout, capture=True)


def sets(*pairs: str) -> list[str]:
    return [a for p in pairs for a in ("--set", p)]


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


# -- tri-state keys ------------------------------------------------------------------------
@pytest.mark.parametrize(("pair", "key", "value"), [
    ("deepspeed.enabled=true", ("deepspeed", "enabled"), "true"),
    ('deepspeed.enabled="true"', ("deepspeed", "enabled"), "true"),
    ("deepspeed.enabled=False", ("deepspeed", "enabled"), "false"),
    ("log.tensorboard=false", ("log", "tensorboard"), "false"),
    ("log.wandb=no", ("log", "wandb"), "false"),
    ("deepspeed.bf16=true", ("deepspeed", "bf16"), "true"),
    ("deepspeed.bf16=AUTO", ("deepspeed", "bf16"), "auto"),
])
def test_tri_state_keys_take_yaml_booleans_and_strings(pair, key, value):
    config = load(None, _overrides((pair,)))
    assert getattr(getattr(config, key[0]), key[1]) == value


@pytest.mark.parametrize("pair", ["deepspeed.enabled=maybe", "log.wandb=1", "deepspeed.bf16=[true]",
                                  "log.tensorboard=null"])
def test_other_tri_state_values_are_refused_naming_the_key_and_the_choices(pair):
    key = pair.split("=")[0]
    with pytest.raises(envh.errors.SpecError, match=rf"choose auto, true or false .*@ \$\.{key}"):
        load(None, _overrides((pair,)))


def test_a_config_file_with_yaml_booleans_loads(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("deepspeed: {enabled: true, bf16: true}\nlog: {tensorboard: false, wandb: off}\n")
    config = load(path)
    assert (config.deepspeed.enabled, config.deepspeed.bf16, config.log.tensorboard, config.log.wandb) == \
        ("true", "true", "false", "false")


def test_log_false_turns_tensorboard_off(tmp_path):
    pytest.importorskip("tensorboard")
    metrics = Metrics(load(None, _overrides(("log.tensorboard=false", "log.wandb=false"))), tmp_path)
    assert metrics.tb is None and not (tmp_path / "tensorboard").exists()


@pytest.mark.parametrize(("bf16", "dtype", "cuda", "weights"), [
    ("auto", "auto", True, "bfloat16"), ("auto", "auto", False, "float32"),
    ("true", "auto", False, "bfloat16"), ("true", "auto", True, "bfloat16"),
    ("false", "auto", True, "float32"), ("auto", "float32", True, "float32"),
    ("auto", "bfloat16", False, "bfloat16"), ("true", "bfloat16", True, "bfloat16"),
])
def test_deepspeed_bf16_follows_the_weights_dtype(bf16, dtype, cuda, weights):
    config = load(None, {"deepspeed.bf16": bf16 == "true" if bf16 != "auto" else "auto", "dtype": dtype})
    check(config)
    assert weights_dtype(config, cuda=cuda) == weights
    assert deepspeed_bf16(config, cuda=cuda) is (weights == "bfloat16")


@pytest.mark.parametrize(("bf16", "dtype"), [(True, "float32"), (True, "float16"), (False, "bfloat16")])
def test_a_bf16_setting_that_contradicts_the_weights_dtype_is_refused(bf16, dtype):
    with pytest.raises(envh.errors.SpecError, match="DeepSpeed's bf16 mode must match the weights' dtype"):
        check(load(None, {"deepspeed.bf16": bf16, "dtype": dtype}))


def test_dry_run_takes_a_yaml_boolean_for_deepspeed_enabled():
    proc = envh_train("--dry-run", *sets("deepspeed.enabled=true"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["config"]["deepspeed"]["enabled"] == "true"


# -- resume --------------------------------------------------------------------------------
def test_resume_without_a_checkpoint_fails_instead_of_starting_over(tmp_path):
    out = tmp_path / "typo"
    proc = envh_train("--resume", "--output-dir", str(out), *sets(*SMALL), timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert f"there is no checkpoint in {out / 'checkpoints'}" in proc.stderr and "Traceback" not in proc.stderr
    assert not (out / "metrics.jsonl").exists()


# -- one DeepSpeed process without a launcher --------------------------------------------------
@pytest.mark.slow
def test_plain_envh_train_runs_deepspeed_as_one_process(tmp_path, random_model):
    """``deepspeed.enabled: "true"`` (what a GPU's ``auto`` picks) with no launcher variables:
    a group of one, not MPI discovery; its checkpoint is DeepSpeed's. (Resuming a DeepSpeed
    run, the killed run's rows after the checkpoint dropped: ``test_deepspeed.py``.)"""
    out = tmp_path / "run"
    args = ["--steps", "1", "--output-dir", str(out),
            *sets(*SMALL, 'deepspeed.enabled="true"', "save_every=1", f"model={random_model}")]
    proc = envh_train(*args, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert [r["step"] for r in rows(out)] == [1]
    ckpt = out / "checkpoints"
    assert (ckpt / "step-1" / "mp_rank_00_model_states.pt").is_file()  # DeepSpeed's checkpoint, not trainer.pt
    assert not (ckpt / "step-1" / "trainer.pt").exists()


# -- ZeRO-3 with engine hf on two processes ---------------------------------------------------
@pytest.mark.slow
def test_zero3_with_hf_generation_shards_the_reference_and_takes_an_update_step(tmp_path, random_model):
    child = Path(__file__).parent / "zero3_child.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(child),
           str(tmp_path), str(random_model)]
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               PYTHONWARNINGS="ignore")
    proc = procs.run_job(cmd, env=env, timeout=900, capture=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-6000:]
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for report in reports:
        # the reference is partitioned: this process keeps half of its elements, and outside a
        # forward no parameter above ZeRO-3's persistence threshold (10 x hidden) is whole
        assert "NOT_AVAILABLE" in report["ref_status"] and report["ref_big_whole"] == 0
        assert report["ref_empty"] > report["ref_params"] // 2
        assert report["ref_local_numel"] <= report["ref_full_numel"] // 2 + report["ref_params"]
        # the sharded reference computes what a full local copy does, hence the same KL
        assert report["ref_logp_max_diff"] < 1e-5
        assert report["kl_sharded"] == pytest.approx(report["kl_local"], abs=1e-6)
        assert all(k > 0 for k in report["kl_local"])
        # the update ran: generation's parameters did not break the backward
        assert report["global_steps"] == 1 and report["finite"] and report["policy_tokens"] > 0
    assert (reports[0]["samples"], reports[1]["samples"]) == (3, 1)  # uneven: idle forwards paired them
