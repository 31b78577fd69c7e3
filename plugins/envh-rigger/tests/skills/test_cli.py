"""``envh skills induce`` / ``show`` through the plugin's command hook, on real stores,
including banks from the static env vs from a rig run's accepted reshaped envs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import envh_rigger.hooks
import pytest
from click.testing import CliRunner
from envh import make_plugin_manager, spec_id
from envh.cli import EnvhGroup
from envh_rigger.pool import HarnessPool
from envh_rigger.skills import SkillBank


@pytest.fixture
def cli() -> click.Group:
    group = EnvhGroup("envh")
    make_plugin_manager(entry_points=False, plugins=[envh_rigger.hooks]).register_commands(group)
    return group


def run(cli: click.Group, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, ["skills", *args], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def test_induce_then_show(cli: click.Group, toy_run: Path, embedder: Any) -> None:
    out = run(cli, "induce", str(toy_run))
    assert "5 episode(s), 3 task case(s): 1 contrast, 1 success, 1 failure" in out
    bank = SkillBank.load(toy_run / "skills")
    assert len(bank) >= 3 and bank.embedder_name == embedder.name
    assert bank.info["built_from"][0]["inducer"] == "rule"
    listing = run(cli, "show", str(toy_run / "skills"))
    assert 'Do combine(op="mul")' in listing and "baseline/contrast" in listing
    found = json.loads(run(cli, "show", str(toy_run / "skills"), "--query",
                           "Target: 24. Numbers: [0] 3, [1] 4, [2] 2.", "-k", "2", "--json"))
    assert len(found) == 2 and all(0 < f["score"] <= 1 for f in found)
    block = run(cli, "show", str(toy_run / "skills"), "--query", "reach 24", "-k", "1", "--block")
    assert block.startswith("1. ") and "When to use:" in block


def test_append_merges_repeated_lessons(cli: click.Group, toy_run: Path, tmp_path: Path, embedder: Any) -> None:
    bank_dir = tmp_path / "bank"
    run(cli, "induce", str(toy_run), "--out", str(bank_dir))
    first = SkillBank.load(bank_dir)
    out = run(cli, "induce", str(toy_run), "--out", str(bank_dir), "--append")
    assert "4 item(s) induced, 0 added, 4 merged" in out
    bank = SkillBank.load(bank_dir)
    assert len(bank.info["built_from"]) == 2
    # the same episodes again add no item and no second copy of a source
    assert bank.items == first.items
    # the two tasks that taught the same pitfall share one item
    (avoid,) = [it for it in bank.items if it.title.startswith("Avoid")]
    assert sorted(p.task.split("/")[-1] for p in avoid.provenance) == ["1,3,8", "2,3,4"]


def _rig_dir(tmp_path: Path, play: Any) -> tuple[Path, str, str]:
    """A rig-shaped output dir: baseline episodes on plain Toy24, validation episodes on an
    accepted staged spec (first step replayed) and on a rejected one, plus the pool."""
    out, record, WIN, LOSE = tmp_path / "rig", play.record, play.WIN, play.LOSE
    base = {"bridge": "toy24", "config": {}, "layers": []}
    staged = {**base, "layers": [{"kind": "stage", "actions": [WIN[0]]}]}
    rejected = {**base, "layers": [{"kind": "budget", "max_steps": 3}]}
    record(out, [("2,3,4", WIN), ("2,3,4", LOSE)], spec=base)
    record(out, [("2,3,4", WIN[1:]), ("2,3,4", [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "sub"}},
                                                {"tool": "stop"}])], spec=staged)
    record(out, [("2,3,4", LOSE)], spec=rejected)
    pool = HarnessPool(out / "pool")
    pool.add(spec_id(staged), staged, {"task": "toy24/easy/2,3,4", "diagnosis": "needs a first step"})
    pool.reject({"spec_id": spec_id(rejected), "reason": "outside the band"})
    return out, spec_id(base), spec_id(staged)


def test_banks_from_static_vs_reshaped_envs(cli: click.Group, tmp_path: Path, embedder: Any, play: Any) -> None:
    rig, base_id, staged_id = _rig_dir(tmp_path, play)
    out = run(cli, "induce", str(rig), "--from", "accepted", "--out", str(tmp_path / "reshaped"))
    assert "2 episode(s), 1 task case(s): 1 contrast" in out
    reshaped = SkillBank.load(tmp_path / "reshaped")
    provs = [p for it in reshaped.items for p in it.provenance]
    assert provs and {(p.source, p.spec_id) for p in provs} == {("reshaped", staged_id)}
    run(cli, "induce", str(rig), "--from", "baseline", "--out", str(tmp_path / "static"))
    static = SkillBank.load(tmp_path / "static")
    assert {(p.source, p.spec_id) for it in static.items for p in it.provenance} == {("baseline", base_id)}
    # the staged env starts after the first multiplication: its lesson is the second one
    assert any("sub" in it.content for it in reshaped.items)
    assert static.info["built_from"][0]["from"] == "baseline"


def test_errors_are_one_clear_line(cli: click.Group, toy_run: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["skills", "induce", str(toy_run), "--from", "accepted"])
    assert result.exit_code == 2 and "has no harness pool" in result.output
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(cli, ["skills", "show", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "No skills bank" in result.output
    result = CliRunner().invoke(cli, ["skills", "induce", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "No trajectory store" in result.output
    result = CliRunner().invoke(cli, ["skills", "induce", str(toy_run), "--inducer", "gpt"])
    assert result.exit_code == 2 and "Unknown inducer 'gpt'" in result.output


def test_cli_constants_match_the_modules() -> None:
    from envh_rigger.skills import build, cli, embed

    assert cli.CHOICES == build.CHOICES and cli.DEFAULT_EMBEDDER == embed.DEFAULT_EMBEDDER
