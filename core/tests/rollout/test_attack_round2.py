"""Attacks on the runner and ``envh run --resume`` (round 2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .test_cli import SPEC, envh, run_args


@pytest.fixture
def cli_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).parent), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "120"
    return env


def test_resume_refuses_an_openai_endpoint_changed_through_the_environment(tmp_path, cli_env):
    """Without ``base_url`` the OpenAI SDK takes ``$OPENAI_BASE_URL``: another server (another
    model behind the same name) is another configuration."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    base = ["--split", "easy", "--tasks", "1", "--policy", "openai:replay-model", "--executor", "inline",
            "--policy-option", "retries=0", "--policy-option", "timeout=2", "--max-endpoint-failures", "1"]
    env = {**cli_env, "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}  # nothing listens
    first = envh(*run_args(spec, out, *base), env=env, check=False)
    assert "differs" not in first.stderr and (out / "trajectories.sqlite").exists(), first.stderr
    same = envh(*run_args(spec, out, *base, "--resume", "--retry", "failed"), env=env, check=False)
    assert "differs" not in same.stderr, same.stderr
    moved = envh(*run_args(spec, out, *base, "--resume", "--retry", "failed"),
                 env={**env, "OPENAI_BASE_URL": "http://127.0.0.1:10/v1"}, check=False)
    assert moved.returncode == 2 and "OPENAI_BASE_URL" in moved.stderr, moved.stderr
