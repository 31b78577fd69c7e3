"""The publishable path: every package builds a wheel that installs into a clean venv
from the wheel files alone, and ``envh plugins`` there loads every plugin without a
failure (``nox -s wheels``). Slow (a fresh venv and every dependency from pip's cache)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheels_install_into_a_clean_venv_and_every_plugin_loads() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVH_", "VIRTUAL_ENV"))}
    proc = subprocess.run([sys.executable, "-m", "nox", "-s", "wheels"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1500)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    for plugin in sorted(p.name for p in ROOT.glob("plugins/*") if (p / "pyproject.toml").exists()):
        assert plugin in out, f"{plugin} missing from `envh plugins` in the clean venv"
    assert "Failed to load plugin" not in out
