"""Read-only, paged access to the run directories ``envh ui`` was given.

Each directory is opened through SQLite's read-only URI mode (``mode=ro``), so nothing the
app does can write to a run; queries are paged with ``LIMIT``/``OFFSET`` and aggregates are
computed in SQL, so a run of 10,000 episodes is never loaded whole. Directories are named
by their index in the list given on the command line: no route takes a path, so nothing
outside those directories can be read through the app.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from envh.rollout.plan import wilson
from envh.rollout.store import COLUMNS, FILENAME, LATEST
from envh.rollout.trajectory import Trajectory, trajectory_from_json

from .charts import MetricsRun

PAGE = 50
#: episodes kept read (two: a compare page's)
RECENT = 2
#: journal events a rig page reads at most (a rig run writes a handful per round and task)
MAX_RIG_EVENTS = 20_000
#: characters of a pool spec read at most (the playground takes 100,000)
MAX_POOL_SPEC = 1_000_000
#: training runs (``metrics.jsonl`` files) a training page overlays at most, and how deep it looks
MAX_METRIC_RUNS = 24
METRIC_DEPTH = 3
#: held-out evaluation files (``eval/step-N.jsonl``) read per training run at most
MAX_EVAL_FILES = 500
#: files a run directory may show besides its store (rig plots, reports, training metrics)
_SHOWABLE = re.compile(r"^[A-Za-z0-9_.-]{1,120}\.(png|svg|md|json|jsonl)$")


class RunDirs:
    """The run directories given to ``envh ui``, each opened read-only on demand."""

    def __init__(self, dirs: Sequence[str | Path]) -> None:
        self.dirs = [Path(d).resolve() for d in dirs]
        # the last episodes read whole: paging through one, or opening its prompts, reads
        # it once (a stored row never changes; a store replaced by another is a new file)
        self._recent: OrderedDict[tuple[int, int, int, int], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def _inside(self, index: int, path: Path) -> bool:
        """``path`` is a file that resolves inside the directory (a symlink to elsewhere is not)."""
        return path.is_file() and path.resolve().is_relative_to(self.dirs[index])

    def _db(self, index: int) -> sqlite3.Connection:
        path = self.dirs[index] / FILENAME
        if not self.has_store(index):
            raise FileNotFoundError(f"{self.dirs[index]} has no {FILENAME}")
        # the path is quoted: a directory named 'sweep #3' or 'a?b' would otherwise end the
        # file name at '#'/'?' and SQLite would create that shorter name read-write. A WAL
        # store with no -wal file (its writer closed) is opened immutable: read-only mode
        # would create -wal and -shm files beside it; with a live writer they exist already
        # (and a rollback journal means a writer holds it: read-only mode waits for its lock)
        live = Path(f"{path}-wal").exists() or Path(f"{path}-journal").exists()  # a writer at work
        db = sqlite3.connect(f"file:{quote(str(path))}?mode=ro{'' if live else '&immutable=1'}", uri=True, timeout=10)
        db.execute("PRAGMA query_only = ON")
        return db

    def has_store(self, index: int) -> bool:
        return self._inside(index, self.dirs[index] / FILENAME)

    def runs(self, index: int) -> list[dict[str, Any]]:
        """Every run in a directory with its summary (success and its Wilson 95% interval,
        errors by class), computed in SQL."""
        if not self.has_store(index):
            return []
        db = self._db(index)
        try:
            out = []
            for run_id, created, manifest in db.execute("SELECT run_id, created, manifest FROM runs ORDER BY created"):
                n, wins, steps = db.execute(
                    f"SELECT COUNT(*), COALESCE(SUM(success), 0), COALESCE(AVG(steps), 0) FROM trajectories "
                    f"WHERE run_id = ? AND kind = 'episode' AND {LATEST}", (run_id,)).fetchone()
                errs = dict(db.execute(
                    f"SELECT error_class, COUNT(*) FROM trajectories WHERE run_id = ? AND kind = 'episode' "
                    f"AND error_class IS NOT NULL AND {LATEST} GROUP BY error_class", (run_id,)).fetchall())
                # a store is data: success flags other than 0/1 or a manifest that is not the
                # writer's must not take the runs page (every directory on it) down
                wins = min(max(int(wins), 0), int(n))
                low, high = wilson(wins, int(n))
                try:
                    data = json.loads(manifest)
                except (TypeError, ValueError):
                    data = None
                config = data.get("config") if isinstance(data, dict) else None
                out.append({"run_id": run_id, "created": created, "episodes": n, "successes": wins,
                            "success_rate": wins / n if n else 0.0, "wilson": (low, high),
                            "mean_steps": steps, "errors": errs,
                            "policy": config.get("policy") if isinstance(config, dict) else None})
            return out
        finally:
            db.close()

    def episodes(self, index: int, run_id: str, *, page: int = 0, outcome: str | None = None,
                 task: str | None = None, spec: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """One page of a run's final episodes (index columns only) and the total count."""
        where = ["run_id = ?", "kind = 'episode'", LATEST]
        args: list[Any] = [run_id]
        if outcome == "success":
            where.append("success = 1")
        elif outcome == "failure":
            where.append("(success = 0 OR success IS NULL) AND error_class IS NULL")
        elif outcome == "error":
            where.append("error_class IS NOT NULL")
        if task:
            where.append("(task = ? OR instance_id = ?)")
            args += [task, task]
        if spec:
            where.append("spec_id LIKE ?")
            args.append(spec + "%")
        clause = " AND ".join(where)
        db = self._db(index)
        try:
            (total,) = db.execute(f"SELECT COUNT(*) FROM trajectories WHERE {clause}", args).fetchone()
            cur = db.execute(f"SELECT seq, {', '.join(COLUMNS)} FROM trajectories WHERE {clause} "
                             f"ORDER BY seq LIMIT ? OFFSET ?", [*args, PAGE, max(page, 0) * PAGE])
            return [dict(zip(("seq", *COLUMNS), row)) for row in cur], int(total)
        finally:
            db.close()

    def run_ids(self, index: int) -> list[str]:
        """The runs in a directory's store, oldest first (none without a store)."""
        if not self.has_store(index):
            return []
        db = self._db(index)
        try:
            return [str(r) for (r,) in db.execute("SELECT run_id FROM runs ORDER BY created")]
        finally:
            db.close()

    def same_task(self, index: int, seq: int, other: int, run_id: str) -> int | None:
        """The final episode of run ``run_id`` (in directory ``other``) on the task of
        episode ``seq`` (in ``index``): one with the same seed first; ``None`` when the run
        has none on that task."""
        db = self._db(index)
        try:
            row = db.execute("SELECT task, seed FROM trajectories WHERE seq = ?", (seq,)).fetchone()
        finally:
            db.close()
        if row is None:
            raise LookupError(f"no episode {seq}")
        db = self._db(other)
        try:
            found = db.execute(f"SELECT seq FROM trajectories WHERE run_id = ? AND kind = 'episode' AND {LATEST} "
                               "AND task IS ? ORDER BY seed IS ? DESC, seq LIMIT 1", (run_id, row[0], row[1])).fetchone()
        finally:
            db.close()
        return None if found is None else int(found[0])

    def data(self, index: int, seq: int) -> dict[str, Any] | None:
        """An episode's stored record as plain JSON data (not built into records: a page
        structures only the steps it shows); ``None`` when there is no such episode. The
        last ``RECENT`` are kept: callers must not change what they are given."""
        if not self.has_store(index):
            raise FileNotFoundError(f"{self.dirs[index]} has no {FILENAME}")
        stat = (self.dirs[index] / FILENAME).stat()
        key = (index, seq, stat.st_dev, stat.st_ino)
        with self._lock:
            if key in self._recent:
                self._recent.move_to_end(key)
                return self._recent[key]
        db = self._db(index)
        try:
            row = db.execute("SELECT data FROM trajectories WHERE seq = ?", (seq,)).fetchone()
        finally:
            db.close()
        if row is None:
            return None
        try:
            data = json.loads(row[0])
        except (TypeError, ValueError) as exc:
            raise LookupError(f"episode {seq} is not a readable trajectory ({type(exc).__name__}: {exc})") from exc
        if not isinstance(data, dict):
            raise LookupError(f"episode {seq} is not a readable trajectory (not a JSON object)")
        with self._lock:
            self._recent[key] = data
            while len(self._recent) > RECENT:
                self._recent.popitem(last=False)
        return data

    def trajectory(self, index: int, seq: int) -> Trajectory | None:
        db = self._db(index)
        try:
            row = db.execute("SELECT data FROM trajectories WHERE seq = ?", (seq,)).fetchone()
        finally:
            db.close()
        if row is None:
            return None
        try:
            return trajectory_from_json(row[0])
        except Exception as exc:  # noqa: BLE001 - cattrs' validation groups too: a damaged row is a clear 404
            raise LookupError(f"episode {seq} is not a readable trajectory ({type(exc).__name__}: {exc})") from exc

    def file(self, index: int, name: str) -> Path | None:
        """A report file directly inside a run directory (``report.md``, plots, metrics),
        never a path: the name is a plain file name, resolved and checked to stay inside."""
        if not _SHOWABLE.match(name):
            return None
        base = self.dirs[index]
        path = (base / name).resolve()
        if path.parent != base or not path.is_file():
            return None
        return path

    def metrics_runs(self, index: int) -> list[MetricsRun]:
        """The training runs in a directory: its own ``metrics.jsonl`` and those in its
        sub-folders up to ``METRIC_DEPTH`` levels down (an ``envh experiment`` folder keeps
        one per arm and seed), each with held-out success per step from the
        ``eval/step-N.jsonl`` files beside it. A file that resolves outside is skipped."""
        base = self.dirs[index]
        found = [base / "metrics.jsonl"] + sorted(
            p for depth in range(1, METRIC_DEPTH + 1) for p in base.glob("/".join(["*"] * depth) + "/metrics.jsonl"))
        # an experiment's untrained model is evaluated once, in baseline/: every run's step 0
        shared = self._heldout(index, base / "baseline").get(0)
        runs: list[MetricsRun] = []
        for path in found:
            if len(runs) == MAX_METRIC_RUNS:
                break
            if self._inside(index, path):
                heldout = self._heldout(index, path.parent)
                if shared is not None and 0 not in heldout and heldout:
                    heldout = {0: shared, **heldout}
                label = path.parent.relative_to(base).as_posix()
                runs.append(MetricsRun(label=label, rows=metric_rows(path), heldout=heldout))
        return runs

    def _heldout(self, index: int, folder: Path) -> dict[int, float]:
        """Held-out success rate per eval step: the mean of the rows' ``success``."""
        out: dict[int, float] = {}
        files = sorted(folder.glob("eval/step-*.jsonl"))[:MAX_EVAL_FILES]
        for path in files:
            if not path.stem[5:].isdigit() or not self._inside(index, path):
                continue
            rows = metric_rows(path)
            flags = [bool(r["success"]) for r in rows if isinstance(r.get("success"), (bool, int, float))]
            if flags:
                out[int(path.stem[5:])] = sum(flags) / len(flags)
        return out

    def pool(self, index: int) -> list[dict[str, Any]]:
        """The harness pool of an ``envh rig`` directory: each accepted spec with its entry
        (task, target, rationale, stats) as the rigger wrote it."""
        base = self.dirs[index] / "pool"
        out = []
        for path in sorted((base / "specs").glob("*.json")) if (base / "specs").is_dir() else []:
            if not re.fullmatch(r"[0-9a-f]{8,64}\.json", path.name) or not self._inside(index, path):
                continue
            entry_path = base / "entries" / path.name
            try:
                entry = json.loads(entry_path.read_text()) if self._inside(index, entry_path) else {}
            except ValueError:
                entry = {}
            out.append({"spec_id": path.stem, "entry": entry})
        return out

    def pool_spec(self, index: int, spec_id: str) -> str | None:
        """One accepted spec's text, by its content id (never by path)."""
        if not re.fullmatch(r"[0-9a-f]{8,64}", spec_id):
            return None
        path = self.dirs[index] / "pool" / "specs" / f"{spec_id}.json"
        if not self._inside(index, path):
            return None
        with path.open(encoding="utf-8", errors="replace") as f:
            return f.read(MAX_POOL_SPEC + 1)  # a longer one is refused: no need to hold a huge file

    def rig_rounds(self, index: int) -> list[dict[str, Any]]:
        """The designer loop's rounds per task, from the ``rig_journal`` table ``envh rig``
        keeps in its store (one JSON event per row: ``baseline``, ``attempt``,
        ``accepted``); ``[]`` when the directory is not a rig run. Each task:
        ``{"task", "baseline", "attempts", "accepted"}`` with the events' data as written."""
        if not self.has_store(index):
            return []
        db = self._db(index)
        try:
            if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rig_journal'").fetchone() is None:
                return []
            rows = db.execute("SELECT task, kind, data FROM rig_journal WHERE kind IN ('baseline', 'attempt', "
                              "'accepted') ORDER BY seq LIMIT ?", (MAX_RIG_EVENTS,)).fetchall()
        finally:
            db.close()
        tasks: dict[str, dict[str, Any]] = {}
        for task, kind, data in rows:
            try:
                event = json.loads(data)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            t = tasks.setdefault(str(task), {"task": str(task), "baseline": None, "attempts": {}, "accepted": []})
            if kind == "baseline" and t["baseline"] is None:
                t["baseline"] = event
            elif kind == "attempt" and isinstance(event.get("attempt"), dict):
                a = event["attempt"]  # a resumed run may record a round again: the last one stands
                t["attempts"][(str(a.get("round")), str(a.get("spec_id")))] = a
            elif kind == "accepted":
                t["accepted"].append(str(event.get("spec_id", "")))
        return [{**t, "attempts": list(t["attempts"].values())} for t in tasks.values()]

    def listing(self, index: int) -> list[str]:
        base = self.dirs[index]
        if not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if p.is_file() and _SHOWABLE.match(p.name)
                      and p.resolve().parent == base)


def metric_rows(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, one a line: a line the writer tore, or a number past
    Python's digit limit, is skipped; an integer past a float's range is kept as text."""
    rows = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                rows.append({k: str(v) if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**1023 else v
                             for k, v in row.items()})
    return rows
