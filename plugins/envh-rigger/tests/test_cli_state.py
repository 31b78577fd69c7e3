"""Honest CLI state: every option is checked before anything is written, and --resume
refuses a configuration other than the stored one, listing each difference."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from envh import errors
from envh_rigger.run import RigConfig, rig

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def cli(registry):
    from envh.cli import cli

    registry.register_commands(cli)
    return cli


def _rig(cli, *args):
    return CliRunner().invoke(cli, ["rig", "toy24", "--workers", "1", *args])


@pytest.mark.parametrize("args,message", [
    (["--target", "sr:0.9-0.1"], "Bad target"),
    (["--target", "weakness:"], "Bad target"),
    (["--tasks", "nosuch/1,2"], "Unknown task"),
    (["--tasks", "split:nosuch"], "split"),
    (["--tasks", "split:medium:0"], "N >= 1"),
    (["-k", "0"], "-k must be at least 1"),
    (["--k-max", "0"], "--k-max must be at least 1"),
    (["--rounds", "0"], "--rounds"),
    (["--policy", "nosuch"], "Unknown policy"),
    (["--designer", "nosuch"], "Unknown designer"),
    (["--diagnoser", "nosuch"], "Unknown diagnoser"),
])
def test_bad_options_leave_no_state_and_the_corrected_command_runs(cli, tmp_path, args, message):
    out = tmp_path / "run"
    res = _rig(cli, "--policy", "coin", "--tasks", "medium/1,2,6,6", "--out", str(out), *args)
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert not out.exists()
    ok = _rig(cli, "--policy", "coin", "--tasks", "medium/1,2,6,6", "--out", str(out), "--rounds", "1")
    assert ok.exit_code == 0, ok.output


def test_resume_refuses_changed_flags_and_lists_them(cli, tmp_path):
    out = str(tmp_path / "run")
    first = _rig(cli, "--policy", "coin", "--tasks", "medium/1,2,6,6", "--out", out)
    assert first.exit_code == 0, first.output
    changed = _rig(cli, "--policy", "coin", "--tasks", "split:hard:2", "--target", "sr:0.2-0.4",
                   "--out", out, "--resume")
    assert changed.exit_code == 2
    assert "tasks: stored 'medium/1,2,6,6', given 'split:hard:2'" in changed.output
    assert "target: stored 'sr:0.4-0.6', given 'sr:0.2-0.4'" in changed.output
    same = _rig(cli, "--out", out, "--resume")  # nothing given: the stored configuration goes on
    assert same.exit_code == 0, same.output
    budget = _rig(cli, "--out", out, "--resume", "--max-rollouts", "500")  # budgets may change
    assert budget.exit_code == 0, budget.output


def test_api_resume_compares_the_whole_configuration(registry, tmp_path):
    cfg = RigConfig(policy="coin", tasks="medium/1,2,6,6", out=str(tmp_path / "r"))
    rig(cfg, registry=registry)
    with pytest.raises(errors.EnvhError, match="k: stored 5, given 3"):
        rig(RigConfig(policy="coin", tasks="medium/1,2,6,6", out=str(tmp_path / "r"), k=3, resume=True),
            registry=registry)


def test_k_max_one_plays_one_rollout_per_validation(registry, tmp_path):
    summary = rig(RigConfig(policy="coin", tasks="medium/1,2,6,6", out=str(tmp_path / "r"), k_max=1,
                            rounds=2), registry=registry)
    from envh_rigger.journal import Journal

    attempts = [e["attempt"] for e in Journal(tmp_path / "r").events(kind="attempt")]
    assert attempts and all(a["result"]["n"] <= 1 for a in attempts if a.get("result")), summary


def test_main_script_never_resumes_a_run_with_other_arguments(tmp_path):
    """dev/main.sh adds --resume only when its arguments equal those of the stored run."""
    out = tmp_path / "main"
    out.mkdir()
    (out / "rig.json").write_text("{}")
    (out / "main.args").write_text("--tasks split:medium:2\n")
    env = {**os.environ, "ENVH_MAIN_OUT": str(out), "ENVH_MAIN_DRY_RUN": "1"}
    same = subprocess.run(["bash", str(ROOT / "dev/main.sh"), "--tasks", "split:medium:2"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert same.returncode == 0, same.stderr
    assert "--resume" in same.stdout
    other = subprocess.run(["bash", str(ROOT / "dev/main.sh"), "--tasks", "split:hard:2"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert other.returncode != 0
    assert "split:hard:2" in other.stderr and "ENVH_MAIN_OUT" in other.stderr


@pytest.mark.parametrize("args,message", [
    (["--prices", "{not json"], "--prices"),
    (["--prices", '{"m": 3}'], "--prices"),
    (["--max-rollouts", "-1"], "must not be negative"),
    (["--target", "steps:5-5"], "Bad target"),
    (["--tasks", ";"], "names no task"),
])
def test_more_bad_input_is_refused_before_any_state(cli, tmp_path, args, message):
    out = tmp_path / "run"
    res = _rig(cli, "--policy", "coin", "--tasks", "medium/1,2,6,6", "--out", str(out), *args)
    assert res.exit_code == 2, res.output
    assert message in res.output and not out.exists()


def test_resume_refuses_a_spec_file_whose_content_changed(registry, tmp_path):
    spec = tmp_path / "world.yaml"
    spec.write_text("bridge: toy24\nlayers:\n  - kind: budget\n    max_steps: 6\n")
    cfg = RigConfig(spec=str(spec), policy="coin", tasks="medium/1,2,6,6", out=str(tmp_path / "r"), rounds=1)
    rig(cfg, registry=registry)
    spec.write_text("bridge: toy24\nlayers:\n  - kind: budget\n    max_steps: 2\n")  # same path, other world
    import attrs

    with pytest.raises(errors.EnvhError, match="has changed"):
        rig(attrs.evolve(cfg, resume=True), registry=registry)


def test_a_task_named_twice_runs_once(registry, tmp_path):
    summary = rig(RigConfig(policy="coin", tasks="medium/1,2,6,6;1,2,6,6", out=str(tmp_path / "r"), rounds=1),
                  registry=registry)
    assert list(summary["stops"]) == ["toy24/medium/1,2,6,6"]
