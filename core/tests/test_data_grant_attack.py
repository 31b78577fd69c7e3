"""Attacks on "host paths a spec names need the caller's grant" (``envh.hostpaths``).

Every test is an attack the feature holds (the first group were holes when found: a one-string
grant granted ``/``, an empty one the working directory, ``~`` and ``$VAR`` were expanded by
the bridge after the check, a pattern climbed out of its fixed part with ``..``, WebArena's
``storage_state`` reached outside ``auth_dir``, a layer's ``trust: untrusted`` did not lower
the check, a NUL raised ``ValueError``, a warm env outlived its process grant, a grant
resolving to ``/`` granted everything, and inline SWE-bench rows were refused as paths). The bridges below read
their paths the ways real plugins do: as written (``reader``), after ``expanduser`` and
``expandvars`` (``home``: envh-office's ``Path(data).expanduser()``, envh-alfworld's
``Path(os.path.expandvars(p)).expanduser()``), or as a glob (``globber``: envh-webarena's
``glob.glob(config_files)``). Every bridge records what it read in ``READ``.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any, Literal

import attrs
import envh
import pytest
from click.testing import CliRunner
from envh import BridgeInfo, ComponentKind, EnvHarness, EnvSpec, LayerSpec, errors, hookimpl
from envh.bridges.toy24 import Toy24Env
from envh.hostpaths import DATA_ENV, grant, grants, is_granted, refuse_host_paths, spec_paths
from envh.plugins import set_registry
from envh.rollout.executors.base import as_played, declared_data
from envh.rollout.plan import build_plan
from envh.rollout.trajectory import EpisodeRequest

SECRET = "TOP-SECRET-LINE"
READ: list[str] = []


def _record(path: str) -> str | None:
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    READ.append(text)
    return text


class Reader(Toy24Env):
    """Reads ``data`` as written."""

    def __init__(self, data: Any = None) -> None:
        super().__init__()
        self.read = _record(data) if isinstance(data, str) else None


class Home(Toy24Env):
    """Reads ``data`` as envh-alfworld does (``expandvars``, then ``expanduser``)."""

    def __init__(self, data: Any = None) -> None:
        super().__init__()
        self.read = _record(str(Path(os.path.expandvars(data)).expanduser())) if isinstance(data, str) else None


class Globber(Toy24Env):
    """Reads every file ``files`` matches, as envh-webarena's ``config_files``."""

    def __init__(self, files: Any = None) -> None:
        super().__init__()
        self.read = [_record(p) for p in sorted(glob.glob(files))] if isinstance(files, str) else []


@attrs.frozen(kw_only=True)
class NestSpec(LayerSpec):
    """A third party's kind that holds a whole spec under a key of its own (not ``legs``)."""

    kind: Literal["nest"] = "nest"
    inner: EnvSpec | None = None


def build_nest(spec: Any, inner: Any, ctx: Any) -> EnvHarness:
    if spec.inner is not None:
        ctx.make(spec.inner).close()
    return EnvHarness(inner, layer_id=spec.id or f"{ctx.index}:nest")


class AttackPlugin:
    @hookimpl
    def envh_bridges(self) -> list[BridgeInfo]:
        return [BridgeInfo(name="reader", factory=Reader, data_paths=("{data}",)),
                BridgeInfo(name="home", factory=Home, data_paths=("{data}",)),
                BridgeInfo(name="globber", factory=Globber, data_paths=("{files}",))]

    @hookimpl
    def envh_component_kinds(self) -> list[ComponentKind]:
        return [ComponentKind(name="nest", spec_type=NestSpec, factory=build_nest)]


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(DATA_ENV, "")
    READ.clear()
    reg = envh.make_plugin_manager(entry_points=False, plugins=[AttackPlugin()])
    set_registry(reg)
    yield reg
    set_registry(None)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``tmp/secret.txt`` (never granted) and ``tmp/granted/{questions.txt,sub/}``."""
    (tmp_path / "granted" / "sub").mkdir(parents=True)
    (tmp_path / "granted" / "questions.txt").write_text("a question\n")
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    return tmp_path


def spec(bridge: str, value: Any, key: str = "data") -> dict[str, Any]:
    return {"bridge": bridge, "config": {key: value}}


def refused(build: Any) -> bool:
    """Whether ``build()`` raised the grant's SpecError and nothing secret was read."""
    try:
        env = build()
    except errors.SpecError as exc:
        return "host path" in str(exc) and not any(SECRET in r for r in READ)
    except Exception:  # noqa: BLE001 - failing some other way after reading is still a read
        return not any(SECRET in r for r in READ)
    getattr(env, "close", lambda: None)()
    return False


