"""What each arm trains on, without a model: the rigged arm's harnesses (and the ones left
out because they start at a held-out puzzle), the curriculum's draws (never a held-out
puzzle) and its state after a resume (the same draws as a run that never stopped)."""

from __future__ import annotations

import json
from pathlib import Path

import envh
import pytest
from envh import errors
from envh.bridges import toy24
from envh_experiment.config import from_data
from envh_experiment.runner import Runner
from envh_grpo import data
from envh_grpo.config import EnvSource
from envh_rigger.pool import HarnessPool
from experiment_files import tiny


def _pool(out: Path, specs: dict[str, dict]) -> None:
    pool = HarnessPool(out / "rig" / "pool")
    for i, (task, spec) in enumerate(specs.items()):
        pool.add(f"spec{i:04d}", spec, {"task": f"toy24/generated/{task}", "provenance": {"created": i}})
    (out / "rig" / "summary.json").write_text(json.dumps({"complete": True, "seconds": 1.0}))


def test_the_rigged_arm_trains_on_its_harnesses_and_never_on_a_held_out_start(tmp_path):
    # 1,4,8,10: the solver's first step leaves a 3-number puzzle; held out, that start is refused
    with envh.make("toy24") as env:
        env.reset(task=envh.TaskRef(suite="toy24", split="generated", instance_id="1,4,8,10"))
        plan = env.unwrapped.solve()
        env.step(plan[0])
        staged = env.unwrapped.canonical_state().split("->")[0]
    exp = from_data(tiny(heldout={"split": "generated", "classes": {"size3": [staged, "1,2,11"]}}))
    out = tmp_path / "run"
    runner = Runner(exp, out)
    # a real harness: a stage that replays the solver's first step
    spec = {"bridge": "toy24", "layers": [{"kind": "stage", "actions": [
        {"tool": plan[0].tool, "args": dict(plan[0].args)}]}]}
    _pool(out, {"1,4,8,10": spec, "2,6,9,9": {"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 7}]}})
    rigged = next(a for a in exp.arms if a.kind == "rigged")
    sources = {s["tasks"][0]: s["spec"] for s in runner.sources(rigged)}
    assert sources["2,6,9,9"]["layers"][0]["kind"] == "budget"  # its harness
    assert sources["1,4,8,10"] == "toy24"  # its harness starts at a held-out puzzle: played as it is
    assert "starts at a held-out task" in json.loads((out / "rig" / "summary.json").read_text())["dropped"][0]
    static = next(a for a in exp.arms if a.kind == "static")
    assert [s["tasks"] for s in runner.sources(static)] == [s["tasks"] for s in runner.sources(rigged)]


def _curriculum_draws(runner: Runner, arm, audit: Path, positions: range, *, rewind: int | None = None) -> list[str]:
    chooser = runner._chooser(arm, 0, audit)
    sources = data.resolve(tuple(EnvSource(**s) for s in runner.sources(arm)))
    if rewind is not None:
        chooser.rewind(rewind)
    drawn = []
    try:
        for pos in positions:
            _, task = chooser.draw(sources, pos)
            drawn.append(task.instance_id)
            chooser.record(pos, [pos % 3 == 0, pos % 2 == 0])  # some windows pass, some fail
    finally:
        chooser.close()
    return drawn


def test_the_curriculum_never_draws_a_held_out_puzzle_and_resumes_exactly(tmp_path):
    # hold out every solvable 3-number puzzle but three: a draw that ignored the filter would hit one
    everything = toy24.generate(150, seed=1, size=3, max_number=13)
    held = [p for p in everything if p not in ("1,2,8", "2,3,4", "1,3,8")][:140]
    exp = from_data(tiny(heldout={"split": "generated", "classes": {"size3": held}}))
    runner = Runner(exp, tmp_path / "run")
    arm = next(a for a in exp.arms if a.kind == "curriculum")
    full = _curriculum_draws(runner, arm, tmp_path / "a.jsonl", range(12))
    assert all(",".join(sorted(t.split(","), key=int)) not in set(held) for t in full)
    # a run killed after 5 groups (and a torn last line) resumes with the same state and draws
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    cut = [line for line in lines if json.loads(line)["position"] < 5]
    (tmp_path / "b.jsonl").write_text("\n".join(cut + lines[len(cut):len(cut) + 1]) + '\n{"type": "gro')
    resumed = _curriculum_draws(runner, arm, tmp_path / "b.jsonl", range(5, 12), rewind=5)
    assert resumed == full[5:]
    assert (tmp_path / "b.jsonl").read_text() == (tmp_path / "a.jsonl").read_text()


def test_an_arms_reward_terms_add_to_the_shared_ones(tmp_path):
    exp = from_data(tiny(train={**tiny()["train"], "reward": {"solved": 5.0, "invalid": 0.5}},
                         arms=[{"name": "static", "kind": "static"},
                               {"name": "ws", "kind": "static", "train": {"reward": {"meta_allowance": 5}}}]))
    config = Runner(exp, tmp_path / "run").train_config(exp.arms[1], 0, tmp_path / "x")
    assert (config.reward.solved, config.reward.invalid, config.reward.meta_allowance) == (5.0, 0.5, 5)


def test_a_spec_file_is_read_as_envh_reads_it(tmp_path):
    layered = tmp_path / "layered.yaml"
    layered.write_text("bridge: toy24\nlayers:\n  - {kind: budget, max_steps: 3}\n")
    with pytest.raises(errors.SpecError, match="plain benchmark"):
        from_data(tiny(spec=str(layered)))
    plain = tmp_path / "plain.yaml"
    plain.write_text("bridge: toy24\n")
    runner = Runner(from_data(tiny(spec=str(plain))), tmp_path / "run")
    runner.prepare()  # held-out ids name the bridge, as the trainer's evaluation rows do
    ids = [t["id"] for t in json.loads((tmp_path / "run" / "heldout.json").read_text())["tasks"]]
    assert ids[0] == "toy24/generated/3,6,7"


@pytest.mark.parametrize(("change", "message"), [
    ({"keep_checkpoints": "false"}, "true or false"),
    ({"heldout": {"split": "generated", "classes": {"a": ["3,6,7"], "b": []}}}, "is empty"),
    ({"heldout": {"split": ["generated"], "classes": {"a": ["3,6,7"]}}}, "split name"),
    ({"train": {**tiny()["train"], "nproc": 2}}, "one process"),
])
def test_settings_that_would_be_converted_silently_are_refused(change, message):
    with pytest.raises(errors.SpecError, match=message):
        from_data(tiny(**change))


def test_a_curriculum_that_only_anchors_is_refused():
    data = tiny()
    data["arms"][2]["curriculum"]["anchor"] = 1.0
    with pytest.raises(errors.SpecError, match="anchor"):
        from_data(data)


def test_a_rig_whose_policy_never_played_stops_the_experiment_before_training(tmp_path):
    """A bad policy option fails every rig episode; training the 'rigged' arm then would
    train the static arm under another name."""
    data = tiny()
    data["arms"][1]["rig"]["policy_options"] = {"no_such_option": 1}
    runner = Runner(from_data(data), tmp_path / "run", echo=lambda _m: None)
    with pytest.raises(errors.EnvhError, match="ended in an error"):
        runner.run()
    assert not (tmp_path / "run" / "arms").exists() and not (tmp_path / "run" / "baseline").exists()
