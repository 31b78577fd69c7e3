"""``envh run`` / ``show`` / ``export`` as real processes, including ``kill -9`` of a
whole run and ``--resume``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from envh.rollout.store import TrajectoryStore

HERE = Path(__file__).parent
SPEC = "bridge: toy24\nlayers:\n  - kind: budget\n    max_steps: 10\n"


@pytest.fixture
def cli_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "120"
    return env


def envh(*args, env, check=True, **kw):
    proc = subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", *args], env=env,
                          capture_output=True, text=True, timeout=120, **kw)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_run_show_and_export(tmp_path, cli_env):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    proc = envh("run", str(spec), "--split", "medium", "--tasks", "4", "--policy", "solver", "-k", "2",
                "--workers", "2", "--out", str(out), "--plugin", "rollout_policies", env=cli_env)
    assert "1.000 [0.676, 1.000]" in proc.stdout  # 8/8 with its Wilson 95% interval
    assert "errors: infra_error" in proc.stdout
    shown = json.loads(envh("show", str(out), "--json", env=cli_env).stdout)
    assert shown[0]["episodes"] == 8 and shown[0]["planned"] == 8 and shown[0]["successes"] == 8
    assert shown[0]["manifest"]["config"]["policy"] == "solver"
    assert "per task" in envh("show", str(out), env=cli_env).stdout

    envh("export", str(out), "--format", "parquet", env=cli_env)
    import pyarrow.parquet as pq

    table = pq.read_table(out / "trajectories.parquet")
    assert table.num_rows == 8 and set(table.column("success").to_pylist()) == {True}
    assert json.loads(table.column("trajectory")[0].as_py())["spec_id"] == table.column("spec_id")[0].as_py()

    envh("export", str(out), "--format", "messages", "--system", "Play 24.", env=cli_env)
    lines = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(lines) == 8
    messages = lines[0]["messages"]
    assert [m["role"] for m in messages[:4]] == ["system", "user", "assistant", "tool"]
    call = messages[2]["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "combine"
    assert set(call["function"]["arguments"]) == {"i", "j", "op"}
    assert messages[3]["tool_call_id"] == call["id"] and messages[-2]["tool_calls"][0]["function"]["name"] == "stop"
    assert lines[0]["tools"][0]["function"]["name"] == "combine" and lines[0]["success"] is True

    again = envh("run", str(spec), "--split", "medium", "--tasks", "4", "--policy", "solver", "-k", "2",
                 "--out", str(out), "--plugin", "rollout_policies", env=cli_env, check=False)
    assert again.returncode == 2 and "--resume" in again.stderr


def test_kill_9_of_the_whole_run_then_resume(tmp_path, cli_env):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    args = ["run", str(spec), "--split", "generated", "--tasks", "20", "--policy", "sleepy", "-k", "2",
            "--policy-option", "seconds=0.15", "--workers", "2", "--out", str(out), "--plugin", "rollout_policies"]
    proc = subprocess.Popen([sys.executable, "-c", "from envh.cli import main; main()", *args], env=cli_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = out / "trajectories.sqlite"
    deadline = time.monotonic() + 60
    before = []
    while time.monotonic() < deadline:
        if db.exists():
            with TrajectoryStore(out) as store:
                before = store.rows()
            if len(before) >= 6:
                break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with TrajectoryStore(out) as store:
        before = store.rows()
    assert 6 <= len(before) < 40, "the run should have been killed mid-way"

    envh(*args, "--resume", env=cli_env)
    with TrajectoryStore(out) as store:
        rows = store.rows()
        (run_id,) = store.runs()
    keys = [r["key"] for r in rows]
    assert len(keys) == 40 and len(set(keys)) == 40  # every episode once: no duplicates, none lost
    assert {r["run_id"] for r in rows} == {run_id}
    assert [r["seq"] for r in rows[:len(before)]] == [r["seq"] for r in before]  # earlier rows kept
    assert all(r["error_class"] is None for r in rows)
