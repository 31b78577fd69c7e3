"""The core workspace kind on the real ALFWorld engine: ``track`` reads ALFWorld's
rule-based belief tracker (where the agent is, what it holds, what it saw where), and the
expert walkthrough still wins with meta-actions interleaved."""

from __future__ import annotations

import envh
from envh import Action


def do(command: str) -> Action:
    return Action(tool="do", args={"command": command})


def track(query: str) -> Action:
    return Action(tool="track", args={"query": query})


def test_track_reads_the_belief_tracker_through_a_real_game(games_root, built) -> None:
    game = built["pick_and_place_simple"]
    spec = {"bridge": "alfworld", "config": {"data_path": str(games_root)},
            "layers": [{"kind": "workspace"}, {"kind": "budget", "max_steps": 60}]}
    with envh.make(spec) as env:
        env.reset(task=game.task, seed=0)
        assert "nothing yet" in env.step(track("world")).observation.text
        for i, command in enumerate(game.walkthrough):
            env.step(do(command))
            if i == 0:  # after the first move the belief knows where the agent is
                edges = env.unwrapped.belief_edges()
                assert ("agent", "at", command.removeprefix("go to ")) in edges
                assert f"agent at {command.removeprefix('go to ')}" in env.step(track("agent")).observation.text
        assert env.evaluate().success
        world = env.step(track("world")).observation.text
        assert world.startswith("Belief (") and "agent at" in world
        assert env.get_env_state()["workspace"]["counts"]["track"] == 3
