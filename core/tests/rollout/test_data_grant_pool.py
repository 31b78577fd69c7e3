"""A data grant reaches the pool's fenced workers (``envh run --data``): a granted path a
spec names is the worker's own (a root-only file is read by the ``nobody`` worker), and a
spec that names a path outside it is refused before anything is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from envh.rollout.store import TrajectoryStore
from envh.rollout.trajectory import trajectory_to_data


def envh(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_granted_root_only_file_is_read_by_the_pools_worker(tmp_path: Path, cli_env: dict[str, str]) -> None:
    data = tmp_path / "private"
    data.mkdir(mode=0o700)
    (data / "questions.txt").write_text("GRANTED-QUESTION\n")
    (data / "questions.txt").chmod(0o600)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"bridge": "reader", "config": {"data": str(data / "questions.txt")}}))
    args = ["run", str(spec), "--policy", "random", "--max-steps", "1", "--workers", "1", "--plugin",
            "rollout_policies", "--isolation", "user"]
    refused = envh(*args, "--out", str(tmp_path / "refused"), env=cli_env)
    assert refused.returncode != 0 and "--data" in refused.stderr, refused.stderr[-2000:]
    assert not (tmp_path / "refused").exists()
    ok = envh(*args, "--out", str(tmp_path / "run"), "--data", str(data), env=cli_env)
    assert ok.returncode == 0, ok.stderr[-3000:]
    with TrajectoryStore(tmp_path / "run") as store:
        (trajectory,) = store.query()
    assert trajectory.error is None, trajectory.error
    assert "GRANTED-QUESTION" in json.dumps(trajectory_to_data(trajectory))
