"""The experiment report on hand-built result folders: numbers recomputed here, plots, partial runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from envh.rollout import wilson
from envh_experiment.report import build_report, markdown_table, summary
from experiment_files import tiny
from scipy import stats

TASKS = [("3,4,8", "size3"), ("1,5,9", "size3"), ("2,2,6", "size3"),
         ("1,2,3,4", "size4"), ("2,3,5,7", "size4"), ("1,1,8,8", "size4")]
BASELINE = [0, 0, 1, 0, 0, 0]  # the untrained model's shared step-0 outcomes
PNG = b"\x89PNG\r\n\x1a\n"


def _write_jsonl(path: Path, rows: list[dict], tail: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)


def _eval_rows(oks: list[int]) -> list[dict]:
    return [{"task": t, "success": bool(ok), "score": float(ok), "steps": 3} for (t, _), ok in zip(TASKS, oks)]


def _train(step: int, reward: float, nonzero: float, episodes: int = 8) -> dict:
    return {"step": step, "reward": reward, "success": reward, "episodes": episodes, "gen_tokens": 100 * episodes,
            "policy_tokens": 120 * episodes, "time/step_s": 2.0, "groups/nonzero_adv": nonzero, "groups/n": 4,
            "reward_std": 0.4}


def _experiment(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    config = {"name": "toy24-rig", "arms": {"static": {}, "rigged": {"rig": "rig.yaml"}}, "steps": 4, "eval_every": 2}
    (root / "experiment.json").write_text(json.dumps({
        "name": "toy24-rig", "config": config, "config_hash": "abc123", "fixed_at": "2025-01-02T03:04:05Z",
        "machine": {"cpus": 16, "platform": "linux", "load_start": [0.5, 0.4, 0.3]}, "arms": ["static", "rigged"],
        "seeds": [1, 2], "baseline_arm": "static", "compare": [["rigged", "static"]]}))
    (root / "heldout.json").write_text(json.dumps({"tasks": [{"id": t, "class": c} for t, c in TASKS]}))


def _run(root: Path, arm: str, seed: int, evals: dict[int, list[int]], train: list[dict], *,
         done: bool = True, tail: str = "") -> None:
    folder = root / "arms" / arm / f"seed-{seed}"
    for step, oks in evals.items():
        _write_jsonl(folder / "eval" / f"step-{step}.jsonl", _eval_rows(oks))
    eval_rows = [{"step": s, "eval/success": sum(o) / len(o), "eval/episodes": len(o)} for s, o in evals.items()]
    _write_jsonl(folder / "metrics.jsonl", train + eval_rows, tail)
    if done:
        (folder / "done.json").write_text(json.dumps({"wall_s": 30.0, "steps": 4, "episodes": 32, "gen_tokens": 1}))


def _steady(reward: float) -> list[dict]:
    return [_train(s, reward, 0.5) for s in range(1, 5)]


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """2 arms x 2 seeds; static/seed-1 logs step 2 twice; rigged/seed-2 was killed during eval step 4."""
    root = tmp_path / "mixed"
    _experiment(root)
    _write_jsonl(root / "baseline/eval/step-0.jsonl", _eval_rows(BASELINE))
    duplicated = [_train(1, 0.1, 0.2), _train(2, 0.9, 0.9, episodes=99), _train(2, 0.3, 0.5), _train(3, 0.4, 0.6),
                  _train(4, 0.5, 0.7)]
    _run(root, "static", 1, {0: [1, 0, 0, 0, 0, 0], 2: [0, 1, 0, 0, 0, 1], 4: [1, 1, 0, 0, 0, 1]}, duplicated)
    _run(root, "static", 2, {2: [0, 0, 0, 0, 1, 0], 4: [1, 0, 0, 1, 1, 0]}, _steady(0.2))
    _run(root, "rigged", 1, {2: [1, 1, 0, 0, 0, 1], 4: [1, 1, 0, 0, 0, 0]}, _steady(0.6))
    _run(root, "rigged", 2, {2: [1, 0, 1, 0, 1, 0]}, [_train(s, 0.5, 0.8) for s in (1, 2, 3)], done=False,
         tail='{"step": 4, "rew')
    # killed during its step-4 eval: two of six held-out episodes written
    _write_jsonl(root / "arms/rigged/seed-2/eval/step-4.jsonl", _eval_rows([1, 1]))
    (root / "rig").mkdir()
    (root / "rig/summary.json").write_text(json.dumps({"seconds": 100.0, "rollouts": 40, "tokens": 5000,
                                                       "accepted": 2, "tasks": 3, "stops": {}}))
    return root


def _interval(xs: list[int], ys: list[int]) -> tuple[float, float, float]:
    """Newcombe's method 10 from its published form, written apart from the module's."""
    cells = list(zip(xs, ys, strict=True))
    a, b, c, n = cells.count((1, 1)), cells.count((1, 0)), cells.count((0, 1)), len(cells)
    d = n - a - b - c
    p1, p2 = (a + b) / n, (a + c) / n
    (l1, u1), (l2, u2) = wilson(a + b, n), wilson(a + c, n)
    den = ((a + b) * (c + d) * (a + c) * (b + d)) ** 0.5
    phi = (a * d - b * c) / den if den else 0.0
    delta = ((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2) ** 0.5
    eps = ((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2) ** 0.5
    return p1 - p2, p1 - p2 - delta, p1 - p2 + eps


def test_summary_numbers_match_a_hand_computation(mixed: Path) -> None:
    s = summary(mixed)
    json.dumps(s, allow_nan=False)  # plain data for the CLI's one-line JSON
    assert s["heldout"] == {"tasks": 6, "classes": {"size3": 3, "size4": 3}}

    static_final = [1, 1, 0, 0, 0, 1] + [1, 0, 0, 1, 1, 0]
    rigged_final = [1, 1, 0, 0, 0, 0] + [1, 0, 1, 0, 1, 0]  # seed 2 ended at eval step 2
    for arm, oks in (("static", static_final), ("rigged", rigged_final)):
        fin = s["final"][arm]
        assert (fin["successes"], fin["n"]) == (sum(oks), 12)
        # the interval is over the 6 distinct tasks (each task's mean over the two seeds), not 12 outcomes
        assert fin["tasks"] == 6 and fin["rate"] == pytest.approx(sum(oks) / 12)
        assert (fin["low"], fin["high"]) == pytest.approx(wilson(sum(oks) / 2, 6))
        size4 = oks[3:6] + oks[9:12]
        assert fin["by_class"]["size4"]["successes"] == sum(size4)
        assert fin["by_class"]["size4"]["rate"] == pytest.approx(sum(size4) / 6)
    assert s["final"]["rigged"]["final_steps"] == {"1": 4, "2": 2}
    assert s["runs"]["rigged"]["2"]["partial_eval_steps"] == [4]
    assert s["runs"]["static"]["2"]["rate"] == pytest.approx(3 / 6)

    (c,) = s["compare"]
    # seed 1 pairs at step 4, seed 2 at step 2, the largest step both its runs have:
    # rigged seed 1 at step 4 and seed 2 at step 2, against static at the same steps
    rig_pairs, static_pairs = [1, 1, 0, 0, 0, 0] + [1, 0, 1, 0, 1, 0], [1, 1, 0, 0, 0, 1] + [0, 0, 0, 0, 1, 0]
    mean, low, high = _interval(rig_pairs, static_pairs)
    assert (c["a"], c["b"], c["pairs"], c["steps"]) == ("rigged", "static", 12, {"1": 4, "2": 2})
    assert (c["mean"], c["low"], c["high"]) == pytest.approx((mean, low, high))
    assert c["seed_means"] == pytest.approx({"1": -1 / 6, "2": 2 / 6})
    for cls, idx in (("size3", [0, 1, 2, 6, 7, 8]), ("size4", [3, 4, 5, 9, 10, 11])):
        expected = _interval([rig_pairs[i] for i in idx], [static_pairs[i] for i in idx])
        assert (c["by_class"][cls]["mean"], c["by_class"][cls]["low"]) == pytest.approx(expected[:2])
    assert c["meets_target"] is False

    # held-out curve at step 0: static/seed-1's own file, the shared baseline elsewhere
    step0 = s["curves"]["static"]["heldout"][0]
    assert (step0["step"], step0["successes"], step0["n"]) == (0, 2, 12)
    assert (step0["low"], step0["high"]) == pytest.approx(wilson(2, 12))
    assert s["curves"]["rigged"]["heldout"][0]["seeds"] == {"1": 1 / 6, "2": 1 / 6}
    # both rigged seeds read the one shared baseline: its 6 episodes count once, not twice
    assert s["curves"]["rigged"]["heldout"][0]["n"] == 6


def test_a_duplicated_step_uses_its_last_row(mixed: Path) -> None:
    s = summary(mixed)
    point = next(p for p in s["curves"]["static"]["train_reward"] if p["step"] == 2)
    assert point["seeds"] == {"1": 0.3, "2": 0.2}
    low, high = stats.t.interval(0.95, 1, loc=0.25, scale=stats.sem([0.3, 0.2]))
    assert (point["mean"], point["low"], point["high"]) == pytest.approx((0.25, low, high))
    nonzero = next(p for p in s["curves"]["static"]["nonzero_adv"] if p["step"] == 2)
    assert nonzero["seeds"]["1"] == 0.5
    cost = s["cost"]["static"]["seeds"]["1"]
    assert (cost["steps"], cost["episodes"], cost["gen_tokens"], cost["step_s"]) == (4, 32, 3200, 8.0)
    assert s["cost"]["static"]["total"]["episodes"] == 64
    # the killed run: three steps, no wall time, its half-written last line skipped
    assert s["cost"]["rigged"]["seeds"]["2"] == {"steps": 3, "episodes": 24, "gen_tokens": 2400,
                                                  "policy_tokens": 2880, "step_s": 6.0, "wall_s": None,
                                                  "distinct_tasks": None}
    assert (s["cost"]["static"]["total"]["wall_s"], s["cost"]["rigged"]["total"]["wall_s"]) == (60.0, None)
    assert s["rig_included"]["episodes"] == 32 + 24 + 40
    assert s["rig_included"]["step_s"] == pytest.approx(14.0 + 100.0)


def test_report_plots_and_incomplete_runs(mixed: Path) -> None:
    path = build_report(mixed)
    text = path.read_text()
    assert path == mixed / "report.md"
    for name in ("heldout_success.png", "train_reward.png", "nonzero_adv.png"):
        data = (mixed / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000
        assert f"]({name})" in text
    assert "rigged/seed-2: incomplete" in text and "rigged/seed-2: eval step 4 lacks" in text
    assert "rigged: runs ended at different eval steps" in text
    # unfinished runs decide nothing, whatever the numbers say
    assert "cannot yet be judged against the target" in text and "provisional" in text
    assert summary(mixed)["compare"][0]["decided"] is False
    assert "paired at different eval steps (seed 1 at step 4, seed 2 at step 2)" in text
    assert "abc123" in text and "2025-01-02T03:04:05Z" in text and "3 size3, 3 size4" in text
    assert "rigged incl. rig" in text and "Newcombe" in text
    assert "```yaml\nname: toy24-rig\narms:\n  static: {}\n" in text
    table = markdown_table(summary(mixed))
    assert table in text
    assert table.splitlines()[2].startswith("| static | 4 | 0.50 (3/6) | 0.50 (3/6) | 0.50 [")


def test_a_clear_win_meets_the_target(tmp_path: Path) -> None:
    root = tmp_path / "win"
    _experiment(root)
    _run(root, "static", 1, {0: BASELINE, 4: [0, 0, 1, 0, 0, 0]}, _steady(0.1))
    _run(root, "static", 2, {0: BASELINE, 4: [0, 0, 0, 0, 0, 1]}, _steady(0.1))
    _run(root, "rigged", 1, {0: BASELINE, 4: [1, 1, 1, 1, 1, 0]}, _steady(0.8))
    _run(root, "rigged", 2, {0: BASELINE, 4: [1, 1, 1, 1, 0, 1]}, _steady(0.8))
    (c,) = summary(root)["compare"]
    mean, low, _ = _interval([1, 1, 1, 1, 1, 0] + [1, 1, 1, 1, 0, 1], [0, 0, 1, 0, 0, 0] + [0, 0, 0, 0, 0, 1])
    assert (c["mean"], c["low"]) == pytest.approx((mean, low)) and low > 0
    assert c["meets_target"] is True
    text = build_report(root).read_text()
    assert "meets the target" in text and "does not meet" not in text and "provisional" not in text


def test_a_folder_with_only_its_declaration_still_reports(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    _experiment(root)
    s = summary(root)
    assert s["compare"][0]["pairs"] == 0 and s["final"]["static"]["n"] == 0
    text = build_report(root).read_text()
    assert "static/seed-1: missing" in text and "undecided" in text and "meets the target" not in text
    assert "| rigged − static | all | 0 |" in text
    for name in ("heldout_success.png", "train_reward.png", "nonzero_adv.png"):
        assert (root / name).read_bytes().startswith(PNG)


def test_an_empty_folder_does_not_crash(tmp_path: Path) -> None:
    s = summary(tmp_path)
    assert s["arms"] == [] and s["verdict"] == "No arms to compare."
    assert build_report(tmp_path).is_file()


def test_the_paired_interval_covers_at_its_stated_rate_and_never_collapses() -> None:
    """95 % coverage, simulated (correlated pairs, n = 96), and an honest width when every
    pair agrees: 0 of 96 in both arms still allows a difference of a few points."""
    import random

    from envh_experiment.report import newcombe_paired

    rng = random.Random(7)
    for p_a, p_b in ((0.3, 0.2), (0.05, 0.05), (0.5, 0.35)):
        covered = 0
        for _ in range(2000):
            pairs = []
            for _ in range(96):
                u = rng.random()  # a shared draw correlates the two arms on a task
                pairs.append((u < p_a, (u if rng.random() < 0.5 else rng.random()) < p_b))
            r = newcombe_paired(pairs)
            covered += r["low"] <= p_a - p_b <= r["high"]
        assert 0.93 <= covered / 2000 <= 0.99, (p_a, p_b, covered)
    zero = newcombe_paired([(False, False)] * 96)
    assert zero["mean"] == 0 and zero["low"] == pytest.approx(-wilson(0, 96)[1]) and zero["high"] > 0.03


def _two_seed_case(root: Path, rigged: dict[int, list[int]], static: dict[int, list[int]]) -> dict:
    _experiment(root)
    for seed in (1, 2):
        _run(root, "static", seed, {0: BASELINE, 4: static[seed]}, _steady(0.1))
        _run(root, "rigged", seed, {0: BASELINE, 4: rigged[seed]}, _steady(0.5))
    (c,) = summary(root)["compare"]
    return c


def test_one_lucky_seed_does_not_meet_the_target(tmp_path: Path) -> None:
    """Seed 1 wins all 6, seed 2 changes nothing: the pooled interval is above 0 and the
    mean above 10 points, but seed 2's own interval is not: one lucky run is not a win."""
    c = _two_seed_case(tmp_path / "luck", {1: [1, 1, 1, 1, 1, 1], 2: [0, 0, 0, 0, 0, 0]},
                       {1: [0, 0, 0, 0, 0, 0], 2: [0, 0, 0, 0, 0, 0]})
    assert c["decided"] and c["mean"] >= 0.1 and c["low"] > 0
    assert c["seed_lows"]["2"] < 0 and c["meets_target"] is False


