"""Plugin discovery against real ``*.dist-info`` directories written into tmp_path:
good plugins load, broken ones are reported and skipped, env vars filter, clashes name
both providers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import envh
import pytest
from envh.errors import PluginConflictError, PluginError, UnknownNameError

GOOD = '''
import envh

@envh.hookimpl
def envh_bridges():
    return [envh.BridgeInfo(name="fakebridge", factory="envh.bridges.toy24:Toy24Env",
                            description="Toy24 under another name")]
'''
BROKEN_IMPORT = "raise ImportError('needs libfoo.so')\n"
BROKEN_HOOK = '''
import envh

@envh.hookimpl
def envh_bridges():
    raise RuntimeError("hook exploded")
'''
CLASH = '''
import envh

@envh.hookimpl
def envh_bridges():
    return [envh.BridgeInfo(name="toy24", factory="envh.bridges.toy24:Toy24Env")]
'''
RAISING_SIDE_HOOKS = '''
import envh

@envh.hookimpl
def envh_register_commands(cli):
    raise RuntimeError("no commands today")

@envh.hookimpl
def envh_configure_converter(converter):
    raise KeyError("converter")
'''
BAD_RECORD = '''
import envh

@envh.hookimpl
def envh_bridges():
    return ["toy24"]
'''


def install(site: Path, dist: str, version: str, module: str, source: str, ep_name: str | None = None) -> None:
    """Write ``module.py`` and a real ``dist-info`` with an ``envh`` entry point."""
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[envh]\n{ep_name or module} = {module}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("ENVH_DISABLE_PLUGINS", raising=False)
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("fake_"):
            del sys.modules[name]


def allow(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Isolate tests from whatever else is installed in the environment."""
    monkeypatch.setenv("ENVH_PLUGINS", ",".join(names))


def test_a_good_plugin_loads_through_its_entry_point(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "envh-fake-good", "1.2.3", "fake_good", GOOD)
    allow(monkeypatch, "envh-fake-good")
    reg = envh.make_plugin_manager()
    assert "fakebridge" in reg.bridges() and "toy24" in reg.bridges()
    loaded = {p.name: p for p in reg.loaded}
    assert loaded["fake_good"].distribution == "envh-fake-good" and loaded["fake_good"].version == "1.2.3"
    with envh.make({"bridge": "fakebridge"}, registry=reg) as env:
        assert env.reset().observation.text.startswith("Target: 24")
    assert reg.failures == []


