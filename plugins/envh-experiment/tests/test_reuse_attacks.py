"""Attacks on ``envh experiment --reuse``: results reused that the new file's settings did
not make, results lost or left stale, a reuse that cannot be resumed.

Every test here builds result folders by hand (or runs only the rig, ~10 s with the random
policy): no GRPO step runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from envh import errors
from envh_experiment.config import from_data, run_keys
from envh_experiment.report import build_report
from envh_experiment.runner import Runner
from experiment_files import tiny

ALL = ("baseline", "static/seed-0", "rig", "rigged/seed-0", "curriculum/seed-0")


def _quiet(_: str) -> None:
    pass


def _finish(root: Path, name: str, **done: Any) -> None:
    """Hand-made finished result ``name`` (a run_keys name) in result folder ``root``."""
    rows = "".join(json.dumps({"task": f"toy24/generated/{t}", "success": False, "score": 0.0, "steps": 2,
                               "stop": "max_turns"}) + "\n" for t in ("3,6,7", "1,2,11", "1,2,4,7", "2,2,4,7"))
    if name == "baseline":
        (root / "baseline" / "eval").mkdir(parents=True, exist_ok=True)
        (root / "baseline" / "eval" / "step-0.jsonl").write_text(rows)
    elif name == "rig":
        (root / "rig").mkdir(parents=True, exist_ok=True)
        (root / "rig" / "summary.json").write_text(json.dumps({"complete": True, "seconds": 5.0, "rollouts": 20,
                                                               "accepted": 0, "tasks": 2, "tokens": 0}))
    else:
        folder = root / "arms" / name
        (folder / "eval").mkdir(parents=True, exist_ok=True)
        (folder / "eval" / "step-2.jsonl").write_text(rows)
        (folder / "done.json").write_text(json.dumps({"wall_s": 10.0, "steps": 2, **done}))


def _old(tmp_path: Path, data: dict[str, Any] | None = None, results: tuple[str, ...] = ALL,
         name: str = "old") -> Path:
    """A result folder started by the real runner (experiment.json with run keys) whose
    results ``results`` are finished (by hand)."""
    old = tmp_path / name
    Runner(from_data(data or tiny()), old, echo=_quiet).prepare()
    for result in results:
        _finish(old, result)
    return old


def _reused(new: Path) -> set[str]:
    return set(json.loads((new / "experiment.json").read_text())["reused"])


# -- findings ---------------------------------------------------------------------------


def test_a_run_that_reused_the_rig_can_be_resumed(tmp_path):
    exp = from_data(tiny())
    old = tmp_path / "old"
    runner = Runner(exp, old, echo=_quiet)
    runner.prepare()
    runner.rig(exp.arms[1])  # the real rig (random policy): writes rig/rig.json as envh rig does
    for name in ("baseline", "static/seed-0"):
        _finish(old, name)
    new = tmp_path / "new"
    Runner(exp, new, reuse=old, echo=_quiet).prepare()
    assert "rig" in _reused(new)
    # the new run is killed while it trains the rigged arm; --resume must continue it
    Runner(exp, new, resume=True, echo=_quiet).prepare()


def test_a_reuse_killed_while_copying_leaves_nothing_a_changed_file_keeps(tmp_path):
    old = _old(tmp_path)
    new = tmp_path / "new"

    def killed(message: str) -> None:  # the echo after each copy: stop after the static run's
        if message.startswith("[reuse] static/seed-0"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Runner(from_data(tiny()), new, reuse=old, echo=killed).prepare()
    assert not (new / "experiment.json").exists() and (new / "arms" / "static" / "seed-0" / "done.json").exists()
    # the user revises the training block and runs again into the same (apparently unstarted) folder
    revised = tiny(train={**tiny()["train"], "optim": {"lr": 2e-5}})
    try:
        Runner(from_data(revised), new, reuse=old, echo=_quiet).prepare()
    except errors.EnvhError:
        return  # refusing the non-empty folder is a fix
    assert _reused(new) == {"rig"}
    # ... yet the old design's step-0 and static run sit there finished: baseline() and train() skip them
    assert not (new / "arms" / "static" / "seed-0" / "done.json").exists()
    assert not (new / "baseline" / "eval" / "step-0.jsonl").exists()


def test_a_rigged_run_is_not_reused_without_its_pool(tmp_path):
    old = _old(tmp_path, results=("baseline", "static/seed-0", "rigged/seed-0"))  # rig/ gone (e.g. pruned)
    new = tmp_path / "new"
    Runner(from_data(tiny(seeds=[0, 1])), new, reuse=old, echo=_quiet).prepare()
    reused = _reused(new)
    assert "rig" not in reused  # the rig runs again: a new pool for rigged/seed-1
    assert "rigged/seed-0" not in reused


def test_results_recorded_under_other_versions_are_not_reused(tmp_path):
    old = _old(tmp_path, results=("baseline", "static/seed-0"))
    meta = json.loads((old / "experiment.json").read_text())
    meta["versions"] = {**meta["versions"], "envh": "0.0.1", "envh-grpo": "0.0.1", "python": "3.9.0"}
    (old / "experiment.json").write_text(json.dumps(meta))
    new = tmp_path / "new"
    Runner(from_data(tiny()), new, reuse=old, echo=_quiet).prepare()
    assert _reused(new) == set()


def test_a_model_directory_changed_in_place_changes_the_keys(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights v1")
    data = tiny(train={**tiny()["train"], "model": str(model)})
    before = run_keys(from_data(data))
    (model / "model.safetensors").write_bytes(b"weights v2, fine-tuned since")
    after = run_keys(from_data(data))
    assert {k for k in before if before[k] != after[k]} == {k for k in before if k != "rig"}


def test_reordered_heldout_classes_change_the_keys(tmp_path):
    a = from_data(tiny())
    data = tiny()
    data["heldout"] = {"split": "generated", "classes": dict(reversed(list(data["heldout"]["classes"].items())))}
    b = from_data(data)
    assert [i for _, i in a.heldout_ids()] != [i for _, i in b.heldout_ids()]  # another evaluation order
    assert run_keys(a)["baseline"] != run_keys(b)["baseline"]


def test_keys_that_disagree_with_the_recorded_config_are_refused(tmp_path):
    old = _old(tmp_path, data=tiny(train={**tiny()["train"], "optim": {"lr": 2e-5}}),
               results=("baseline", "static/seed-0"))
    meta = json.loads((old / "experiment.json").read_text())
    meta["run_keys"] = run_keys(from_data(tiny()))  # hand-edited to claim the new file's keys
    (old / "experiment.json").write_text(json.dumps(meta))
    new = tmp_path / "new"
    try:
        Runner(from_data(tiny()), new, reuse=old, echo=_quiet).prepare()
    except errors.EnvhError:
        return
    assert _reused(new) == set()


def test_a_result_linked_in_from_another_experiment_is_not_reused(tmp_path):
    other = _old(tmp_path, data=tiny(train={**tiny()["train"], "optim": {"lr": 2e-5}}),
                 results=("static/seed-0",), name="other")
    old = _old(tmp_path, results=())
    (old / "arms" / "static").mkdir(parents=True)
    os.symlink(other / "arms" / "static" / "seed-0", old / "arms" / "static" / "seed-0")
    new = tmp_path / "new"
    Runner(from_data(tiny()), new, reuse=old, echo=_quiet).prepare()
    assert "static/seed-0" not in _reused(new)


def test_reuse_does_not_copy_checkpoints_the_new_file_drops(tmp_path):
    old = _old(tmp_path, data=tiny(keep_checkpoints=True), results=("static/seed-0",))
    (old / "arms" / "static" / "seed-0" / "checkpoints" / "step-2").mkdir(parents=True)
    (old / "arms" / "static" / "seed-0" / "checkpoints" / "step-2" / "optimizer.pt").write_bytes(b"x" * 1024)
    new = tmp_path / "new"
    Runner(from_data(tiny()), new, reuse=old, echo=_quiet).prepare()
    assert "static/seed-0" in _reused(new)
    assert not (new / "arms" / "static" / "seed-0" / "checkpoints").exists()


def test_a_folder_without_a_config_is_refused_with_a_message(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    (old / "experiment.json").write_text(json.dumps({"name": "tiny"}))
    with pytest.raises(errors.EnvhError, match="--reuse"):
        Runner(from_data(tiny()), tmp_path / "new", reuse=old, echo=_quiet).prepare()


def test_the_report_names_the_machine_reused_results_ran_on(tmp_path):
    old = _old(tmp_path, results=("baseline", "static/seed-0"))
    meta = json.loads((old / "experiment.json").read_text())
    meta["machine"] = {**meta["machine"], "platform": "gpu-box-h200", "cpus": 96}
    (old / "experiment.json").write_text(json.dumps(meta))
    new = tmp_path / "new"
    Runner(from_data(tiny()), new, reuse=old, echo=_quiet).prepare()
    text = build_report(new).read_text()
    reused = text.split("## Reused results", 1)[1].split("##", 1)[0]
    assert "gpu-box-h200" in reused


@pytest.mark.parametrize("change", ["rename a class", "check_observations"])
def test_changes_no_result_depends_on_keep_the_keys(change):
    data = tiny()
    if change == "rename a class":
        data["heldout"] = {"split": "generated", "classes": {
            ("three" if k == "size3" else k): v for k, v in data["heldout"]["classes"].items()}}
    else:
        data["heldout"] = {**data["heldout"], "check_observations": False}
    assert run_keys(from_data(data)) == run_keys(from_data(tiny()))


# -- what held --------------------------------------------------------------------------


def test_half_finished_results_are_not_copied(tmp_path):
    old = _old(tmp_path, results=("baseline",))
    (old / "arms" / "static" / "seed-0" / "eval").mkdir(parents=True)  # killed mid-run: no done.json
    (old / "arms" / "static" / "seed-0" / "metrics.jsonl").write_text("{}\n")
    (old / "rig").mkdir()
    (old / "rig" / "summary.json").write_text(json.dumps({"complete": False, "seconds": 3.0}))  # killed rig
    (old / "baseline" / "eval" / "step-0.jsonl").rename(old / "baseline" / "eval" / "step-0.jsonl.tmp")
    new = tmp_path / "new"
    Runner(from_data(tiny()), new, reuse=old, echo=_quiet).prepare()
    assert _reused(new) == set() and not (new / "arms").exists() and not (new / "rig").exists()


@pytest.mark.parametrize(("what", "change", "kept"), [
    ("arm 0's reward terms feed the step-0 evaluation", lambda d: d["arms"][0].update(
        train={"reward": {"invalid_action": -1.0}}), {"rig", "rigged/seed-0", "curriculum/seed-0"}),
    ("curriculum options", lambda d: d["arms"][2]["curriculum"].update(anchor=0.3),
     {"baseline", "static/seed-0", "rig", "rigged/seed-0"}),
    ("eval_every", lambda d: d.update(eval_every=2), {"baseline", "rig"}),
    ("eval_seed", lambda d: d.update(eval_seed=99), set()),
    ("a held-out id moved to another class", lambda d: d["heldout"]["classes"].update(
        size3=["3,6,7"], size4=["1,2,11", "1,2,4,7", "2,2,4,7"]), set(ALL)),  # same ids, same order: same results
    ("the rig's budget", lambda d: d["arms"][1]["rig"].update(budget={"max_seconds": 5}),
     {"baseline", "static/seed-0", "curriculum/seed-0"}),
    ("training task order", lambda d: d["train_tasks"].update(ids=["1,4,8,10", "2,6,9,9"]), {"baseline"}),
    ("an arm's kind", lambda d: d["arms"][0].update(kind="curriculum", curriculum=d["arms"][2]["curriculum"]),
     {"baseline", "rig", "rigged/seed-0", "curriculum/seed-0"}),
    ("seeds reordered", lambda d: d.update(seeds=[1, 0]), set(ALL)),
    ("keep_checkpoints, description, compare, fixed", lambda d: d.update(
        keep_checkpoints=True, description="x", compare=[["static", "rigged"]], fixed={"at": "x"}), set(ALL)),
])
def test_keys_follow_what_made_each_result(what, change, kept):
    data = tiny()
    change(data)
    base, now = run_keys(from_data(tiny())), run_keys(from_data(data))
    assert {k for k in base if now.get(k) == base[k]} == kept, what


def test_a_spec_file_edited_in_place_changes_every_key(tmp_path):
    spec = tmp_path / "toy.yaml"
    spec.write_text("bridge: toy24\n")
    before = run_keys(from_data(tiny(spec=str(spec))))
    spec.write_text("bridge: toy24\nconfig: {}\n")
    after = run_keys(from_data(tiny(spec=str(spec))))
    assert all(before[k] != after[k] for k in before)

