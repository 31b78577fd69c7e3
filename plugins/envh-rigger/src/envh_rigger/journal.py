"""The loop's state, kept in the rollouts store next to the trajectories.

A table ``rig_journal`` in ``OUT/trajectories.sqlite`` holds one row per event
(``baseline``, ``proposal``, ``attempt``, ``accepted``, ``task_done``), each written in
its own transaction, so a run killed at any instant loses at most the event in flight.
``--resume`` replays these rows: finished tasks are skipped, finished rounds are not
redone, a proposal whose validation was cut short is validated again (its stored
episodes are read back, not replayed).
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS rig_journal (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, task TEXT NOT NULL, kind TEXT NOT NULL,
  data TEXT NOT NULL, created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS rig_journal_by_task ON rig_journal(task);
"""


class Journal:
    """Append-only events of a rig run."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if path.suffix not in (".sqlite", ".db"):
            path.mkdir(parents=True, exist_ok=True)
            path = path / "trajectories.sqlite"
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)

    def append(self, task: str, kind: str, data: dict[str, Any]) -> None:
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT INTO rig_journal (task, kind, data, created) VALUES (?, ?, ?, ?)",
                            (task, kind, json.dumps(data, sort_keys=True, default=repr), time.time()))

    def events(self, task: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """Events in order, each ``{"task", "kind", **data}``."""
        sql, args = "SELECT task, kind, data FROM rig_journal", []
        clauses = []
        if task is not None:
            clauses.append("task = ?")
            args.append(task)
        if kind is not None:
            clauses.append("kind = ?")
            args.append(kind)
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        rows = self.db.execute(sql + " ORDER BY seq", args)
        return [{"task": t, "kind": k, **json.loads(d)} for t, k, d in rows]

    def last_usage(self) -> dict[str, Any]:
        row = self.db.execute(
            "SELECT data FROM rig_journal WHERE kind IN ('attempt', 'task_done', 'baseline') "
            "ORDER BY seq DESC LIMIT 1").fetchone()
        return json.loads(row[0]).get("usage", {}) if row else {}

    def close(self) -> None:
        self.db.close()
