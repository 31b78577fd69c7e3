"""The trajectory store: durable, crash-safe, append-only, queryable.

Why SQLite in WAL mode rather than JSONL + fsync + an index: a trajectory row and its
index columns are written in one transaction, so a run killed at any instant leaves
either the whole row or nothing (no torn JSON line, no index out of step with the data);
``synchronous=FULL`` makes a committed row survive power loss too. A partial unique
index (one final ``episode`` row per run and key) makes duplicates impossible rather than
merely unlikely, which is what ``--resume`` relies on; triggers reject UPDATE and DELETE,
so the store is append-only by construction. Queries by spec id, task, policy, run and
kind are plain indexed SQL, and the file is readable by any SQLite tool. One writer
(the run's parent process) is the intended use; readers may run alongside (WAL).

Re-playing an episode whose failure was the endpoint or the infrastructure
(``--resume --retry failed``) appends a new final row with ``retry`` one higher; the
older row stays (append-only) and counts as superseded: ``kind="episode"`` queries return
only the latest row of each key, ``kind=None`` returns every row.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .trajectory import Trajectory, trajectory_from_json, trajectory_to_json

FILENAME = "trajectories.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, created REAL NOT NULL, manifest TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trajectories (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL, key TEXT NOT NULL, attempt INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('episode', 'attempt')),
  spec_id TEXT NOT NULL, task TEXT, split TEXT, instance_id TEXT, seed INTEGER,
  policy TEXT, policy_id TEXT, success INTEGER, score REAL, steps INTEGER,
  invalid_steps INTEGER, error_class TEXT, stop TEXT, duration_s REAL, created REAL NOT NULL,
  data TEXT NOT NULL, retry INTEGER NOT NULL DEFAULT 0, retryable INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS by_run ON trajectories(run_id, kind);
CREATE INDEX IF NOT EXISTS by_spec ON trajectories(spec_id);
CREATE INDEX IF NOT EXISTS by_task ON trajectories(task);
CREATE INDEX IF NOT EXISTS by_policy ON trajectories(policy_id);
CREATE TRIGGER IF NOT EXISTS append_only_update BEFORE UPDATE ON trajectories
  BEGIN SELECT RAISE(ABORT, 'the trajectory store is append-only'); END;
CREATE TRIGGER IF NOT EXISTS append_only_delete BEFORE DELETE ON trajectories
  BEGIN SELECT RAISE(ABORT, 'the trajectory store is append-only'); END;
"""
UNIQUE = """
CREATE UNIQUE INDEX IF NOT EXISTS one_episode_per_key_and_retry ON trajectories(run_id, key, retry)
  WHERE kind = 'episode';
"""
COLUMNS = ("run_id", "key", "attempt", "kind", "spec_id", "task", "split", "instance_id", "seed",
           "policy", "policy_id", "success", "score", "steps", "invalid_steps", "error_class",
           "stop", "duration_s", "created", "retry", "retryable")
LATEST = ("NOT EXISTS (SELECT 1 FROM trajectories AS newer WHERE newer.run_id = trajectories.run_id "
          "AND newer.key = trajectories.key AND newer.kind = 'episode' AND newer.retry > trajectories.retry)")


