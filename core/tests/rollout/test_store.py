"""The trajectory store: queries, append-only, one final row per key, crash safety."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import attrs
import envh
import pytest
from envh.rollout.runner import run_episode
from envh.rollout.store import TrajectoryStore, build_manifest
from envh.rollout.trajectory import EpisodeRequest, trajectory_to_json
from envh.rollout.warm import Warm


def play(registry, keys, policy="solver", spec=None, run_id="run1"):
    spec = spec or {"bridge": "toy24"}
    data, sid = envh.spec_to_data(envh.parse_spec(spec, registry), registry), envh.spec_id(spec, registry)
    warm = Warm(registry)
    try:
        return [run_episode(EpisodeRequest(
            key=key, spec=data, spec_id=sid, run_id=run_id, policy=policy,
            task=envh.TaskRef(suite="toy24", split="easy", instance_id=inst), seed=0), warm)
            for key, inst in keys]
    finally:
        warm.close()


def test_query_by_spec_task_policy_run_and_kind(registry, tmp_path):
    a = play(registry, [("a#0", "2,3,4"), ("b#0", "1,3,8")])
    b = play(registry, [("a#0", "2,3,4")], policy="fuzz:1", run_id="run2",
             spec={"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 2}]})
    with TrajectoryStore(tmp_path) as store:
        store.create_run("run1", build_manifest(run_id="run1", config={"k": 1}, spec_ids=[a[0].spec_id],
                                                seeds=[0], versions={"envh": "x"}))
        for t in a + b:
            store.append(t)
        lost = play(registry, [("c#0", "4,4,5")])[0]
        store.append(attrs.evolve(lost, final=False, error_class="infra_error"))
        assert [t.key for t in store.query(run_id="run1")] == ["a#0", "b#0"]
        assert [t.policy_id for t in store.query(spec_id=b[0].spec_id)] == ["test-fuzz:1"]
        assert len(list(store.query(task="2,3,4"))) == 2
        assert len(list(store.query(task="toy24/easy/1,3,8"))) == 1
        assert len(list(store.query(policy="solver"))) == 2 and len(list(store.query(policy="test-solver"))) == 2
        assert [r["key"] for r in store.rows(kind="attempt")] == ["c#0"]
        assert len(store.rows(kind=None)) == 4
        assert list(store.query(run_id="run1", task="2,3,4"))[0] == a[0]
        assert store.completed_keys("run1") == {"a#0", "b#0"}
        manifest = store.manifest("run1")
        assert manifest["spec_ids"] == [a[0].spec_id] and manifest["config"] == {"k": 1}
        assert "git_sha" in manifest and manifest["versions"] == {"envh": "x"}


def test_the_store_is_append_only_and_keeps_one_final_row_per_key(registry, tmp_path):
    (t,) = play(registry, [("a#0", "2,3,4")])
    with TrajectoryStore(tmp_path) as store:
        store.append(t)
        with pytest.raises(sqlite3.IntegrityError):
            store.append(t)
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            store.db.execute("UPDATE trajectories SET success = 0")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            store.db.execute("DELETE FROM trajectories")
        assert len(store.rows()) == 1


WRITER = textwrap.dedent("""
    import sys, envh
    sys.path.insert(0, {here!r})
    import rollout_policies
    from envh.rollout.runner import run_episode
    from envh.rollout.store import TrajectoryStore
    from envh.rollout.trajectory import EpisodeRequest
    reg = envh.make_plugin_manager(entry_points=False, plugins=[rollout_policies])
    spec = {{"bridge": "toy24"}}
    data, sid = envh.spec_to_data(envh.parse_spec(spec, reg), reg), envh.spec_id(spec, reg)
    store = TrajectoryStore({path!r})
    for i in range(100000):
        t = run_episode(EpisodeRequest(key=f"k{{i}}", spec=data, spec_id=sid, policy="solver", run_id="r"),
                        registry=reg)
        store.append(t)
        if i == 20:
            print("ready", flush=True)
""")


def test_rows_survive_kill_9_of_the_writer(tmp_path):
    here = str(__import__("pathlib").Path(__file__).parent)
    proc = subprocess.Popen([sys.executable, "-c", WRITER.format(here=here, path=str(tmp_path))],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    with TrajectoryStore(tmp_path) as store:
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = store.rows(run_id="r")
        keys = [r["key"] for r in rows]
        assert len(keys) > 20 and keys == [f"k{i}" for i in range(len(keys))]
        assert all(t.success for t in store.query(run_id="r"))


OLD_SCHEMA = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, created REAL NOT NULL, manifest TEXT NOT NULL);
CREATE TABLE trajectories (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL, key TEXT NOT NULL, attempt INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('episode', 'attempt')),
  spec_id TEXT NOT NULL, task TEXT, split TEXT, instance_id TEXT, seed INTEGER,
  policy TEXT, policy_id TEXT, success INTEGER, score REAL, steps INTEGER,
  invalid_steps INTEGER, error_class TEXT, stop TEXT, duration_s REAL, created REAL NOT NULL,
  data TEXT NOT NULL);
CREATE UNIQUE INDEX one_episode_per_key ON trajectories(run_id, key) WHERE kind = 'episode';
"""


def test_a_store_from_before_retries_takes_retried_rows(registry, tmp_path):
    (first,) = play(registry, [("a#0", "2,3,4")])
    db = sqlite3.connect(tmp_path / "trajectories.sqlite")
    db.executescript(OLD_SCHEMA)
    db.execute("INSERT INTO trajectories (run_id, key, attempt, kind, spec_id, created, data) "
               "VALUES ('run1', 'a#0', 0, 'episode', ?, 0, ?)", (first.spec_id, trajectory_to_json(
                   attrs.evolve(first, error_class="policy_error", retryable=True))))
    db.commit()
    db.close()
    with TrajectoryStore(tmp_path) as store:
        assert store.retryable_keys("run1") == {}  # old rows were never marked retryable
        store.append(attrs.evolve(first, retry=1))
        with pytest.raises(sqlite3.IntegrityError):
            store.append(attrs.evolve(first, retry=1))  # still one final row per key and retry
        assert [r["retry"] for r in store.rows(run_id="run1")] == [1]
        assert len(store.rows(run_id="run1", kind=None)) == 2
