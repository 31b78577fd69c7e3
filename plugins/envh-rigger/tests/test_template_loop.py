"""The template designer end to end on Toy24 with deterministic policies."""

from __future__ import annotations

import json

from click.testing import CliRunner

import envh
from envh_rigger.journal import Journal
from envh_rigger.pool import HarnessPool
from envh_rigger.run import RigConfig, rig

TASKS = "medium/1,2,6,6;medium/3,3,5,10"


def test_weak_policy_is_scaffolded_into_the_band(registry, tmp_path):
    out = tmp_path / "run"
    summary = rig(RigConfig(policy="coin", tasks=TASKS, out=str(out)), registry=registry)
    assert summary["stops"] == {"toy24/medium/1,2,6,6": "accepted", "toy24/medium/3,3,5,10": "accepted"}
    pool = HarnessPool.open(out)
    entries = pool.entries()
    assert len(entries) == 2
    for entry in entries:
        stats = entry["stats"]["validation"]
        assert 0.4 <= stats["success_rate"] <= 0.6 and stats["decision"] == "in"
        assert entry["stats"]["baseline"]["success_rate"] == 0.0
        assert entry["meta"]["template"] == "toy24.replay-plan"
        assert entry["provenance"]["policy"] == "coin" and entry["diagnosis"] and entry["rationale"]
        spec = pool.load_spec(entry["spec_id"])
        assert envh.spec_id(spec, registry) == entry["spec_id"]  # content-addressed
        # the accepted spec is an ordinary env spec: the staged start is two steps from 24
        with envh.make(spec, registry=registry) as env:
            task = envh.TaskRef(suite="toy24", split="medium", instance_id=entry["task"].split("/")[-1])
            env.reset(task=task, seed=0)
            assert len(env.get_env_state()["numbers"]) == 2
    report = (out / "report.md").read_text()
    assert "accepted" in report and "sr_per_round.png" in report
    for png in ("sr_per_round.png", "rollouts.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_strong_policy_gets_pressure_and_rejections_are_archived(registry, tmp_path):
    out = tmp_path / "run"
    summary = rig(RigConfig(policy="solver", tasks="medium/1,2,6,6", out=str(out)), registry=registry)
    assert summary["stops"]["toy24/medium/1,2,6,6"] == "designer_exhausted"
    rejected = HarnessPool.open(out).rejected()
    templates = {r["meta"]["template"] for r in rejected}
    assert templates == {"toy24.block-operator", "toy24.hide-number"}
    assert all(r["reason"] for r in rejected)
    # bisection: each measured overshoot or undershoot narrows the search, none repeats
    tried = [(r["meta"]["template"], r["meta"]["index"]) for r in rejected]
    assert len(tried) == len(set(tried))
    events = Journal(out).events("toy24/medium/1,2,6,6", "baseline")
    assert events[0]["direction"] == "pressure"


def test_baseline_already_in_target_needs_no_candidate(registry, tmp_path):
    summary = rig(RigConfig(policy="solver", tasks="medium/1,2,6,6", target="sr:0.8-1",
                            out=str(tmp_path / "r")), registry=registry)
    assert summary["stops"] == {"toy24/medium/1,2,6,6": "baseline_in_target"}
    assert summary["usage"]["rollouts"] == 5


def test_task_crash_is_isolated(registry, tmp_path):
    # an unknown instance crashes its task (the bridge rejects the id); the next task still runs
    summary = rig(RigConfig(policy="coin", tasks="medium/not-a-puzzle;medium/1,2,6,6",
                            out=str(tmp_path / "r")), registry=registry)
    assert summary["stops"]["toy24/medium/not-a-puzzle"] == "crashed"
    assert summary["stops"]["toy24/medium/1,2,6,6"] == "accepted"
    done = Journal(tmp_path / "r").events("toy24/medium/not-a-puzzle", "task_done")
    assert "Traceback" in done[0]["detail"]


def test_cli_rig_and_pool(registry, tmp_path):
    from envh.cli import cli

    registry.register_commands(cli)
    runner = CliRunner()
    out = tmp_path / "cli"
    res = runner.invoke(cli, ["rig", "toy24", "--policy", "coin", "--tasks", "medium/1,2,6,6",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "report:" in res.output
    res = runner.invoke(cli, ["pool", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)[0]["task"] == "toy24/medium/1,2,6,6"
    again = runner.invoke(cli, ["rig", "toy24", "--policy", "coin", "--out", str(out)])
    assert again.exit_code == 2 and "--resume" in again.output
