"""Rollouts: a process pool of 2 workers plays 4 ALFWorld episodes on the real engine."""

from __future__ import annotations

import json


def test_pool_runs_four_episodes_on_two_workers(games_root, built, tmp_path):
    from envh.rollout.executors.pool import PoolExecutor
    from envh.rollout.trajectory import EpisodeRequest
    from envh.spec import spec_id

    games = [built[t] for t in ("pick_and_place_simple", "pick_heat_then_place_in_recep",
                                "pick_two_obj_and_place", "look_at_obj_in_light")]
    script = tmp_path / "walkthroughs.json"
    script.write_text(json.dumps({g.task.instance_id: [{"tool": "do", "args": {"command": c}} for c in g.walkthrough]
                                  for g in games}))
    spec = {"bridge": "alfworld", "config": {"data_path": str(games_root)}}
    requests = [EpisodeRequest(key=f"ep{i}", spec=spec, spec_id=spec_id(spec), task=g.task, seed=i,
                               policy=f"scripted:{script}", timeout_s=120)
                for i, g in enumerate(games)]
    with PoolExecutor(workers=2) as pool:
        trajectories = [t for t in pool.run(requests) if t.final]
    assert sorted(t.key for t in trajectories) == ["ep0", "ep1", "ep2", "ep3"]
    for t in trajectories:
        assert t.error is None and t.stop == "terminated", (t.key, t.error)
        assert t.verdict is not None and t.verdict.success
        assert len(t.steps) == len(next(g for g in games if g.task == t.task).walkthrough)
    assert len({t.worker for t in trajectories}) == 2, "both workers played"