def test_a_broken_plugin_is_reported_and_skipped(site: Path, monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    install(site, "envh-fake-good", "1.2.3", "fake_good", GOOD)
    install(site, "envh-fake-broken", "0.3.1", "fake_broken", BROKEN_IMPORT, ep_name="broken")
    allow(monkeypatch, "envh-fake-good", "broken")
    reg = envh.make_plugin_manager()
    assert "fakebridge" in reg.bridges()
    (failure,) = reg.failures
    assert str(failure) == ("Failed to load plugin envh-fake-broken 0.3.1 (entry point broken): "
                            "ImportError('needs libfoo.so')")
    assert "Failed to load plugin envh-fake-broken 0.3.1" in caplog.text


def test_a_raising_hook_is_reported_and_skipped(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "envh-fake-hook", "2.0", "fake_hook", BROKEN_HOOK)
    allow(monkeypatch, "envh-fake-hook")
    reg = envh.make_plugin_manager()
    assert sorted(reg.bridges()) == ["toy24"]
    (failure,) = reg.failures
    assert "envh-fake-hook 2.0" in str(failure) and "envh_bridges() raised RuntimeError('hook exploded')" in str(failure)


def test_allow_list_and_deny_list(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "envh-fake-good", "1.2.3", "fake_good", GOOD)
    install(site, "envh-fake-broken", "0.3.1", "fake_broken", BROKEN_IMPORT, ep_name="broken")
    allow(monkeypatch, "fake_good")  # by entry point name
    reg = envh.make_plugin_manager()
    assert "fakebridge" in reg.bridges() and reg.failures == []
    monkeypatch.setenv("ENVH_PLUGINS", "envh-fake-good, envh-fake-broken")
    monkeypatch.setenv("ENVH_DISABLE_PLUGINS", "envh-fake-broken")  # by distribution name
    reg = envh.make_plugin_manager()
    assert "fakebridge" in reg.bridges() and reg.failures == []
    monkeypatch.setenv("ENVH_DISABLE_PLUGINS", "fake_good,broken")
    reg = envh.make_plugin_manager()
    assert sorted(reg.bridges()) == ["toy24"] and reg.failures == []
    with pytest.raises(UnknownNameError, match="Unknown bridge 'fakebridge'. Choose one of: toy24"):
        reg.bridge("fakebridge")


def test_a_name_clash_names_both_providers(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "envh-fake-clash", "9.9", "fake_clash", CLASH)
    allow(monkeypatch, "envh-fake-clash")
    reg = envh.make_plugin_manager()
    with pytest.raises(PluginConflictError, match="BridgeInfo 'toy24' is provided by both") as info:
        reg.bridges()
    assert "envh (plugin 'envh')" in str(info.value)
    assert "envh-fake-clash (plugin 'fake_clash')" in str(info.value)
    assert "ENVH_DISABLE_PLUGINS" in str(info.value)


def test_a_plugin_returning_the_wrong_records_is_named_and_skipped(site: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "envh-fake-records", "1.0", "fake_records", BAD_RECORD)
    allow(monkeypatch, "envh-fake-records")
    reg = envh.make_plugin_manager()
    assert sorted(reg.bridges()) == ["toy24"]  # the good records still arrive
    (failure,) = reg.failures
    assert "envh-fake-records 1.0" in str(failure)
    assert "envh_bridges() returned 'toy24'; expected BridgeInfo records" in str(failure)


def test_raising_command_and_converter_hooks_are_isolated(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import click
    from envh.serialization import make_converter

    install(site, "envh-fake-cmds", "0.2", "fake_cmds", RAISING_SIDE_HOOKS)
    install(site, "envh-fake-good", "1.2.3", "fake_good", GOOD)
    allow(monkeypatch, "envh-fake-cmds", "envh-fake-good")
    reg = envh.make_plugin_manager()
    group = click.Group()
    reg.register_commands(group)
    reg.configure_converter(make_converter())
    assert [str(f).split(": ", 1)[1] for f in reg.failures] == [
        "envh_register_commands() raised RuntimeError('no commands today')",
        "envh_configure_converter() raised KeyError('converter')"]
    assert all("envh-fake-cmds 0.2" in str(f) for f in reg.failures)
    assert "fakebridge" in reg.bridges()  # the other plugin is untouched


def test_an_unknown_name_in_the_plugin_variables_is_a_failure(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "envh-fake-good", "1.2.3", "fake_good", GOOD)
    allow(monkeypatch, "fake_goood")
    monkeypatch.setenv("ENVH_DISABLE_PLUGINS", "nosuch")
    reg = envh.make_plugin_manager()
    messages = [str(f) for f in reg.failures]
    assert any("ENVH_PLUGINS names 'fake_goood'" in m and "fake_good" in m for m in messages)
    assert any("ENVH_DISABLE_PLUGINS names 'nosuch'" in m for m in messages)


def test_providers_name_the_distribution_and_version(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "envh-fake-good", "1.2.3", "fake_good", GOOD)
    allow(monkeypatch, "envh-fake-good")
    reg = envh.make_plugin_manager()
    providers = reg.providers("envh_bridges")
    assert (providers["fakebridge"].distribution, providers["fakebridge"].version) == ("envh-fake-good", "1.2.3")
    assert (providers["toy24"].distribution, providers["toy24"].version) == ("envh", envh.__version__)


def _envh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_envh_plugins_exits_1_on_a_failure_and_keeps_listing(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "envh-fake-cmds", "0.2", "fake_cmds", RAISING_SIDE_HOOKS)
    install(site, "envh-fake-good", "1.2.3", "fake_good", GOOD)
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "ENVH_PLUGINS": "envh-fake-good"}
    ok = _envh("plugins", "--json", env=env)
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert {"name": "fakebridge", "plugin": "fake_good", "distribution": "envh-fake-good",
            "version": "1.2.3"} in report["providers"]["bridges"]
    env["ENVH_PLUGINS"] = "envh-fake-good,envh-fake-cmds"
    bad = _envh("plugins", env=env)
    assert bad.returncode == 1
    assert "fakebridge" in bad.stdout and "no commands today" in bad.stdout
    env["ENVH_PLUGINS"] = "nosuch"
    typo = _envh("plugins", env=env)
    assert typo.returncode == 1 and "ENVH_PLUGINS names 'nosuch'" in typo.stdout


def test_invalid_contribution_names_are_rejected() -> None:
    with pytest.raises(PluginError, match="Invalid contribution name 'Toy 24'"):
        envh.BridgeInfo(name="Toy 24", factory="envh.bridges.toy24:Toy24Env")


def test_a_lazy_factory_that_cannot_import_is_a_plugin_error() -> None:
    info = envh.BridgeInfo(name="ghost", factory="envh_no_such_module:Env")
    with pytest.raises(PluginError, match="Cannot import 'envh_no_such_module:Env'"):
        info.load()


def test_registries_are_independent() -> None:
    a = envh.make_plugin_manager(entry_points=False)
    b = envh.make_plugin_manager(entry_points=False, builtins=False)
    assert "toy24" in a.bridges() and b.bridges() == {}


@pytest.mark.parametrize("value", [" ", ",", " , ,, "])
def test_a_plugin_variable_of_only_spaces_and_commas_is_a_failure(
        site: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    install(site, "envh-fake-good", "1.2.3", "fake_good", GOOD)
    monkeypatch.setenv("ENVH_PLUGINS", value)
    reg = envh.make_plugin_manager()
    assert "fakebridge" not in reg.bridges() and "toy24" in reg.bridges()
    assert any("names no plugin" in str(f) for f in reg.failures)
    monkeypatch.setenv("ENVH_PLUGINS", "")  # explicitly empty: built-ins only, no failure
    reg = envh.make_plugin_manager()
    assert "fakebridge" not in reg.bridges() and not any("names no plugin" in str(f) for f in reg.failures)


def test_a_hook_generator_raising_midway_contributes_nothing_and_is_reported(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "envh-fake-gen", "0.1", "fake_gen", '''
from envh import hookimpl
from envh.plugins.records import BridgeInfo


@hookimpl
def envh_bridges():
    yield BridgeInfo(name="halfbridge", factory="envh.bridges.toy24:Toy24Bridge")
    raise RuntimeError("broke after one")
''')
    install(site, "envh-fake-good", "1.2.3", "fake_good", GOOD)
    allow(monkeypatch, "envh-fake-gen", "envh-fake-good")
    reg = envh.make_plugin_manager()
    bridges = reg.bridges()
    assert "halfbridge" not in bridges and "fakebridge" in bridges and "toy24" in bridges
    assert any("envh-fake-gen 0.1" in str(f) and "broke after one" in str(f) for f in reg.failures)
