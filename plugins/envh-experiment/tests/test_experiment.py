"""``envh experiment`` end to end: every arm runs its GRPO steps (on a small random model of
SmolLM2's shape, ``conftest.random_model``: the machinery, not learning; its replies all
score alike, so its updates are zero), the rig really run, resume after a kill, the
held-out/training separation enforced, and the report built from the run's own files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from envh import errors
from envh_experiment.config import from_data, load
from envh_experiment.runner import Runner
from experiment_files import tiny

ENVH = [sys.executable, "-c", "import sys; from envh.cli import main; sys.exit(main())"]


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.parametrize("name", ["toy24-adaptive", "toy24-adaptive-gpu"])
def test_the_shipped_examples_are_valid_and_keep_held_out_tasks_apart(name):
    exp = load(name)
    held = [i for _, i in exp.heldout_ids()]
    # an arm's held-out success has a 95 % interval of at most +-10 points: 96 distinct tasks
    # (the seeds replay the same tasks, so they do not add to the population)
    assert len(held) >= 96
    assert not set(held) & set(exp.train_tasks.ids)
    assert {a.kind for a in exp.arms} == {"static", "rigged", "curriculum"} and len(exp.seeds) >= 2
    Runner(exp, "unused")._check_separation()  # no held-out puzzle starts as a training puzzle


@pytest.mark.parametrize(("change", "message"), [
    ({"heldout": {"split": "generated", "classes": {"a": ["2,6,9,9"]}}}, "also training tasks"),
    ({"arms": [{"name": "static", "kind": "static"},
               {"name": "rigged", "kind": "rigged", "rig": {"tasks": "generated/3,6,7"}}]}, "rig's tasks include"),
    ({"arms": [{"name": "static", "kind": "static", "train": {"steps": 9}}]}, "may only set"),
    ({"arms": [{"name": "static", "kind": "static", "train": {"ppo_epochs": 8}}]}, "may only set"),
    ({"arms": [{"name": "static", "kind": "static", "train": {"history": 3}}]}, "may only set"),
    ({"arms": [{"name": "static", "kind": "static"}, {"name": "r", "kind": "rigged", "rig": {"out": "/tmp/x"}}]},
     "set by the experiment"),
    ({"arms": [{"name": "static", "kind": "static"}, {"name": "r1", "kind": "rigged"},
               {"name": "r2", "kind": "rigged"}]}, "at most one rigged arm"),
    ({"compare": [["static", "static"]], "arms": [{"name": "static", "kind": "static"}]}, "with itself"),
    ({"train_tasks": {"split": "generated", "ids": "2,6,9,9"}}, "must be a list"),
    ({"train_tasks": {"split": "generated", "ids": ["2,6,9,9", "2,6,9,9"]}}, "distinct"),
    ({"heldout": {"split": "generated", "classes": {"a": "3,6,7"}}}, "must be a list"),
    ({"seeds": [True]}, "list of integers"),
    ({"seeds": [2**40]}, r"\[0, 2\*\*31\)"),
    ({"spec": 5}, "bridge name"),
    ({"spec": {"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 3}]}}, "plain benchmark"),
    ({"arms": [{"name": "static", "kind": "statik"}]}, "choose one of"),
    ({"heldout": {"split": "generated", "classes": {"a": ["3,6,7", "3,6,7"]}}}, "repeat"),
    ({"seeds": []}, "seeds"),
    ({"arms": [{"name": "static", "kind": "static"}, {"name": "../out", "kind": "static"}]}, "plain name"),
    ({"name": "/etc"}, "plain name"),
    ({"eval_every": 3}, "divide train.steps"),
])
def test_impossible_experiments_are_refused_before_anything_runs(change, message, tmp_path):
    with pytest.raises(errors.SpecError, match=message):
        from_data(tiny(**change))


@pytest.mark.parametrize(("train", "message"), [
    ({"optim": {"lrr": 1.0}}, "lrr"), ({"group_size": 1}, "group_size is 1"), ({"steps": 0}, "steps")])
def test_a_bad_training_setting_stops_the_run_before_anything_is_written(train, message, tmp_path):
    """Checked with every arm's config up front, not after a rig of many minutes: the
    corrected file then runs in the same folder."""
    data = tiny(train={**tiny()["train"], **train})
    path = _write(tmp_path, data)
    out = tmp_path / "run"
    for extra in ([], ["--check"]):
        proc = subprocess.run([*ENVH, "experiment", str(path), "--out", str(out), *extra],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode != 0 and message in proc.stderr + proc.stdout, proc.stderr[-2000:]
        assert not out.exists()


def test_files_that_could_blow_up_or_are_not_text_are_refused(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [x, x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n")
    with pytest.raises(errors.SpecError, match="alias"):
        load(bomb)
    binary = tmp_path / "latin1.yaml"
    binary.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(errors.SpecError, match="not UTF-8"):
        load(binary)


def test_unknown_keys_name_their_path():
    data = tiny()
    data["arms"][0]["rigg"] = {}
    with pytest.raises(errors.SpecError, match=r"arms\[0\]\.rigg|rigg"):
        from_data(data)


def test_a_held_out_task_under_another_name_is_refused(tmp_path):
    """``6,9,9,2`` is training task ``2,6,9,9`` in another order: the same start, the same task."""
    exp = from_data(tiny(heldout={"split": "generated", "classes": {"a": ["3,6,7", "9,9,6,2"]}}))
    with pytest.raises(errors.SpecError, match="is training task '2,6,9,9' under another name"):
        Runner(exp, tmp_path / "out").prepare()
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_reuse_needs_an_experiment_and_a_new_folder(tmp_path):
    exp = from_data(tiny())
    with pytest.raises(errors.EnvhError, match="holds no experiment"):
        Runner(exp, tmp_path / "new", reuse=tmp_path).prepare()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "experiment.json").write_text(json.dumps({"name": "tiny", "config": {}}))
    with pytest.raises(errors.EnvhError, match="starts a new result folder"):
        Runner(exp, tmp_path / "old", resume=True, reuse=tmp_path).prepare()
    assert not (tmp_path / "new").exists()


def test_every_arm_trains_and_the_report_comes_from_the_run(tmp_path, random_model):
    out = tmp_path / "run"
    proc = subprocess.run([*ENVH, "experiment", str(_write(tmp_path, tiny(model=str(random_model)))), "--out", str(out)],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    for arm in ("static", "rigged", "curriculum"):  # one progress line per arm and step
        assert any(line.startswith(f"[{arm} seed 0] step 1/2") for line in lines)
        assert any(line.startswith(f"[{arm} seed 0] step 2/2") for line in lines)
        run = out / "arms" / arm / "seed-0"
        rows = [r for r in _rows(run / "metrics.jsonl") if "reward" in r]
        assert [r["step"] for r in rows] == [1, 2]
        assert all(r["episodes"] == 2 and 0.0 <= r["groups/nonzero_adv"] <= 1.0 for r in rows)
        # one group of two: its verdicts differ exactly when one of the two rollouts succeeded
        assert all(r["groups/success_signal"] == (1.0 if r["success"] == 0.5 else 0.0) for r in rows)
        for step in (1, 2):  # the held-out tasks, each once, on the plain benchmark
            evals = _rows(run / "eval" / f"step-{step}.jsonl")
            assert sorted(e["task"] for e in evals) == sorted(
                f"toy24/generated/{i}" for i in ("3,6,7", "1,2,11", "1,2,4,7", "2,2,4,7"))
        assert (run / "done.json").exists() and not (run / "checkpoints").exists()
    assert len(_rows(out / "baseline" / "eval" / "step-0.jsonl")) == 4
    # the rig ran on the training tasks only, and its pool is part of the result
    rig = json.loads((out / "rig" / "summary.json").read_text())
    assert rig["complete"] and rig["tasks"] == 2 and rig["rollouts"] > 0
    held = {"3,6,7", "1,2,11", "1,2,4,7", "2,2,4,7"}
    for entry in (out / "rig" / "pool" / "entries").glob("*.json"):
        assert json.loads(entry.read_text())["task"].rpartition("/")[2] not in held
    # the rigged arm trained on the accepted harnesses (or the plain task where none landed)
    trained = json.loads((out / "arms" / "rigged" / "seed-0" / "metrics.jsonl").read_text().splitlines()[0])
    assert trained["step"] == 1
    # the curriculum's decisions were logged, and it never drew a held-out task
    audit = _rows(out / "arms" / "curriculum" / "seed-0" / "curriculum.jsonl")
    groups = [r for r in audit if r["type"] == "group"]
    assert len(groups) == 2 and all(g["task"].rpartition("/")[2] not in held for g in groups)
    # the report is built from these files
    report = (out / "report.md").read_text()
    for png in ("heldout_success.png", "train_reward.png", "nonzero_adv.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "rigged" in report and "static" in report and "curriculum" in report
    summary = json.loads(lines[-1])
    for arm in ("static", "rigged", "curriculum"):
        evals = _rows(out / "arms" / arm / "seed-0" / "eval" / "step-2.jsonl")
        assert summary["final"][arm]["n"] == 4
        assert summary["final"][arm]["rate"] == pytest.approx(sum(e["success"] for e in evals) / 4)
    # a second run into the same folder is refused without --resume; with it, nothing is redone
    again = subprocess.run([*ENVH, "experiment", str(tmp_path / "exp.yaml"), "--out", str(out)],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode != 0 and "--resume" in again.stderr + again.stdout
    # a changed rig design runs again only what it changed: the rig and the rigged arm
    data = tiny(model=str(random_model))
    data["arms"][1]["rig"]["target"] = "sr:0.1-0.4"
    second = tmp_path / "run2"
    redo = subprocess.run([*ENVH, "experiment", str(_write(tmp_path, data)), "--out", str(second), "--reuse", str(out)],
                          capture_output=True, text=True, timeout=1200)
    assert redo.returncode == 0, redo.stdout[-3000:] + redo.stderr[-3000:]
    assert "[rig] starting" in redo.stdout and "[rigged seed 0] step 2/2" in redo.stdout
    for kept in ("static", "curriculum"):
        assert f"[{kept} seed 0] step" not in redo.stdout
        assert (second / "arms" / kept / "seed-0" / "eval" / "step-2.jsonl").read_bytes() == \
            (out / "arms" / kept / "seed-0" / "eval" / "step-2.jsonl").read_bytes()
    assert "[baseline]" not in redo.stdout.replace("[reuse] baseline", "")
    meta = json.loads((second / "experiment.json").read_text())
    assert sorted(meta["reused"]) == ["baseline", "curriculum/seed-0", "static/seed-0"]
    assert "## Reused results" in (second / "report.md").read_text()


def test_a_killed_experiment_resumes_where_it_stopped(tmp_path, random_model):
    # five steps: killed after the first's checkpoint, in one of the next four (a step of the
    # small model, its held-out episodes and checkpoint take about a second idle: four of them
    # are the margin against the poll below); the checkpoints kept (the last one is then
    # written too)
    data = tiny(arms=[{"name": "static", "kind": "static"}], keep_checkpoints=True, model=str(random_model))
    data["train"]["steps"] = 5
    path = _write(tmp_path, data)
    out = tmp_path / "run"
    run = out / "arms" / "static" / "seed-0"
    proc = subprocess.Popen([*ENVH, "experiment", str(path), "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 900
        while not (run / "checkpoints" / "latest").exists() or not (run / "eval" / "step-1.jsonl").exists():
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)  # mid-run: step 1 saved, a later step under way
    finally:
        proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()
    killed_at = (run / "checkpoints" / "latest").read_text()
    assert not (run / "done.json").exists(), f"the run ended before the kill (latest: {killed_at})"
    # the changed file is refused; the same file resumes
    changed = _write(tmp_path, {**data, "eval_seed": 99})
    refused = subprocess.run([*ENVH, "experiment", str(changed), "--out", str(out), "--resume"],
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "another experiment file" in refused.stderr + refused.stdout
    path = _write(tmp_path, data)
    resumed = subprocess.run([*ENVH, "experiment", str(path), "--out", str(out), "--resume"],
                             capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "[static seed 0] resuming at step" in resumed.stdout
    assert "[static seed 0] step 1/5" not in resumed.stdout  # step 1 was not trained again
    assert "[static seed 0] step 5/5" in resumed.stdout, f"latest at the kill: {killed_at}"
    steps = [r["step"] for r in _rows(run / "metrics.jsonl") if "reward" in r]
    assert steps == [1, 2, 3, 4, 5]  # no row twice, none lost
    assert (run / "done.json").exists() and (out / "report.md").exists()
    assert (run / "checkpoints" / "latest").read_text() == "step-5"
