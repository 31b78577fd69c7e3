"""The template designer end to end on Toy24 with deterministic policies."""

from __future__ import annotations

import json

import envh
from click.testing import CliRunner
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
    assert "accepted" in report and "metric_per_round.png" in report
    assert "Policy `coin`" in report and "designer `template`" in report and '"kind": "stage"' in report
    for png in ("metric_per_round.png", "rollouts.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_strong_policy_gets_pressure_and_rejections_are_archived(registry, tmp_path):
    out = tmp_path / "run"
    # the bridge's own pressure templates (the generic mask has its own tests in test_knobs)
    summary = rig(RigConfig(policy="solver", tasks="medium/1,2,6,6", out=str(out),
                            designer="template:toy24.block-operator,toy24.hide-number"), registry=registry)
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
    [event] = Journal(tmp_path / "r").events("toy24/medium/1,2,6,6", "baseline")
    check = event["check"]  # the band validator decided on the base itself, from the 5 observed on
    assert check["decision"] == "in" and check["decisive"] and check["n"] >= 5
    assert summary["usage"]["rollouts"] == check["n"]


def test_a_baseline_that_looks_in_the_band_in_five_rollouts_is_judged_before_the_task_closes(registry, tmp_path):
    """A true 0.18 showing 2 of 5 (seeds 15..19): the band validator plays the base on and
    finds it below [0.4, 0.6], so the loop goes to work instead of closing the task."""
    out = tmp_path / "r"
    summary = rig(RigConfig(policy="rate", policy_options={"rates": {4: 0.18}}, tasks="medium/1,2,6,6",
                            target="sr:0.4-0.6", seed=15, rounds=1, out=str(out)), registry=registry)
    [event] = Journal(out).events("toy24/medium/1,2,6,6", "baseline")
    assert event["stats"]["successes"] == 2 and event["stats"]["n"] == 5
    assert event["check"]["decision"] == "below" and event["check"]["n"] > 5
    assert event["direction"] == "scaffold"
    assert summary["stops"]["toy24/medium/1,2,6,6"] != "baseline_in_target"


def test_task_crash_is_isolated_and_retried_on_resume(registry, tmp_path):
    """A designer crash ends its task only; --resume tries the crashed task again."""
    marker = tmp_path / "fixed"
    cfg = RigConfig(policy="coin", tasks="medium/1,2,6,6;medium/3,3,5,10", designer="flaky",
                    designer_options={"marker": str(marker)}, out=str(tmp_path / "r"))
    summary = rig(cfg, registry=registry)
    assert set(summary["stops"].values()) == {"crashed"}
    done = Journal(tmp_path / "r").events("toy24/medium/1,2,6,6", "task_done")
    assert "Traceback" in done[0]["detail"] and "designer crashed" in done[0]["detail"]
    marker.write_text("")
    import attrs

    again = rig(attrs.evolve(cfg, resume=True), registry=registry)
    assert set(again["stops"].values()) == {"accepted"}


def test_cli_rig_and_pool(registry, tmp_path):
    from envh.cli import cli

    registry.register_commands(cli)
    runner = CliRunner()
    out = tmp_path / "cli"
    # the coin policy lives in this test's registry only: play it in this process
    res = runner.invoke(cli, ["rig", "toy24", "--policy", "coin", "--tasks", "medium/1,2,6,6",
                              "--out", str(out), "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert "report:" in res.output
    res = runner.invoke(cli, ["pool", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)[0]["task"] == "toy24/medium/1,2,6,6"
    again = runner.invoke(cli, ["rig", "toy24", "--policy", "coin", "--out", str(out), "--workers", "1"])
    assert again.exit_code == 2 and "--resume" in again.output


def test_rollouts_play_in_a_worker_pool(tmp_path):
    """With workers > 1 a batch of rollouts runs in the process pool; every episode is
    stored once, with its own seed, and reading them back replays nothing."""
    import envh
    from envh import TaskRef
    from envh_rigger.rollouts import Rollouts

    task = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")
    spec = {"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 4}]}
    first = Rollouts(tmp_path / "p", policy="random", registry=envh.make_plugin_manager(), workers=2)
    try:
        trajs = first.run(spec, task, [0, 1, 2, 3], "observe")
        assert [t.seed for t in trajs] == [0, 1, 2, 3] and first.played == 4
        assert all(t.error_class is None for t in trajs)
        assert len({tuple(str(s.proposed) for s in t.steps) for t in trajs}) > 1, "seeds must differ"
    finally:
        first.close()
    again = Rollouts(tmp_path / "p", policy="random", registry=envh.make_plugin_manager(), workers=2)
    try:
        assert [t.key for t in again.run(spec, task, [0, 1, 2, 3], "observe")] == [t.key for t in trajs]
        assert again.played == 0
    finally:
        again.close()


def test_replay_plan_autostop_scaffolds_a_policy_that_never_stops():
    import envh
    from envh import Action, TaskRef
    from envh.bridges.toy24_templates import ReplayPlanAutoStop

    task = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")
    template, base = ReplayPlanAutoStop(), {"bridge": "toy24"}
    with envh.make(base) as env:
        env.reset(task=task, seed=0)
        mags = template.magnitudes(env, task)
        full = template.instantiate(env, task, mags[-1])
        none = template.instantiate(env, task, 0)
    assert mags[0] == 0 and [layer["kind"] for layer in full] == ["stage", "contract"]
    combine = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})
    with envh.make({**base, "layers": full}) as env:  # plan done: the next action becomes stop
        env.reset(task=task, seed=0)
        resp = env.step(combine)
        assert resp.terminated and env.evaluate().success
        assert resp.info["envh"][-1]["action"] == "rewritten"
    with envh.make({**base, "layers": none}) as env:  # no stage: the policy must reach 24 itself
        env.reset(task=task, seed=0)
        assert not env.step(combine).terminated and not env.evaluate().success


def test_replay_plan_autostop_hint_names_the_next_step_along_the_plan():
    import envh
    from envh import Action, TaskRef
    from envh.bridges.toy24_templates import ReplayPlanAutoStopHint

    task = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")
    with envh.make({"bridge": "toy24"}) as env:
        env.reset(task=task, seed=0)
        plan = [a for a in env.unwrapped.solve() if a.tool == "combine"]
        layers = ReplayPlanAutoStopHint().instantiate(env, task, 0)
    with envh.make({"bridge": "toy24", "layers": layers}) as env:
        first = env.reset(task=task, seed=0)
        a = plan[0]
        assert f"Hint: a good next step is combine({a.args['i']}, {a.args['j']}, {a.args['op']})" in first.observation.text
        resp = env.step(Action(tool="combine", args={"i": 3, "j": 2, "op": "sub"}))  # off the plan: no hint
        assert "Hint" not in resp.observation.text
        env.reset(task=task, seed=0)
        for a in plan:
            resp = env.step(a)
        assert not resp.terminated and env.step(Action(tool="reset")).terminated  # auto-stop at 24
        assert env.evaluate().success


def test_the_template_designer_tries_the_diagnosed_axis_first():
    """Actions mostly invalid (axis A): the action-rewriting scaffold comes before the
    start-state one, which cannot help a policy that never calls stop."""
    import envh
    from envh import TaskRef
    from envh.bridges.toy24 import TOOLS
    from envh_rigger.designers.base import DesignContext
    from envh_rigger.designers.template import TemplateDesigner
    from envh_rigger.targets import parse_target

    registry = envh.make_plugin_manager()
    task = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")

    def propose(axis):
        ctx = DesignContext(task=task, bridge="toy24", spec={"bridge": "toy24"}, tools=TOOLS, state_schema={},
                            baseline={"success_rate": 0.0}, episodes=[], target=parse_target("sr:0.4-0.6"),
                            band=(0.4, 0.6), direction="scaffold",
                            diagnosis={"failure_axis": axis, "summary": ""}, attempts=[], feedback=None,
                            registry=registry)
        return TemplateDesigner().propose(ctx).meta["template"]

    assert propose("A") == "toy24.replay-plan-autostop"
    assert propose("S0") == "toy24.replay-plan"


def test_diagnosis_claims_carry_evidence_and_the_bridge_error_kinds(registry, tmp_path):
    """The coin policy's blunders are refused by Toy24 with its own error kind; every
    failed episode gets a claim on an axis with the episode, step and a quote."""
    out = tmp_path / "diag"
    rig(RigConfig(policy="coin", tasks="medium/1,2,6,6", out=str(out), rounds=1), registry=registry)
    (base,) = Journal(out).events("toy24/medium/1,2,6,6", "baseline")
    claims = base["diagnosis"]["claims"]
    assert claims and all(c["axis"] in ("S0", "A", "O", "T", "R", "task_understanding") for c in claims)
    for c in claims:
        ev = c["evidence"]
        assert ev["episode"].startswith("toy24/medium/1,2,6,6") and "step" in ev and ev["quote"]
    report = (out / "report.md").read_text()
    assert "episode seed" in report and "step" in report
