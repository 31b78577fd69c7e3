"""The designer loop end to end on a real ALFWorld game (envh-rigger + envh-alfworld).

A policy that plays the planner's walkthrough always wins; with the target "fail at
least half the time" the template designer must put pressure on it with ALFWorld's own
templates (contributed through ``envh_templates``), measured on the real engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import envh

pytest.importorskip("alfworld")  # the repository conftest turns this skip into a failure in CI


def test_template_designer_puts_pressure_on_a_walkthrough_player(tmp_path: Path) -> None:
    from envh_alfworld.builder import build_games
    from envh_alfworld.examples import EXAMPLE_ROOMS
    from envh_alfworld.rooms import room_from_dict
    from envh_rigger.pool import HarnessPool
    from envh_rigger.run import RigConfig, rig

    data = tmp_path / "alfworld"
    (game,) = build_games([room_from_dict(EXAMPLE_ROOMS["pick_and_place_simple"])], data)
    script = tmp_path / "walkthrough.json"
    script.write_text(json.dumps({game.task.instance_id: [
        {"tool": "do", "args": {"command": c}} for c in game.walkthrough]}))
    spec = {"bridge": "alfworld", "config": {"data_path": str(data), "max_steps": 30}}
    lines: list[str] = []
    summary = rig(RigConfig(
        spec=spec, tasks=f"{game.task.split}/{game.task.instance_id}", policy=f"scripted:{script}",
        policy_options={"when_done": "repeat"}, target="sr:0.0-0.5", k=2, k_max=4, rounds=3,
        workers=1, max_steps=20, out=str(tmp_path / "rig")), echo=lines.append)

    assert summary["stops"][str(game.task)] == "accepted", "\n".join(lines)
    assert any("baseline 1.00" in line and "pressure" in line for line in lines)
    (entry,) = HarnessPool.open(tmp_path / "rig" / "pool").entries()
    accepted = json.loads(Path(entry["spec_path"]).read_text())
    assert len(accepted["layers"]) >= 1
    # the accepted world is a real spec: the walkthrough no longer wins it
    with envh.make(accepted) as env:
        env.reset(task=game.task, seed=0)
        for command in game.walkthrough:
            resp = env.step(envh.Action(tool="do", args={"command": command}))
            if resp.terminated or resp.truncated:
                break
        assert not env.evaluate().success
    assert Path(summary["report"]).exists()
