"""Host paths a spec names need the caller's grant (``envh.hostpaths``): a bridge's data
files and a layer's path options, the keys each declares in ``data_paths``, chain legs
included. A test plugin brings a bridge that reads the file its config names (``reader``)
and a kind whose option names a file it would write (``logger``), as a third party's would."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import attrs
import envh
import pytest
from click.testing import CliRunner
from envh import BridgeInfo, ComponentKind, EnvHarness, LayerSpec, errors, hookimpl
from envh.bridges.toy24 import Toy24Env
from envh.hostpaths import DATA_ENV, grants, host_paths, is_granted, spec_paths
from envh.plugins import set_registry
from envh.rollout.executors.base import as_played, declared_data
from envh.rollout.plan import build_plan
from envh.rollout.trajectory import EpisodeRequest, request_from_data, request_to_data


class ReaderEnv(Toy24Env):
    """Toy24 that reads its config's ``data`` file when built (what a bridge's loader does)."""

    def __init__(self, data: Any = None, extra: Any = None) -> None:
        super().__init__()
        self.read = Path(data).read_text() if isinstance(data, str) else None


@attrs.frozen(kw_only=True)
class LoggerSpec(LayerSpec):
    kind: Literal["logger"] = "logger"
    log: str | None = None


class Passing(EnvHarness):
    pass


def build(spec: Any, inner: Any, ctx: Any) -> Passing:
    return Passing(inner, layer_id=spec.id or f"{ctx.index}:logger")


class GrantPlugin:
    @hookimpl
    def envh_bridges(self) -> list[BridgeInfo]:
        return [BridgeInfo(name="reader", factory=ReaderEnv, data_paths=("{data}", "{extra}"),
                           description="reads the file its config names (test)")]

    @hookimpl
    def envh_component_kinds(self) -> list[ComponentKind]:
        return [ComponentKind(name="logger", spec_type=LoggerSpec, factory=build, data_paths=("rw:{log}",),
                              description="would write the file its `log` names (test)")]


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(DATA_ENV, "")  # recorded, so a grant a command makes is undone too
    reg = envh.make_plugin_manager(entry_points=False, plugins=[GrantPlugin()])
    set_registry(reg)
    yield reg
    set_registry(None)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    (tmp_path / "granted").mkdir()
    (tmp_path / "granted" / "questions.txt").write_text("a question\n")
    path = tmp_path / "secret.txt"
    path.write_text("TOP-SECRET-LINE\n")
    return path


def reader(path: Any, **config: Any) -> dict[str, Any]:
    return {"bridge": "reader", "config": {"data": path if isinstance(path, str | list | int) else str(path),
                                           **config}}


def test_a_spec_may_not_name_a_host_path_without_a_grant(registry: Any, secret: Path) -> None:
    with pytest.raises(errors.SpecError, match=r"\$\.config\.data is .*secret\.txt.*bridge 'reader'.*--data") as info:
        envh.make(reader(secret))
    assert "TOP-SECRET-LINE" not in str(info.value)


def test_a_granted_path_and_what_is_under_it_may_be_named(registry: Any, secret: Path) -> None:
    granted = secret.parent / "granted"
    with envh.make(reader(granted / "questions.txt"), data=[granted]) as env:
        assert env.read == "a question\n"
    with envh.make(reader(secret), data=[secret]) as env:  # a file granted by itself
        assert env.read == "TOP-SECRET-LINE\n"
    with pytest.raises(errors.SpecError, match="host path"):
        envh.make(reader(secret), data=[granted])  # a sibling of the grant is not in it


def test_a_trusted_call_may_name_any_path_and_a_spec_cannot_trust_itself(registry: Any, secret: Path) -> None:
    with envh.make(reader(secret), trust="trusted") as env:
        assert env.read
    with pytest.raises(errors.SpecError, match="host path"):
        envh.make({**reader(secret), "trust": "trusted"})
    with pytest.raises(errors.SpecError, match="host path"):  # the spec's own mark lowers a trusted call
        envh.make({**reader(secret), "trust": "untrusted"}, trust="trusted")


@pytest.mark.parametrize("escape", [
    "{granted}/../secret.txt",  # a parent reference out of the grant
    "{granted}/link",  # a link inside the grant to a file outside it
    "{granted}x/secret.txt",  # a sibling whose name starts like the grant
    "secret.txt",  # relative: to the working directory, which is not granted
    "",  # the working directory itself
    "{tmp}/*.txt",  # a pattern: what it matches lies under its fixed part
])
def test_escapes_from_the_grant_are_refused(registry: Any, secret: Path, escape: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    granted = secret.parent / "granted"
    (granted / "link").symlink_to(secret)
    monkeypatch.chdir(secret.parent)
    path = escape.format(granted=granted, tmp=secret.parent)
    with pytest.raises(errors.SpecError, match="host path"):
        envh.make(reader(path), data=[granted])


@pytest.mark.parametrize("value", [["{ok}", "{secret}"], 0, {"path": "{secret}"}])
def test_a_declared_key_that_is_not_one_path_string_is_checked_item_by_item_or_refused(
        registry: Any, secret: Path, value: Any) -> None:
    granted = str(secret.parent / "granted")

    def fill(v: Any) -> Any:
        if isinstance(v, list):
            return [fill(x) for x in v]
        if isinstance(v, dict):
            return {k: fill(x) for k, x in v.items()}
        return v.format(ok=f"{granted}/questions.txt", secret=secret) if isinstance(v, str) else v

    with pytest.raises(errors.SpecError, match="host path|must be a path"):
        envh.make({"bridge": "reader", "config": {"extra": fill(value)}}, data=[granted])


def test_layer_options_and_chain_legs_are_held_to_the_grant(registry: Any, secret: Path) -> None:
    granted = secret.parent / "granted"
    logged = {"bridge": "toy24", "layers": [{"kind": "logger", "log": str(secret.parent / "log.jsonl")}]}
    with pytest.raises(errors.SpecError, match=r"\$\.layers\[0\]\.log"):
        envh.make(logged)
    envh.make({"bridge": "toy24", "layers": [{"kind": "logger", "log": str(granted / "log.jsonl")}]},
              data=[granted]).close()
    leg = {"bridge": "toy24", "layers": [{"kind": "chain", "legs": [reader(secret)]}]}
    assert host_paths(leg) == ["$.layers[0].legs[0].config.data"]
    with pytest.raises(errors.SpecError, match="host path"):
        envh.make(leg)
    with pytest.raises(errors.SpecError, match=r"\$\.layers\[0\]\.legs\[0\]\.config\.data"):  # before any play
        build_plan(leg, policy="random", tasks=[None], registry=registry)
    assert [w for w, _, _ in spec_paths(logged)] == ["$.layers[0].log"]


def test_the_environment_variable_grants_for_every_command(registry: Any, secret: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_ENV, os.pathsep.join(["/nonexistent", str(secret)]))
    with envh.make(reader(secret)) as env:
        assert env.read
    assert is_granted(str(secret), grants()) and not is_granted(str(secret.parent), grants())


def test_a_plan_carries_its_grant_to_the_workers_and_refuses_early(registry: Any, secret: Path) -> None:
    with pytest.raises(errors.SpecError, match="host path"):
        build_plan(reader(secret), policy="random", tasks=[None], registry=registry)
    (request,) = build_plan(reader(secret), policy="random", tasks=[None], registry=registry, data=[secret])
    assert request.data == (str(secret.resolve()),)
    assert request_from_data(request_to_data(request)) == request
    bare = EpisodeRequest(key="k", spec={"bridge": "toy24"}, spec_id="s", policy="random")
    assert "data" not in request_to_data(bare)  # records without a grant stay as they were


def test_a_process_grant_reaches_requests_planned_before_it(registry: Any, secret: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    request = EpisodeRequest(key="k", spec=reader(secret), spec_id="s", policy="random")
    assert as_played(request, None) is request
    monkeypatch.setenv(DATA_ENV, str(secret))
    assert as_played(request, None).data == (str(secret.resolve()),)


def test_config_paths_are_a_workers_own_only_where_granted_or_trusted(registry: Any, tmp_path: Path) -> None:
    data = tmp_path / "root-only"
    data.mkdir(mode=0o700)
    spec = reader(data)

    def own(**fields: Any) -> list[bool]:
        request = EpisodeRequest(key="k", spec=spec, spec_id="s", policy="random", **fields)
        paths, _ = declared_data([request], registry)
        return [o for p, _, o in paths if p == str(data.resolve())]

    assert own() == [False]
    assert own(data=(str(data),)) == [True]
    assert own(data=(str(tmp_path / "other"),)) == [False]
    assert own(trust="trusted") == [True]
    spec = {**spec, "trust": "untrusted"}
    assert own(trust="trusted") == [False]


def test_the_commands_take_data(registry: Any, secret: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--data`` grants for the whole process and the processes it starts (it sets
    ``ENVH_DATA``); the pool's workers: ``rollout/test_data_grant_pool.py``."""
    import yaml
    from envh.cli import cli
    from envh.rollout.cli import register

    register(cli)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(reader(secret)))
    refused = CliRunner().invoke(cli, ["spec", "check", str(path), "--no-reset"])
    assert refused.exit_code != 0 and "--data" in refused.output and "TOP-SECRET" not in refused.output
    ok = CliRunner().invoke(cli, ["spec", "check", str(path), "--no-reset", "--data", str(secret)])
    assert ok.exit_code == 0, ok.output
    assert os.environ[DATA_ENV] == str(secret.resolve())
    monkeypatch.setenv(DATA_ENV, "")
    run = CliRunner().invoke(cli, ["run", str(path), "--policy", "random", "--executor", "inline", "--max-steps",
                                   "2", "--out", str(tmp_path / "run")])
    assert run.exit_code != 0 and "host path" in run.output and not (tmp_path / "run").exists()
    run = CliRunner().invoke(cli, ["run", str(path), "--policy", "random", "--executor", "inline", "--max-steps",
                                   "2", "--out", str(tmp_path / "run"), "--data", str(secret)])
    assert run.exit_code == 0, run.output
