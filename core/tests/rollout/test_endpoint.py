"""A real OpenAI-compatible endpoint killed mid-run: the openai policy (the real SDK over
HTTP) fails with ``EndpointError``, the run stops after N consecutive endpoint failures
with a non-zero exit, and once the server is back ``--resume --retry failed`` re-plays
exactly those episodes, recording the retry."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from envh.rollout.store import TrajectoryStore
from envh.testing_llm import LLMReplayServer, _Handler, slow, tool_reply

SPEC = "bridge: toy24\n"


class PinnedServer(LLMReplayServer):
    """The replay server on a fixed port, so a restarted one is the same endpoint."""

    def __init__(self, port: int) -> None:
        super().__init__(keyed={"Target": slow(tool_reply("stop", {}), 0.4)})
        self.port = port

    def start(self) -> PinnedServer:
        handler = type("Handler", (_Handler,), {"replay": self})
        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_endpoint_killed_mid_run_then_retry_failed(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    args = [sys.executable, "-c", "from envh.cli import main; main()", "run", str(spec), "--out", str(out),
            "--split", "medium", "--tasks", "10", "--policy", "openai:replay-model", "--workers", "1",
            "--policy-option", f"base_url=http://127.0.0.1:{port}/v1", "--policy-option", "retries=0",
            "--policy-option", "timeout=3", "--max-endpoint-failures", "3", "--max-steps", "3"]
    server = PinnedServer(port).start()
    run = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if (out / "trajectories.sqlite").exists():
                with TrajectoryStore(out) as store:
                    if len(store.rows()) >= 2:
                        break
            time.sleep(0.1)
    finally:
        server.stop()  # the endpoint dies mid-run
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 2, stderr
    assert "3 consecutive episodes failed on the model endpoint" in stderr
    with TrajectoryStore(out) as store:
        rows = store.rows()
        failed = [t for t in store.query() if t.error_class]
    ok = [r for r in rows if not r["error_class"]]
    assert len(ok) >= 2 and len(failed) == 3 and len(rows) < 10  # it stopped instead of burning the plan
    assert all(t.error_type == "EndpointError" and t.retryable for t in failed)

    server = PinnedServer(port).start()  # the endpoint is back
    try:
        again = subprocess.run([*args, "--resume", "--retry", "failed"], env=env, capture_output=True, text=True,
                               timeout=120)
    finally:
        server.stop()
    assert again.returncode == 0, again.stderr
    with TrajectoryStore(out) as store:
        latest, everything = store.rows(), store.rows(kind=None)
        retried = {t.key: t for t in store.query() if t.retry}
    assert len(latest) == 10 and all(r["error_class"] is None for r in latest)
    assert set(retried) == {t.key for t in failed} and all(t.retry == 1 for t in retried.values())
    assert len(everything) == 13  # the failed rows stay, superseded by their retries
    assert Path(out / "run.lock").exists()


SERVER_CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
from test_endpoint import PinnedServer
PinnedServer(int(sys.argv[1])).start()
print("ready", flush=True)
while True:
    time.sleep(1)
"""


@pytest.mark.slow
def test_a_paused_endpoint_is_an_endpoint_failure_not_a_timeout(tmp_path):
    """The server is frozen (SIGSTOP): connections open, nothing answers, and the episode's
    time limit runs out while the policy waits. Those episodes are retryable endpoint
    failures: the run stops at --max-endpoint-failures instead of playing its whole plan,
    and once the server runs again --resume --retry failed re-plays them."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    args = [sys.executable, "-c", "from envh.cli import main; main()", "run", str(spec), "--out", str(out),
            "--split", "medium", "--tasks", "10", "--policy", "openai:replay-model", "--workers", "1",
            "--policy-option", f"base_url=http://127.0.0.1:{port}/v1", "--policy-option", "retries=0",
            "--policy-option", "timeout=60", "--timeout", "4", "--max-endpoint-failures", "2",
            "--max-steps", "3"]
    code = SERVER_CHILD.format(tests=str(Path(__file__).parent))
    server = subprocess.Popen([sys.executable, "-c", code, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        run = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if (out / "trajectories.sqlite").exists():
                with TrajectoryStore(out) as store:
                    if len(store.rows()) >= 2:
                        break
            time.sleep(0.1)
        else:
            pytest.fail("the run recorded no episode in 90 s")
        server.send_signal(signal.SIGSTOP)  # the endpoint hangs mid-run
        stdout, stderr = run.communicate(timeout=120)
        server.send_signal(signal.SIGCONT)
        assert run.returncode == 2, stderr
        assert "2 consecutive episodes failed on the model endpoint" in stderr
        with TrajectoryStore(out) as store:
            rows = store.rows()
            failed = [t for t in store.query() if t.error_class]
        assert len(rows) < 10, [r["error_class"] for r in rows]
        # the episode under way when the server froze may have waited less than half its limit on
        # the endpoint: that one is a timeout; every later one waited its whole limit
        stalled = [t for t in failed if t.error_type == "EndpointError"]
        assert len(stalled) == 2 and len(failed) - len(stalled) <= 1, [(t.error_class, t.error) for t in failed]
        assert all(t.error_class == "policy_error" and t.retryable for t in stalled)
        assert all("did not answer a request" in (t.error or "") and "4 s limit" in (t.error or "")
                   for t in stalled)

        again = subprocess.run([*args, "--resume", "--retry", "failed"], env=env, capture_output=True, text=True,
                               timeout=120)
        assert again.returncode == 0, again.stderr
        with TrajectoryStore(out) as store:
            latest = store.rows()
            retried = {t.key for t in store.query() if t.retry}
        timed_out = {t.key for t in failed} - {t.key for t in stalled}  # not re-played: not the endpoint's
        assert len(latest) == 10 and all(r["error_class"] is None for r in latest if r["key"] not in timed_out)
        assert retried == {t.key for t in stalled}
    finally:
        server.send_signal(signal.SIGCONT)
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()
