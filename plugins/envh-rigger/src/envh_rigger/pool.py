"""The harness pool: accepted env specs, content-addressed, with why and how well.

Layout under ``OUT/pool``::

    specs/<spec_id>.json      the env spec itself (``envh run`` and trainers load it)
    entries/<spec_id>.json    task, target, diagnosis, rationale, stats, provenance
    rejected/<n>-<id>.json    archived rejected candidates with their reasons

Files are written atomically (temp file, then rename), so a killed run leaves whole
entries or none.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=repr))
    os.replace(tmp, path)


class HarnessPool:
    """Read and write a pool directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @classmethod
    def open(cls, directory: str | Path) -> HarnessPool:
        """``DIR`` may be a rig output directory or its ``pool`` folder."""
        d = Path(directory)
        return cls(d / "pool" if (d / "pool").is_dir() else d)

    def spec_path(self, spec_id: str) -> Path:
        return self.root / "specs" / f"{spec_id}.json"

    def add(self, spec_id: str, spec: dict[str, Any], entry: dict[str, Any]) -> Path:
        """Store an accepted spec and its metadata; returns the spec's path."""
        path = self.spec_path(spec_id)
        _write(path, spec)
        _write(self.root / "entries" / f"{spec_id}.json",
               {**entry, "spec_id": spec_id, "spec_path": str(path)})
        return path

    def reject(self, entry: dict[str, Any]) -> None:
        """Archive a rejected candidate with its reason."""
        n = len(list((self.root / "rejected").glob("*.json"))) if (self.root / "rejected").is_dir() else 0
        name = f"{n:04d}-{(entry.get('spec_id') or 'invalid')[:12]}.json"
        _write(self.root / "rejected" / name, entry)

    def _read(self, folder: str) -> list[dict[str, Any]]:
        d = self.root / folder
        if not d.is_dir():
            return []
        return [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))]

    def entries(self) -> list[dict[str, Any]]:
        """Accepted harnesses, oldest first."""
        return sorted(self._read("entries"), key=lambda e: e.get("provenance", {}).get("created", 0))

    def rejected(self) -> list[dict[str, Any]]:
        return self._read("rejected")

    def for_task(self, task: str) -> dict[str, Any] | None:
        """The newest accepted entry for ``task`` (for ``--base-pool`` and co-evolution)."""
        matches = [e for e in self.entries() if e.get("task") == task]
        return matches[-1] if matches else None

    def load_spec(self, spec_id: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.spec_path(spec_id).read_text())
        return data