# -- holes found by review, closed ------------------------------------------------------------

def test_data_given_as_one_string_grants_that_path_not_the_root(registry: Any, tree: Path) -> None:
    assert refused(lambda: envh.make(spec("reader", str(tree / "secret.txt")), data=str(tree / "granted")))


def test_a_request_whose_data_is_one_string_is_not_granted_the_root(registry: Any, tree: Path) -> None:
    private = tree / "private"
    private.mkdir(mode=0o700)
    request = EpisodeRequest(key="k", spec=spec("reader", str(private)), spec_id="s", policy="random",
                             data=str(tree / "granted"))  # type: ignore[arg-type]
    assert "/" not in as_played(request, None).data
    paths, _ = declared_data([request], registry)
    assert [own for p, _, own in paths if p == str(private.resolve())] == [False]


def test_an_empty_grant_grants_nothing(registry: Any, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree)
    assert refused(lambda: envh.make(spec("reader", str(tree / "secret.txt")), data=[""]))
    READ.clear()
    with pytest.raises(errors.SpecError, match="names a host path"):
        grant("")
    assert refused(lambda: envh.make(spec("reader", "secret.txt")))


def test_is_granted_with_an_empty_grant_matches_nothing(registry: Any, tmp_path: Path) -> None:
    assert not is_granted("/etc/shadow", ("",))
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    request = EpisodeRequest(key="k", spec=spec("reader", str(private)), spec_id="s", policy="random", data=("",))
    paths, _ = declared_data([request], registry)
    assert [own for p, _, own in paths if p == str(private.resolve())] == [False]


def test_a_tilde_path_is_not_granted_through_the_working_directory(registry: Any, tree: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tree))
    monkeypatch.chdir(tree / "granted")
    assert refused(lambda: envh.make(spec("home", "~/secret.txt"), data=["."]))