def git_sha(cwd: str | Path | None = None) -> str | None:
    """The current commit of the git checkout at ``cwd``, if any."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def build_manifest(*, run_id: str, config: dict[str, Any], spec_ids: list[str], seeds: list[int | None],
                   versions: dict[str, str]) -> dict[str, Any]:
    """What a run was: its config, spec ids, seeds, package versions and git sha."""
    return {"run_id": run_id, "created": time.time(), "host": socket.gethostname(),
            "git_sha": git_sha(), "versions": versions, "spec_ids": sorted(set(spec_ids)),
            "seeds": sorted({s for s in seeds if s is not None}), "config": config}


class TrajectoryStore:
    """A SQLite file (``DIR/trajectories.sqlite``) of runs and trajectories."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if path.suffix not in (".sqlite", ".db"):
            path.mkdir(parents=True, exist_ok=True)
            path = path / FILENAME
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        self._migrate()
        self.db.executescript(UNIQUE)

    def _migrate(self) -> None:
        """Stores written before retries existed: add the columns and widen the unique index."""
        have = {row[1] for row in self.db.execute("PRAGMA table_info(trajectories)")}
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            for column in ("retry", "retryable"):
                if column not in have:
                    self.db.execute(f"ALTER TABLE trajectories ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
            self.db.execute("DROP INDEX IF EXISTS one_episode_per_key")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> TrajectoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs ----------------------------------------------------------------------------
    def create_run(self, run_id: str, manifest: dict[str, Any]) -> None:
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT INTO runs VALUES (?, ?, ?)",
                            (run_id, time.time(), json.dumps(manifest, sort_keys=True, default=repr)))

    def runs(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT run_id FROM runs ORDER BY created")]

    def manifest(self, run_id: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT manifest FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else json.loads(row[0])

    # -- trajectories --------------------------------------------------------------------
    def append(self, trajectory: Trajectory) -> None:
        """Write one trajectory durably (one transaction, fsynced before returning)."""
        t = trajectory
        task = t.task
        verdict = t.verdict
        row = (t.run_id, t.key, t.attempt, "episode" if t.final else "attempt", t.spec_id,
               None if task is None else str(task), None if task is None else task.split,
               None if task is None else task.instance_id, t.seed, t.policy, t.policy_id,
               None if verdict is None else int(verdict.success),
               None if verdict is None else verdict.score, len(t.steps), t.invalid_steps,
               t.error_class, t.stop, t.duration_s, time.time(), int(t.retry), int(t.retryable),
               trajectory_to_json(t))
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(f"INSERT INTO trajectories ({', '.join(COLUMNS)}, data) "
                            f"VALUES ({', '.join('?' * (len(COLUMNS) + 1))})", row)

    def completed_keys(self, run_id: str) -> set[str]:
        rows = self.db.execute("SELECT key FROM trajectories WHERE run_id = ? AND kind = 'episode'",
                               (run_id,))
        return {r[0] for r in rows}

    def retryable_keys(self, run_id: str) -> dict[str, int]:
        """Keys whose latest final row failed on the endpoint or the infrastructure, with
        that row's ``retry`` (the re-play gets one more)."""
        rows = self.db.execute(f"SELECT key, retry FROM trajectories WHERE run_id = ? AND kind = 'episode' "
                               f"AND retryable = 1 AND {LATEST}", (run_id,))
        return {key: retry for key, retry in rows}

    def _where(self, filters: dict[str, Any]) -> tuple[str, list[Any]]:
        clauses, args = [], []
        for name, value in filters.items():
            if value is None:
                continue
            if name == "task":
                clauses.append("(task = ? OR instance_id = ?)")
                args += [value, value]
            elif name == "policy":
                clauses.append("(policy = ? OR policy_id = ?)")
                args += [value, value]
            elif name == "success":
                clauses.append("success = ?")
                args.append(int(value))
            elif name == "kind" and value == "episode":
                clauses.append(f"kind = 'episode' AND {LATEST}")
            else:
                clauses.append(f"{name} = ?")
                args.append(value)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args

    def rows(self, *, run_id: str | None = None, spec_id: str | None = None, task: str | None = None,
             policy: str | None = None, kind: str | None = "episode", error_class: str | None = None,
             success: bool | None = None) -> list[dict[str, Any]]:
        """Index columns only (no trajectory parsing), oldest first. ``kind="episode"``: the
        latest final row of each key; ``"attempt"``: attempts lost with a worker; ``None``: all."""
        where, args = self._where(dict(run_id=run_id, spec_id=spec_id, task=task, policy=policy,
                                       kind=kind, error_class=error_class, success=success))
        cur = self.db.execute(f"SELECT seq, {', '.join(COLUMNS)} FROM trajectories{where} ORDER BY seq", args)
        return [dict(zip(("seq", *COLUMNS), r)) for r in cur]

    def query(self, *, run_id: str | None = None, spec_id: str | None = None, task: str | None = None,
              policy: str | None = None, kind: str | None = "episode", error_class: str | None = None,
              success: bool | None = None) -> Iterator[Trajectory]:
        """Full trajectories matching every given filter, oldest first."""
        where, args = self._where(dict(run_id=run_id, spec_id=spec_id, task=task, policy=policy,
                                       kind=kind, error_class=error_class, success=success))
        for (data,) in self.db.execute(f"SELECT data FROM trajectories{where} ORDER BY seq", args):
            yield trajectory_from_json(data)


def run_dir_exists(path: str | Path) -> bool:
    return os.path.exists(Path(path) / FILENAME)
