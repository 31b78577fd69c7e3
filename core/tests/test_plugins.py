"""Plugin discovery against real ``*.dist-info`` directories written into tmp_path:
good plugins load, broken ones are reported and skipped, env vars filter, clashes name
both providers."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import envh
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


def test_a_plugin_returning_the_wrong_records_is_named(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "envh-fake-records", "1.0", "fake_records", BAD_RECORD)
    allow(monkeypatch, "envh-fake-records")
    with pytest.raises(PluginError, match="Plugin 'fake_records' returned 'toy24' from envh_bridges"):
        envh.make_plugin_manager().bridges()


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
