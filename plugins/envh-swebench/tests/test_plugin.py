"""The plugin is found through its entry point and stays cheap to import."""

from __future__ import annotations

import subprocess
import sys

from envh import make_plugin_manager


def test_bridge_is_registered_through_the_entry_point():
    info = make_plugin_manager().bridge("swebench")
    assert info.factory == "envh_swebench.bridge:SWEBenchEnv"
    from envh_swebench.bridge import SWEBenchEnv

    assert info.load() is SWEBenchEnv and SWEBenchEnv.name == "swebench"


def test_importing_the_hooks_does_not_load_docker_or_swebench():
    code = ("import sys, envh_swebench.hooks\n"
            "heavy = [m for m in ('docker', 'swebench', 'datasets') if m in sys.modules]\n"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