def test_a_variable_in_a_path_cannot_climb_out_of_the_grant(registry: Any, tree: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVH_ATTACK_EMPTY", "")
    granted = tree / "granted"
    assert refused(lambda: envh.make(spec("home", f"{granted}/$ENVH_ATTACK_EMPTY/../secret.txt"), data=[granted]))


def test_a_pattern_cannot_climb_out_of_its_fixed_part(registry: Any, tree: Path) -> None:
    granted = tree / "granted"
    assert refused(lambda: envh.make(spec("globber", f"{granted}/*/../../secret.txt", "files"), data=[granted]))


def test_a_layer_marked_untrusted_lowers_the_host_path_check(registry: Any, tree: Path) -> None:
    marked = {**spec("reader", str(tree / "secret.txt")),
              "layers": [{"kind": "contract", "trust": "untrusted", "cls": "os:getcwd"}]}
    assert refused(lambda: envh.make(marked, trust="trusted"))


def test_a_nul_in_a_path_is_a_spec_error(registry: Any, tree: Path) -> None:
    with pytest.raises(errors.SpecError):
        envh.make(spec("reader", f"{tree}/granted/a\0b"), data=[tree / "granted"])


def test_a_warm_env_is_not_reused_after_its_process_grant_is_withdrawn(registry: Any, tree: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from envh.rollout.warm import Warm

    warm = Warm(registry)
    try:
        monkeypatch.setenv(DATA_ENV, str(tree / "secret.txt"))
        warm.env("sid", spec("reader", str(tree / "secret.txt")))
        monkeypatch.setenv(DATA_ENV, "")
        with pytest.raises(errors.SpecError, match="host path"):
            warm.env("sid", spec("reader", str(tree / "secret.txt")))
    finally:
        warm.close()


def test_a_grant_that_resolves_to_the_root_is_refused(registry: Any, tree: Path) -> None:
    (tree / "granted" / "data").symlink_to("/")
    assert refused(lambda: envh.make(spec("reader", str(tree / "secret.txt")), data=[tree / "granted" / "data"]))


@pytest.mark.parametrize("state", ["/root/.bashrc", "../../../root/.bashrc"])
def test_webarena_inline_storage_state_is_held_to_the_grant(tmp_path: Path, state: str) -> None:
    """The login writes a task's ``storage_state``: it must be a path inside ``auth_dir`` (which
    the grant covers), not an absolute one or one that climbs out with ``..``."""
    pytest.importorskip("envh_webarena")
    auth = tmp_path / "auth"
    auth.mkdir()
    data = {"bridge": "webarena", "config": {"auth_dir": str(auth), "tasks": [
        {"task_id": 1, "require_login": True, "storage_state": state, "sites": ["gitlab"], "start_url": "about:blank",
         "intent": "x", "eval": {"eval_types": ["string_match"], "reference_answers": {"exact_match": "x"}}}]}}
    with pytest.raises(errors.SpecError, match="storage_state: a path relative to auth_dir"):
        envh.make(data, data=[auth]).close()


@pytest.mark.parametrize("instances", [[{"instance_id": "a__b-1", "repo": "a/b"}]])
def test_swebench_instances_that_are_not_paths_are_not_refused(tmp_path: Path, instances: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("envh_swebench")
    from envh.plugins import get_registry

    monkeypatch.chdir(tmp_path)
    refuse_host_paths({"bridge": "swebench", "config": {"instances": instances}}, get_registry(), "untrusted",
                      [str(tmp_path / "granted")])


# -- held -------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [
    "{tmp}//secret.txt", "{tmp}/./secret.txt", "{granted}//../secret.txt", "{granted}/./../secret.txt",
    "{granted}/sub/../../secret.txt", "{granted}/../granted/../secret.txt", "{tmp}/secret.txt/",
    "{granted}/../GRANTED/../secret.txt",
])
def test_path_spellings_are_resolved_before_the_check(registry: Any, tree: Path, value: str) -> None:
    value = value.format(tmp=tree, granted=tree / "granted")
    assert refused(lambda: envh.make(spec("reader", value), data=[tree / "granted"]))


@pytest.mark.parametrize("grant_as", ["{granted}/", "{granted}//", "{granted}/.", "{granted}/sub/..",
                                      "{tmp}//granted"])
def test_grant_spellings_grant_the_same_directory_only(registry: Any, tree: Path, grant_as: str) -> None:
    granted = grant_as.format(granted=tree / "granted", tmp=tree)
    with envh.make(spec("reader", str(tree / "granted" / "questions.txt")), data=[granted]) as env:
        assert env.read == "a question\n"
    (tree / "grantedx").mkdir()
    (tree / "grantedx" / "s.txt").write_text(SECRET)
    assert refused(lambda: envh.make(spec("reader", str(tree / "grantedx" / "s.txt")), data=[granted]))


def test_a_symlinked_grant_is_the_directory_it_points_to_not_its_siblings(registry: Any, tree: Path) -> None:
    (tree / "alias").symlink_to(tree / "granted")
    with envh.make(spec("reader", str(tree / "alias" / "questions.txt")), data=[tree / "granted"]) as env:
        assert env.read
    assert refused(lambda: envh.make(spec("reader", str(tree / "alias" / "../secret.txt")), data=[tree / "alias"]))


@pytest.mark.parametrize("value", [b"/etc/passwd", Path("/etc/passwd"), ["/etc/passwd"], [["/etc/passwd"]],
                                   ("/etc/passwd",), {"/etc/passwd"}, 1.5, True, {"path": "/etc/passwd"}])
def test_values_that_are_not_path_strings_are_refused(registry: Any, tree: Path, value: Any) -> None:
    with pytest.raises(errors.SpecError):
        envh.make(spec("reader", value), data=[tree / "granted"])


def test_yaml_aliases_merge_keys_and_binary_values_are_checked(registry: Any, tree: Path) -> None:
    secret = tree / "secret.txt"
    texts = [
        f"bridge: toy24\nx: &c {{data: {secret}}}\n",  # an unknown key: refused as a spec error anyway
        f"bridge: toy24\nlayers:\n- kind: chain\n  legs:\n  - {{bridge: reader, config: &c {{data: {secret}}}}}\n"
        f"  - {{bridge: reader, config: *c}}\n",
        f"bridge: reader\nconfig:\n  <<: {{data: {secret}}}\n",
        "bridge: reader\nconfig:\n  data: !!binary L2V0Yy9wYXNzd2Q=\n",
    ]
    for text in texts:
        with pytest.raises(errors.SpecError):
            envh.make(text)
    assert not READ


@pytest.mark.parametrize("key", ["ｄata", "Data", "DATA", "data ", "da\u200bta"])
def test_lookalike_keys_do_not_reach_the_bridge(registry: Any, tree: Path, key: str) -> None:
    with pytest.raises(errors.SpecError, match="Bad config"):
        envh.make(spec("reader", str(tree / "secret.txt"), key))
    assert not READ


def test_nested_specs_are_walked_wherever_they_stand(registry: Any, tree: Path) -> None:
    secret = str(tree / "secret.txt")
    deep = {"bridge": "toy24", "layers": [{"kind": "chain", "legs": [
        {"bridge": "toy24", "layers": [{"kind": "chain", "legs": [spec("reader", secret)]}]}]}]}
    nested = {"bridge": "toy24", "layers": [{"kind": "nest", "inner": spec("reader", secret)}]}
    for data in (deep, nested):
        assert spec_paths(data), data
        assert refused(lambda data=data: envh.make(data))
        with pytest.raises(errors.SpecError, match="host path"):  # refused before anything is planned
            build_plan(data, policy="random", tasks=[None])


def test_a_spec_file_or_text_is_checked_as_its_data(registry: Any, tree: Path) -> None:
    import yaml

    path = tree / "spec.yaml"
    path.write_text(yaml.safe_dump(spec("reader", str(tree / "secret.txt"))))
    assert refused(lambda: envh.make(str(path)))
    assert refused(lambda: envh.make(path))
    assert refused(lambda: envh.make(path.read_text()))


def test_a_spec_cannot_set_the_requests_grant_or_tier(registry: Any, tree: Path) -> None:
    secret = str(tree / "secret.txt")
    for extra in ({"data": [secret]}, {"grant": [secret]}, {"trust": "trusted"}):
        with pytest.raises(errors.SpecError):
            build_plan({**spec("reader", secret), **extra}, policy="random", tasks=[None])
    (request,) = build_plan({"bridge": "toy24", "trust": "trusted"}, policy="random", tasks=[None])
    assert request.trust == "untrusted" and request.data == ()


@pytest.mark.parametrize("env", ["", ":", "::", " ", os.pathsep * 3])
def test_empty_entries_of_the_variable_grant_nothing(registry: Any, tree: Path, env: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree)
    monkeypatch.setenv(DATA_ENV, env)
    assert str(tree) not in grants()
    assert refused(lambda: envh.make(spec("reader", "secret.txt")))


def test_a_relative_grant_is_fixed_when_granted(registry: Any, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree / "granted")
    grant(".")
    monkeypatch.chdir(tree)
    assert os.environ[DATA_ENV] == str((tree / "granted").resolve())
    assert refused(lambda: envh.make(spec("reader", "secret.txt")))
    with envh.make(spec("reader", "granted/questions.txt")) as env:
        assert env.read


def test_a_warm_env_is_not_shared_between_grants(registry: Any, tree: Path) -> None:
    from envh.rollout.warm import Warm

    warm = Warm(registry)
    try:
        env = warm.env("sid", spec("reader", str(tree / "secret.txt")), data=(str(tree / "secret.txt"),))
        assert env.read
        READ.clear()
        with pytest.raises(errors.SpecError, match="host path"):
            warm.env("sid", spec("reader", str(tree / "secret.txt")))
        with pytest.raises(errors.SpecError):  # a typo in the tier is refused, not read as trusted
            warm.env("sid", spec("reader", str(tree / "secret.txt")), trust="Trusted")
        assert not READ
    finally:
        warm.close()


def test_the_refusal_leaks_neither_contents_nor_existence(registry: Any, tree: Path) -> None:
    messages = []
    for name in ("secret.txt", "missing.txt"):
        with pytest.raises(errors.SpecError) as info:
            envh.make(spec("reader", str(tree / name)), data=[tree / "granted"])
        messages.append(str(info.value).replace(name, "NAME"))
    (tree / "granted" / "link").symlink_to(tree / "secret.txt")
    with pytest.raises(errors.SpecError) as info:
        envh.make(spec("reader", str(tree / "granted" / "link")), data=[tree / "granted"])
    assert messages[0] == messages[1]
    assert SECRET not in str(info.value) and "secret.txt" not in str(info.value)  # not even where it leads


def test_a_link_in_the_grant_to_a_private_directory_is_not_the_workers_own(registry: Any, tree: Path) -> None:
    private = tree / "private"
    private.mkdir(mode=0o700)
    (tree / "granted" / "link").symlink_to(private)
    request = EpisodeRequest(key="k", spec=spec("reader", str(tree / "granted" / "link")), spec_id="s",
                             policy="random", data=(str((tree / "granted").resolve()),))
    paths, _ = declared_data([request], registry)
    assert [own for p, _, own in paths if p == str(private.resolve())] == [False]


def test_a_spec_named_trust_string_other_than_trusted_is_held(registry: Any, tree: Path) -> None:
    secret = str(tree / "secret.txt")
    for tier in ("untrusted", "Trusted", "trusted ", ""):
        with pytest.raises(errors.SpecError):
            envh.make(spec("reader", secret), trust=tier)
        with pytest.raises((errors.SpecError, errors.EnvhError)):
            build_plan(spec("reader", secret), policy="random", tasks=[None], trust=tier)
    assert not READ


def test_the_cli_data_option_grants_only_what_it_names(registry: Any, tree: Path) -> None:
    import yaml
    from envh.cli import cli

    path = tree / "spec.yaml"
    path.write_text(yaml.safe_dump(spec("reader", str(tree / "secret.txt"))))
    result = CliRunner().invoke(cli, ["spec", "check", str(path), "--no-reset", "--data", str(tree / "granted")])
    assert result.exit_code != 0 and "host path" in result.output and SECRET not in result.output


def test_a_url_is_refused_as_an_ungranted_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``hf://...`` (or ``file:///etc/shadow``, which some loaders open) is not told apart
    from a path: an untrusted spec may not name it; a trusted call may."""
    pytest.importorskip("envh_swebench")
    from envh.plugins import get_registry

    monkeypatch.chdir(tmp_path)
    for url in ("hf://princeton-nlp/SWE-bench", "file:///etc/shadow"):
        with pytest.raises(errors.SpecError, match="host path"):
            refuse_host_paths({"bridge": "swebench", "config": {"instances": url}}, get_registry(), "untrusted",
                              [str(tmp_path / "granted")])
        refuse_host_paths({"bridge": "swebench", "config": {"instances": url}}, get_registry(), "trusted")
