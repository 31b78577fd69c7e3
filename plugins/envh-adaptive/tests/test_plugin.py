"""The plugin as envh sees it: loaded through its installed entry point like any third-party
plugin, its two kinds (the curriculum training-only), its command, and a cheap import."""

from __future__ import annotations

import json
import subprocess
import sys

import envh
import envh_adaptive.hooks
from click.testing import CliRunner


def test_the_entry_point_contributes_both_kinds_and_marks_the_curriculum_training_only() -> None:
    reg = envh.make_plugin_manager()
    assert reg.failures == [], [str(f) for f in reg.failures]
    kinds = reg.component_kinds()
    providers = reg.providers("envh_component_kinds")
    assert {providers[k].distribution for k in ("curriculum", "workspace")} == {"envh-adaptive"}
    assert kinds["curriculum"].training_only and not kinds["workspace"].training_only
    core = envh.make_plugin_manager(entry_points=False).component_kinds()
    assert "curriculum" not in core and "workspace" not in core  # core alone ships neither


def test_envh_plugins_lists_the_kinds_and_the_workspace_command() -> None:
    def envh_cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", *args],
                              capture_output=True, text=True, timeout=120)

    listed = envh_cli("plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    assert {"curriculum", "workspace"} <= set(report["component_kinds"]) and report["failures"] == []
    assert {"name": "adaptive", "distribution": "envh-adaptive", "version": envh_adaptive.__version__} in \
        report["plugins"]
    helped = envh_cli("workspace", "consolidate", "--help")
    assert helped.returncode == 0 and "LIBRARY" in helped.stdout, helped.stderr


def test_the_command_comes_through_the_hook() -> None:
    import click

    group = click.Group("envh")
    envh.make_plugin_manager(entry_points=False, plugins=[envh_adaptive.hooks]).register_commands(group)
    result = CliRunner().invoke(group, ["workspace", "--help"])
    assert result.exit_code == 0 and "consolidate" in result.output


def test_importing_the_hooks_and_listing_the_kinds_stays_cheap() -> None:
    code = ("import sys, envh; envh.make_plugin_manager().component_kinds(); "
            "print(','.join(m for m in ('envh_adaptive.curriculum', 'envh_adaptive.experience', "
            "'envh_adaptive.components.workspace', 'envh_adaptive.coach', 'openai') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "", f"imported at plugin load: {out.stdout.strip()}"
