"""The ``envh`` command through click's runner: listings, spec checks, and exit codes
that help on bad input."""

from __future__ import annotations

import json

import envh
import pytest
from click.testing import CliRunner
from envh.cli import cli
from envh.plugins import set_registry


@pytest.fixture(autouse=True)
def core_only():
    """Only core's contributions, whatever else is installed."""
    set_registry(envh.make_plugin_manager(entry_points=False))
    yield
    set_registry(None)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_plugins_lists_bridges_and_kinds() -> None:
    result = invoke("plugins", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["bridges"] == ["toy24"]
    assert report["component_kinds"] == ["budget", "chain", "contract", "stage"]
    assert report["plugins"][0] == {"name": "envh", "distribution": "envh", "version": envh.__version__}
    assert {"name": "toy24", "plugin": "envh", "distribution": "envh",
            "version": envh.__version__} in report["providers"]["bridges"]
    table = invoke("plugins")
    assert table.exit_code == 0 and "toy24" in table.output
    assert all(kind in table.output for kind in ("budget", "chain", "contract", "stage"))


def test_tasks_of_one_split() -> None:
    result = invoke("tasks", "toy24", "--split", "hard")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert len(lines) == 10 and lines[0] == "hard\t1,5,5,5" and all(x.startswith("hard\t") for x in lines)


def test_tasks_errors_list_the_choices() -> None:
    bad_bridge = invoke("tasks", "toy42")
    assert bad_bridge.exit_code == 2
    assert "error: Unknown bridge 'toy42'. Choose one of: toy24" in bad_bridge.output
    bad_split = invoke("tasks", "toy24", "--split", "impossible")
    assert bad_split.exit_code == 2
    assert "Unknown Toy24 split 'impossible'. Choose one of: easy, generated, hard, medium" in bad_split.output


def test_tasks_with_malformed_config_json_is_a_clear_error() -> None:
    result = invoke("tasks", "toy24", "--config", "{oops")
    assert result.exit_code == 2 and "--config" in result.output and "not valid JSON" in result.output


def test_spec_check_and_id(tmp_path) -> None:
    spec = tmp_path / "world.yaml"
    spec.write_text("bridge: toy24\nlayers:\n  - kind: stage\n    actions: [{tool: reset}]\n"
                    "  - kind: budget\n    max_steps: 9\n")
    checked = invoke("spec", "check", str(spec))
    expected = envh.spec_id(spec)
    assert checked.exit_code == 0
    assert checked.output.strip() == f"ok: 2 layer(s) on bridge 'toy24'; id {expected}"
    ided = invoke("spec", "id", str(spec))
    assert ided.exit_code == 0 and ided.output.strip() == expected


@pytest.mark.parametrize(("text", "message"), [
    ("bridge: toy24\nlayers:\n  - kind: stage\n    actoins: []\n", "unknown key 'actoins' @ $.layers[0].actoins"),
    ("bridge: toy24\nlayers:\n  - kind: staeg\n", "Unknown component kind 'staeg'. Choose one of:"),
    ("bridge: [toy24\n", "is not valid YAML/JSON"),
    ("bridge: toy24\nlayers:\n  - kind: contract\n    code: 'import os'\n", "import of 'os' is not allowed"),
    ("bridge: toy24\nlayers:\n  - kind: stage\n    actions: [{tool: fly}]\n", "Stage replay failed at action #0"),
])
def test_spec_check_rejects_bad_specs_with_exit_code_2(tmp_path, text: str, message: str) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(text)
    result = invoke("spec", "check", str(spec))
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ")
    assert message in result.output


def test_missing_spec_file(tmp_path) -> None:
    result = invoke("spec", "id", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2 and "does not exist" in result.output


def test_usage_errors_exit_with_2() -> None:
    assert invoke("tasks").exit_code == 2
    assert invoke("no-such-command").exit_code == 2
