"""Fixtures for the skills tests: real Toy24 episodes in a real trajectory store and the
real offline embedder. (LLM endpoints come from envh.testing's ``llm_replay_server``.)

Episodes are played by the real episode runner on the real Toy24 bridge with envh's
``scripted`` policy, so the trajectories are known.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from envh import TaskRef, make_plugin_manager, spec_id
from envh.rollout.runner import run_episode
from envh.rollout.store import TrajectoryStore
from envh.rollout.trajectory import EpisodeRequest
from envh.rollout.warm import Warm

# The 24 game on 2,3,4: multiplying wins, adding loses.
WIN = [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "mul"}},
       {"tool": "combine", "args": {"i": 0, "j": 1, "op": "mul"}}, {"tool": "stop"}]
LOSE = [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}},
        {"tool": "combine", "args": {"i": 7, "j": 0, "op": "add"}},
        {"tool": "combine", "args": {"i": 7, "j": 0, "op": "add"}},
        {"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}, {"tool": "stop"}]


def toy_spec(layers: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], str]:
    spec = {"bridge": "toy24", "config": {}, "layers": layers or []}
    return spec, spec_id(spec)


def record(store_dir: Path, episodes: list[tuple[str, list[dict[str, Any]]]], *, run_id: str = "run",
           spec: dict[str, Any] | None = None) -> list[str]:
    """Play ``(instance_id, actions)`` episodes on Toy24 into the store at ``store_dir``."""
    registry = make_plugin_manager(entry_points=False)
    spec_data, sid = (spec, spec_id(spec)) if spec else toy_spec()
    warm = Warm(registry)
    keys = []
    with TrajectoryStore(store_dir) as store:
        if run_id not in store.runs():
            store.create_run(run_id, {"run_id": run_id})
        start = len(store.rows(run_id=run_id))
        for n, (instance, actions) in enumerate(episodes):
            key = f"{instance}#{start + n}"
            req = EpisodeRequest(key=key, spec=spec_data, spec_id=sid, run_id=run_id, seed=0,
                                 task=TaskRef(suite="toy24", split="easy", instance_id=instance),
                                 policy="scripted", policy_options={"actions": actions, "when_done": "stop"}, max_steps=20)
            traj = run_episode(req, warm)
            assert traj.error_class is None, traj.error
            store.append(traj)
            keys.append(key)
    warm.close()
    return keys


@pytest.fixture
def toy_run(tmp_path: Path) -> Path:
    """A run dir: 2,3,4 won once (3 steps) and lost twice; 1,3,8 only lost; 4,4,5 only won."""
    out = tmp_path / "run"
    record(out, [("2,3,4", WIN), ("2,3,4", LOSE), ("2,3,4", LOSE[:1] + [{"tool": "stop"}]),
                 ("1,3,8", LOSE), ("4,4,5", [{"tool": "combine", "args": {"i": 1, "j": 2, "op": "mul"}},
                                            {"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}},
                                            {"tool": "stop"}])])
    return out


@pytest.fixture(scope="session")
def embedder() -> Any:
    """The real offline embedder (all-MiniLM-L6-v2 from its wheel), loaded once."""
    from envh_rigger.skills import MiniLMEmbedder

    emb = MiniLMEmbedder()
    emb.embed(["warm up"])
    return emb


@pytest.fixture
def replay() -> Any:
    """envh's local OpenAI-compatible replay server (chat completions and embeddings)."""
    from envh.testing_llm import LLMReplayServer

    with LLMReplayServer() as server:
        yield server


@pytest.fixture
def play() -> Any:
    """The ``record`` helper and the WIN / LOSE scripts, for tests that build their own runs."""
    import types

    return types.SimpleNamespace(record=record, WIN=WIN, LOSE=LOSE)
