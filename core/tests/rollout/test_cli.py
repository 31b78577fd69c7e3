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
                 "--workers", "2", "--out", str(out), "--plugin", "rollout_policies", env=cli_env, check=False)
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


def run_args(spec, out, *extra):
    return ["run", str(spec), "--out", str(out), "--plugin", "rollout_policies", "--plugin", "hostile", *extra]


@pytest.mark.parametrize("bad, message", [
    (["--policy", "randmo"], "Unknown policy 'randmo'. Choose one of:"),
    (["--policy", "solver", "--executor", "poool"], "Unknown executor 'poool'. Choose one of:"),
    (["--policy", "solver", "--task", "nosuchtask", "--split", "easy"], "Unknown task 'nosuchtask'"),
    (["--policy", "hostile:build"], "this policy cannot be built"),
    (["--policy", "hostile:build", "--executor", "inline"], "this policy cannot be built"),
    (["--policy", "solver", "--policy-option", "nokey"], "expected KEY=VALUE"),
    (["--policy", "solver", "-k", "0"], "'-k'"),
    (["--policy", "human", "--executor", "pool"], "plays inline"),
    (["--policy", "solver", "--retry", "failed"], "--retry needs --resume"),
    (["--policy", "solver", "--resume"], "holds no run to resume"),
    (["--policy", "solver", "--workers", "-1"], "--workers"),
    (["--policy", "solver", "--memory-mb", "-5"], "--memory-mb"),
    (["--policy", "solver", "--timeout", "0"], "--timeout"),
    (["--policy", "solver", "--plugin", "no_such_plugin_module"], "Cannot load plugin module 'no_such_plugin_module'"),
])
def test_bad_commands_fail_before_anything_is_written(tmp_path, cli_env, bad, message):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    proc = envh(*run_args(spec, out, *bad), env=cli_env, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert not out.exists(), "a refused command leaves nothing behind"


def test_a_policy_that_cannot_be_built_in_the_worker_names_its_cause(tmp_path, cli_env):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    missing = tmp_path / "no-such-script.json"
    proc = envh(*run_args(spec, tmp_path / "run", "--policy", f"scripted:{missing}"), env=cli_env, check=False)
    assert proc.returncode == 2 and "cannot be built" in proc.stderr and "no-such-script.json" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_resume_refuses_a_different_configuration_and_lists_it(tmp_path, cli_env):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    base = ["--split", "easy", "--tasks", "2", "--policy", "solver", "--workers", "1", "--executor", "inline"]
    envh(*run_args(spec, out, *base, "--policy-option", "temperature=0.0"), env=cli_env)
    with TrajectoryStore(out) as store:
        before = store.rows(kind=None)
        manifest = store.manifest(store.runs()[0])
    config = manifest["config"]
    assert config["policy_options"] == {"temperature": 0.0} and config["executor"] == "inline"
    assert config["seed"] == 0 and config["max_steps"] == 100 and config["k"] == 1
    assert manifest["versions"]["envh"] and config["spec"]["bridge"] == "toy24"
    changed = envh(*run_args(spec, out, *base, "--policy-option", "temperature=0.7", "--seed", "3",
                             "--max-steps", "7", "--resume"), env=cli_env, check=False)
    assert changed.returncode == 2
    for line in ("policy_options.temperature: 0.0 → 0.7", "seed: 0 → 3", "max_steps: 100 → 7"):
        assert line in changed.stderr, changed.stderr
    with TrajectoryStore(out) as store:
        assert store.rows(kind=None) == before
    # the same command resumes (nothing left to play); --workers is not part of the identity
    same = envh(*run_args(spec, out, *base[:-4], "--workers", "2", "--executor", "inline",
                          "--policy-option", "temperature=0.0", "--resume"), env=cli_env)
    assert "1.000" in same.stdout


def test_a_run_whose_every_episode_failed_exits_non_zero(tmp_path, cli_env):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    proc = envh(*run_args(spec, tmp_path / "run", "--split", "easy", "--tasks", "3", "--policy",
                          "hostile:systemexit@0", "--executor", "inline"), env=cli_env, check=False)
    assert proc.returncode == 2 and "Every episode (3) failed the same way: 3 policy_error" in proc.stderr
    with TrajectoryStore(tmp_path / "run") as store:
        (row, *_) = list(store.query())
    assert row.error_type == "SystemExit" and "Traceback" in row.error_traceback


def test_an_endpoint_outage_stops_the_run_and_retry_failed_finishes_it(tmp_path, cli_env, shared_dir):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    outage = shared_dir / "endpoint-down"
    outage.write_text("down")
    args = run_args(spec, out, "--split", "medium", "--tasks", "8", "--policy", f"flaky:{outage}", "--workers", "1",
                    "--max-endpoint-failures", "3")
    proc = envh(*args, env=cli_env, check=False)
    assert proc.returncode == 2 and "3 consecutive episodes failed on the model endpoint" in proc.stderr
    assert "--resume --retry failed" in proc.stderr
    with TrajectoryStore(out) as store:
        rows = store.rows()
    assert len(rows) == 3 and all(r["error_class"] == "policy_error" and r["retryable"] for r in rows)

    outage.unlink()  # the endpoint is back
    no_retry = envh(*args, "--resume", env=cli_env)  # plays only the missing keys
    with TrajectoryStore(out) as store:
        assert len(store.rows()) == 8 and sum(1 for r in store.rows() if r["error_class"]) == 3
    envh(*args, "--resume", "--retry", "failed", env=cli_env)
    with TrajectoryStore(out) as store:
        latest, everything = store.rows(), store.rows(kind=None)
        retried = [t for t in store.query() if t.retry]
    assert "1.000" not in no_retry.stdout
    assert len(latest) == 8 and all(r["error_class"] is None and r["success"] for r in latest)
    assert len(everything) == 11  # the three failed rows stay, superseded
    assert len(retried) == 3 and {t.retry for t in retried} == {1} and all(t.success for t in retried)
    shown = json.loads(envh("show", str(out), "--json", env=cli_env).stdout)
    assert shown[0]["episodes"] == 8 and shown[0]["successes"] == 8


def test_export_to_a_missing_directory_is_a_clear_error(tmp_path, cli_env):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    envh(*run_args(spec, out, "--split", "easy", "--tasks", "1", "--policy", "solver", "--executor", "inline"),
         env=cli_env)
    proc = envh("export", str(out), "--format", "messages", "-o", str(tmp_path / "nowhere" / "x.jsonl"),
                env=cli_env, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "nowhere" in proc.stderr


def test_human_plays_inline_at_the_terminal(tmp_path, cli_env):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    proc = envh(*run_args(spec, out, "--split", "easy", "--task", "2,3,4", "--policy", "human"), env=cli_env,
                input="combine 0 1 mul\ncombine 0 1 mul\nstop\n")
    assert "Target: 24" in proc.stdout  # the prompt reached the person, not a workers.log
    with TrajectoryStore(out) as store:
        (t,) = list(store.query())
        manifest = store.manifest(store.runs()[0])
    assert t.success and len(t.steps) == 3 and manifest["config"]["executor"] == "inline"
    assert not (out / "workers.log").exists()


def test_a_private_input_the_policy_declares_reaches_the_nobody_workers(tmp_path, cli_env):
    """``scripted:FILE`` declares its file (``PolicyInfo.data_paths``): the workers get it,
    read-only and readable as theirs, though it lies in root's private temporary directory."""
    if os.geteuid() != 0:
        pytest.skip("workers run as nobody only under root")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    script = tmp_path / "script.json"  # pytest's temporary directories are private to root
    script.write_text('["stop()"]')
    script.chmod(0o600)
    proc = envh(*run_args(spec, tmp_path / "run", "--policy", f"scripted:{script}"), env=cli_env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]  # played: stop() fails the task, not the run
    assert "Permission denied" not in proc.stdout + proc.stderr


def test_two_commands_never_play_into_one_run_directory(tmp_path, cli_env):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    args = run_args(spec, out, "--split", "easy", "--tasks", "4", "--policy", "sleepy:1", "--executor", "inline")
    first = subprocess.Popen([sys.executable, "-c", "from envh.cli import main; main()", *args], env=cli_env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (out / "trajectories.sqlite").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        second = envh(*args, "--resume", env=cli_env, check=False)
        assert second.returncode == 2 and "in use by another envh run (pid" in second.stderr, second.stderr
    finally:
        assert first.wait(timeout=60) == 0
    with TrajectoryStore(out) as store:
        assert len(store.runs()) == 1 and len(store.rows()) == 4


@pytest.mark.parametrize("executor", ["pool", "inline"])
def test_an_env_that_cannot_be_built_fails_the_command_before_the_first_episode(tmp_path, cli_env, executor):
    spec = tmp_path / "spec.yaml"
    spec.write_text("bridge: hostile\nconfig: {mode: exception, where: init}\n")
    proc = envh(*run_args(spec, tmp_path / "run", "--policy", "solver", "--executor", executor), env=cli_env,
                check=False)
    assert proc.returncode == 2 and "The env cannot be built" in proc.stderr and "plain failure" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_resume_refuses_a_spec_file_edited_in_place(tmp_path, cli_env):
    """Same path, other content: the spec is part of the run's identity, not its file name."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    base = ["--split", "easy", "--tasks", "2", "--policy", "solver", "--executor", "inline"]
    envh(*run_args(spec, out, *base), env=cli_env)
    spec.write_text(SPEC.replace("max_steps: 10", "max_steps: 3"))
    edited = envh(*run_args(spec, out, *base, "--resume"), env=cli_env, check=False)
    assert edited.returncode == 2 and "max_steps" in edited.stderr, edited.stderr


def test_resume_refuses_a_scripted_file_edited_in_place(tmp_path, cli_env):
    """``scripted:FILE`` with other content is another policy under the same name."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool": "stop"}]))
    script.chmod(0o644)
    tmp_path.chmod(0o755)
    out = tmp_path / "run"
    base = ["--split", "easy", "--tasks", "2", "--policy", f"scripted:{script}", "--executor", "inline"]
    envh(*run_args(spec, out, *base), env=cli_env)
    envh(*run_args(spec, out, *base, "--resume"), env=cli_env)  # unchanged: resumes
    script.write_text(json.dumps(["combine(0, 1, add)", {"tool": "stop"}]))
    edited = envh(*run_args(spec, out, *base, "--resume"), env=cli_env, check=False)
    assert edited.returncode == 2 and "policy_file_sha256" in edited.stderr, edited.stderr
