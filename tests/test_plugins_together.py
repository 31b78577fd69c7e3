"""Every package in the repository installed together: all plugins load through their
entry points, none fails, and their names do not clash."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import envh

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))


def entry_points(plugin: Path) -> set[str]:
    meta = tomllib.loads((plugin / "pyproject.toml").read_text())
    return set(meta["project"].get("entry-points", {}).get("envh", {}))


def test_every_repository_plugin_loads_through_its_entry_point() -> None:
    registry = envh.make_plugin_manager()
    assert registry.failures == [], [str(f) for f in registry.failures]
    loaded = {p.name for p in registry.loaded}
    for plugin in PLUGINS:
        assert entry_points(plugin) <= loaded, f"{plugin.name} is not installed or not loaded"


def test_contributions_from_all_plugins_coexist() -> None:
    registry = envh.make_plugin_manager()
    bridges = registry.bridges()
    assert {"toy24", "alfworld", "swebench"} <= set(bridges)
    assert {"stage", "contract", "chain", "budget"} <= set(registry.component_kinds())
    assert {"inline", "pool"} <= set(registry.executors())
    assert "template" in registry.designers()


def test_cli_lists_everything_without_failures() -> None:
    out = subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", "plugins", "--json"],
                         capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["failures"] == []
    assert {"alfworld", "swebench", "toy24"} <= set(report["bridges"])


def test_importing_envh_and_plugin_hooks_stays_cheap() -> None:
    code = ("import sys, envh; envh.make_plugin_manager().bridges(); "
            "heavy = [m for m in ('torch', 'docker', 'playwright', 'ray', 'transformers', 'alfworld', "
            "'textworld', 'swebench') if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"heavy modules imported at plugin load: {out.stdout.strip()}"
