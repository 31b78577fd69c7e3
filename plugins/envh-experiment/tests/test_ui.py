"""``envh ui`` shows an experiment folder's report and plots (built by the report module
from a run's files)."""

from __future__ import annotations

import json
from pathlib import Path

from envh_experiment.report import build_report
from envh_ui.app import COOKIE, create_app  # the ui extra is installed by setup: missing fails, never skips
from starlette.testclient import TestClient

TOKEN = "t0ken-for-the-experiment-page"


def _folder(root: Path) -> Path:
    (root / "arms" / "static" / "seed-0" / "eval").mkdir(parents=True)
    (root / "experiment.json").write_text(json.dumps({
        "name": "shown", "config": {"name": "shown"}, "config_hash": "abc", "fixed_at": "2026-12-04T00:00:00+00:00",
        "machine": {"cpus": 2, "platform": "linux", "load_start": [1.0, 1.0, 1.0]}, "arms": ["static"], "seeds": [0],
        "baseline_arm": "static", "compare": []}))
    (root / "heldout.json").write_text(json.dumps({"tasks": [{"id": "toy24/generated/3,6,7", "class": "size3"}]}))
    run = root / "arms" / "static" / "seed-0"
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 0.5, "success": 0.0, "episodes": 2,
                                                   "gen_tokens": 9, "policy_tokens": 9, "time/step_s": 1.0,
                                                   "groups/nonzero_adv": 1.0, "groups/n": 1}) + "\n")
    (run / "eval" / "step-1.jsonl").write_text(json.dumps({"task": "toy24/generated/3,6,7", "success": True,
                                                           "score": 1.0, "steps": 3}) + "\n")
    build_report(root)
    return root


def test_the_ui_shows_the_experiment_report_and_its_plots(tmp_path):
    root = _folder(tmp_path / "exp")
    c = TestClient(create_app([root], token=TOKEN), base_url="http://127.0.0.1:8765")
    c.cookies.set(COOKIE, TOKEN)
    home = c.get("/")
    assert home.status_code == 200 and "Experiment report" in home.text
    page = c.get("/rig/0")
    assert page.status_code == 200 and "Experiment report" in page.text and "shown" in page.text
    for png in ("heldout_success.png", "train_reward.png", "nonzero_adv.png"):
        assert f"/file/0/{png}" in page.text
        image = c.get(f"/file/0/{png}")
        assert image.status_code == 200 and image.content[:4] == b"\x89PNG"