def test_each_condition_of_the_rule_is_needed() -> None:
    """The rule with one condition removed would decide these the other way."""
    from envh_experiment.report import meets_target

    base = {"mean": 0.3, "low": 0.1, "seed_lows": {"1": 0.05, "2": 0.02}, "pairs": 96}
    assert meets_target(base, 2)
    assert not meets_target({**base, "mean": 0.09}, 2)  # under 10 points
    assert not meets_target({**base, "low": 0.0}, 2)  # pooled interval touches 0
    assert not meets_target({**base, "seed_lows": {"1": 0.05, "2": -0.01}}, 2)  # one seed's does
    assert not meets_target({**base, "seed_lows": {"1": 0.05}}, 2)  # a seed unpaired


def test_run_keys_change_exactly_with_what_made_each_result():
    from envh_experiment.config import from_data, run_keys

    base = run_keys(from_data(tiny()))
    assert set(base) == {"baseline", "rig", "static/seed-0", "rigged/seed-0", "curriculum/seed-0"}
    rig = tiny()
    rig["arms"][1]["rig"]["target"] = "sr:0.1-0.4"
    changed = {k for k, v in run_keys(from_data(rig)).items() if base[k] != v}
    assert changed == {"rig", "rigged/seed-0"}
    lr = tiny(train={**tiny()["train"], "optim": {"lr": 2e-5}})
    assert {k for k, v in run_keys(from_data(lr)).items() if base[k] != v} == set(base) - {"rig"}
    held = tiny(heldout={"split": "generated", "classes": {"size3": ["3,6,7"]}})
    assert all(base[k] != v for k, v in run_keys(from_data(held)).items())  # every result evaluates on it
    more = run_keys(from_data(tiny(seeds=[0, 1])))
    assert all(more[k] == v for k, v in base.items()) and "static/seed-1" in more
    renamed = tiny()
    renamed["description"] = "words"
    assert run_keys(from_data(renamed)) == base
