"""The training page in Chromium on envh-grpo metrics: small multiples with the step on the
x axis, smoothing, hover values, reward terms stacked, held-out evaluation curves, several
runs overlaid (an ``envh experiment`` folder), rounded values, a bounded table, no
horizontal overflow, and an empty folder that says what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from envh_ui.app import create_app
from envh_ui.reader import RunDirs

TOKEN = "tr41n-t0k3n"
#: steps as envh-grpo logs them: a resumed run logs on from a checkpoint, so not 0..n-1
STEPS = [1, 2, 5, 10, 20]


def _row(step: int, shift: float) -> dict[str, object]:
    """A row with the keys envh-grpo's trainer writes (a real run's, values changed)."""
    invalid, diversity, solved = -0.5 + step / 50, 0.125 - step / 400, shift + step / 40
    return {"clip_fraction": 0.0, "episodes": 8, "gen_tokens": 584 + step, "gen_tokens_per_s": 13.58476567644205,
            "grad_norm": 3.367788076400757 / step, "groups/n": 2, "groups/nonzero_adv": 1.0,
            "groups/success_signal": 0.0, "kl": 0.001 * step, "loss": 0.002818578388541937, "lr": 1e-05,
            "policy_loss": 0.002818586636487763, "policy_tokens": 584, "reward": invalid + diversity + solved,
            "reward/div_weight": 0.5, "reward/diversity": diversity, "reward/efficiency": 0.0,
            "reward/invalid": invalid, "reward/solved": solved, "reward/spam": 0.0,
            "reward_std": 0.0968245836551854, "rollout/lost_episodes": 0, "rollout/workers": 0, "step": step,
            "success": solved, "time/rollout_s": 42.99619250299975, "time/step_s": 169.97587716099997,
            "time/sync_s": 3.1740000849822536e-06, "time/update_s": 126.97968148400014, "turns": 5.0, "updates": 1.0}


def _run(folder: Path, shift: float) -> Path:
    (folder / "eval").mkdir(parents=True)
    rows = [{"eval/episodes": 4.0, "eval/score": 0.0, "eval/steps": 5.0, "eval/success": 0.0, "step": 0}]
    rows += [_row(s, shift) for s in STEPS]
    rows.append({"eval/episodes": 4.0, "eval/score": 0.5, "eval/steps": 4.0, "eval/success": 0.5, "step": 20})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    for step, wins in ((0, 0), (10, 1), (20, 3)):
        (folder / "eval" / f"step-{step}.jsonl").write_text("".join(
            json.dumps({"task": f"toy24/generated/{i}", "success": i < wins, "score": float(i < wins), "steps": 5})
            + "\n" for i in range(4)))
    return folder


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    base = tmp_path_factory.mktemp("training")
    grpo = _run(base / "grpo", 0.0)
    experiment = base / "experiment"
    for arm, shift in (("static", 0.0), ("rigged", 0.2)):
        _run(experiment / "arms" / arm / "seed-0", shift)
    (experiment / "experiment.json").write_text(json.dumps({"name": "two arms"}))
    empty = base / "empty"
    empty.mkdir()
    return [grpo, experiment, empty]


@pytest.fixture(scope="module")
def server(dirs, serve):
    with serve(create_app(dirs, token=TOKEN), named=True) as url:
        yield url


@pytest.fixture
def page(browser, server, watch):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(30_000)
    p = context.new_page()
    problems = watch(p)
    p.goto(f"{server}/?token={TOKEN}")
    yield p
    context.close()
    assert problems == []


def _series(page, key: str) -> list[dict]:
    return page.eval_on_selector_all(
        f".metric-chart[data-key='{key}'] .series",
        "els => els.map(e => ({run: e.dataset.run, x: JSON.parse(e.dataset.x), y: JSON.parse(e.dataset.y),"
        " points: (e.getAttribute('points') || '').trim().split(/\\s+/).map(p => Number(p.split(',')[0]))}))")


def _overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_charts_put_the_step_on_the_x_axis(page, server) -> None:
    page.goto(f"{server}/training/0")
    (reward,) = _series(page, "reward")
    assert reward["x"] == STEPS
    xs = reward["points"]  # drawn at the steps: 1 → 2 is a fifth of 5 → 10, not the same width
    assert abs((xs[3] - xs[2]) - 5 * (xs[1] - xs[0])) < 0.5
    (evaluated,) = _series(page, "eval/success")
    assert evaluated["x"] == [0, 20] and evaluated["y"] == [0.0, 0.5]
    (heldout,) = _series(page, "heldout/success")  # from eval/step-N.jsonl
    assert heldout["x"] == [0, 10, 20] and heldout["y"] == [0.0, 0.25, 0.75]
    # rounded: no value with a float's 16 digits anywhere on the page, the table included
    text = page.locator("main").inner_text()
    assert "13.58476567644205" not in text and "13.58" in text and "0.09682" in text
    assert "3.174e-06" in text


def test_reward_terms_are_stacked_without_the_weight(page, server) -> None:
    page.goto(f"{server}/training/0")
    stack = page.locator(".stack-chart")
    terms = stack.locator("polygon.term").evaluate_all("els => els.map(e => e.dataset.term)")
    assert set(terms) == {"reward/diversity", "reward/invalid", "reward/solved"}  # all-zero terms draw nothing
    assert "div_weight" not in stack.locator(".legend").inner_text()


def test_smoothing_and_hover_values(page, server) -> None:
    page.goto(f"{server}/training/0")
    line = page.locator(".metric-chart[data-key='grad_norm'] polyline.series")
    raw = line.get_attribute("points")
    page.locator("#smooth").fill("0.9")
    assert page.locator("#smooth-value").inner_text() == "0.90"
    assert line.get_attribute("points") != raw
    svg = page.locator(".metric-chart[data-key='grad_norm'] svg")
    box = svg.bounding_box()
    assert box is not None
    svg.hover(position={"x": box["width"] - 12, "y": box["height"] / 2})
    hover = page.locator(".metric-chart[data-key='grad_norm'] .hover")
    assert hover.get_attribute("data-step") == "20"
    assert hover.inner_text().startswith("step 20: 0.1684 (smoothed ")


def test_an_experiment_folder_overlays_its_runs(page, server) -> None:
    page.goto(f"{server}/")
    page.locator("a[href='/training/1']").click()
    assert [li.split(" (")[0].strip() for li in page.locator(".runs-legend li").all_inner_texts()] == [
        "arms/rigged/seed-0", "arms/static/seed-0"]
    runs = _series(page, "reward/solved")
    assert [r["run"] for r in runs] == ["0", "1"] and runs[0]["y"] != runs[1]["y"]
    assert all(r["x"] == STEPS for r in runs)
    assert page.locator(".stack-chart select.stack-run option").count() == 2
    page.locator(".stack-chart select.stack-run").select_option("1")
    assert page.locator(".stack-chart svg.stack[data-run='1']").is_visible()
    assert not page.locator(".stack-chart svg.stack[data-run='0']").is_visible()
    page.locator(".metric-chart[data-key='reward/solved'] svg").hover()
    assert "arms/rigged/seed-0: " in page.locator(".metric-chart[data-key='reward/solved'] .hover").inner_text()


@pytest.mark.parametrize("width", [1400, 1000])
def test_no_horizontal_overflow_and_a_bounded_table(page, server, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    for d in (0, 1, 2):
        page.goto(f"{server}/training/{d}")
        assert _overflow(page) <= 0, (d, width)
    page.goto(f"{server}/training/1")
    box = page.locator(".table-box").bounding_box()
    assert box is not None and box["height"] < 500 and page.locator("#metrics tr.metric").count() == 14
    chart = page.locator(".metric-chart").first.bounding_box()
    assert chart is not None and chart["width"] >= 280  # not squeezed into a 121 px box


def test_an_empty_folder_says_what_is_missing(page, server, dirs) -> None:
    page.goto(f"{server}/training/2")
    text = page.locator("#no-metrics").inner_text()
    assert "No training metrics in" in text and str(dirs[2]) in text and "metrics.jsonl" in text
    assert "envh-grpo" in text


def test_an_experiment_runs_step_0_is_its_baseline_and_links_out_are_skipped(tmp_path: Path) -> None:
    root = tmp_path / "exp"
    arm = root / "arms" / "static" / "seed-0"
    (arm / "eval").mkdir(parents=True)
    (arm / "metrics.jsonl").write_text(json.dumps({"step": 4, "reward": 0.5}) + "\n")
    (arm / "eval" / "step-4.jsonl").write_text(json.dumps({"task": "t", "success": True}) + "\n")
    (root / "baseline" / "eval").mkdir(parents=True)
    (root / "baseline" / "metrics.jsonl").write_text(json.dumps({"step": 0, "eval/success": 0.0}) + "\n")
    (root / "baseline" / "eval" / "step-0.jsonl").write_text(
        "".join(json.dumps({"task": t, "success": t == "a"}) + "\n" for t in "abcd"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "metrics.jsonl").write_text(json.dumps({"step": 1, "secret": 1}) + "\n")
    (root / "linked").symlink_to(outside)
    runs = {r.label: r for r in RunDirs([root]).metrics_runs(0)}
    assert set(runs) == {"arms/static/seed-0", "baseline"}  # the link to elsewhere is not read
    assert runs["arms/static/seed-0"].heldout == {0: 0.25, 4: 1.0}  # step 0: the shared untrained model
    assert runs["baseline"].heldout == {0: 0.25}
