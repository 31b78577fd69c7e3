"""The skills bank on disk: ``items.jsonl`` + ``embeddings.npy`` + ``meta.json``.

``embeddings.npy`` has shape ``(n, 2, dim)``: for item i, ``[i, 0]`` embeds its
``key_text()`` (what retrieval matches) and ``[i, 1]`` its ``lesson_text()`` (what dedupe
compares), so a lesson learned on two tasks merges even though its keys differ. Each file is written to a
temporary sibling, fsynced and renamed into place, and ``meta.json`` (written last) names
the item count and a digest of both files: a bank killed mid-save either still loads as
the previous version or fails loudly on load, never silently mixing rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from .embed import Embedder
from .records import MemoryItem, SkillError, item_from_data, item_to_data

ITEMS, VECTORS, META = "items.jsonl", "embeddings.npy", "meta.json"
FORMAT = 1
DEFAULT_MERGE_THRESHOLD = 0.9


def _atomic_write(path: Path, payload: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _npy_bytes(vectors: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, vectors.astype(np.float32), allow_pickle=False)
    return buf.getvalue()


def merge_items(keep: MemoryItem, other: MemoryItem) -> MemoryItem:
    """``keep``'s text with both items' provenance (deduplicated, order kept)."""
    seen = list(keep.provenance)
    seen.extend(p for p in other.provenance if p not in seen)
    return attrs.evolve(keep, provenance=tuple(seen))


@attrs.define
class SkillBank:
    """Memory items and their embeddings, in memory; ``save``/``load`` move it to disk.

    ``add`` embeds new items and merges each into an existing item whose lesson has a
    cosine similarity of at least ``merge_threshold`` (near-duplicates strengthen one
    item instead of crowding retrieval).
    """

    embedder_name: str
    items: list[MemoryItem] = attrs.field(factory=list)
    vectors: np.ndarray = attrs.field(factory=lambda: np.zeros((0, 2, 0), dtype=np.float32))
    merge_threshold: float = DEFAULT_MERGE_THRESHOLD
    info: dict[str, Any] = attrs.field(factory=dict)
    digest: str = ""  # of the saved files; names the bank in policy ids

    def __len__(self) -> int:
        return len(self.items)

    @property
    def keys(self) -> np.ndarray:
        """``(n, dim)`` unit vectors retrieval compares a query with."""
        return self.vectors[:, 0, :]

    @property
    def lessons(self) -> np.ndarray:
        """``(n, dim)`` unit vectors dedupe compares."""
        return self.vectors[:, 1, :]

    def add(self, new: Iterable[MemoryItem], embedder: Embedder) -> dict[str, int]:
        """Embed and insert ``new``; returns counts of ``added`` and ``merged`` items."""
        self._check_embedder(embedder)
        batch = list(new)
        if not batch:
            return {"added": 0, "merged": 0}
        flat = embedder.embed([t for it in batch for t in (it.key_text(), it.lesson_text())])
        vecs = flat.reshape(len(batch), 2, flat.shape[1])
        added = merged = 0
        for item, vec in zip(batch, vecs, strict=True):
            if len(self.items):
                sims = self.lessons @ vec[1]
                best = int(np.argmax(sims))
                if float(sims[best]) >= self.merge_threshold:
                    self.items[best] = merge_items(self.items[best], item)
                    merged += 1
                    continue
            self.items.append(item)
            self.vectors = vec[None] if not self.vectors.size else np.concatenate([self.vectors, vec[None]])
            added += 1
        return {"added": added, "merged": merged}

    def _check_embedder(self, embedder: Embedder) -> None:
        if embedder.name != self.embedder_name:
            raise SkillError(
                f"This bank was embedded with {self.embedder_name!r}, not {embedder.name!r}: "
                "use the same embedder (--embedder) or build a new bank")

    def save(self, path: str | Path) -> Path:
        """Write the bank into directory ``path`` (created if needed), atomically per file."""
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(item_to_data(it), ensure_ascii=False, sort_keys=True) + "\n"
                        for it in self.items).encode()
        npy = _npy_bytes(self.vectors if self.items else np.zeros((0, 2, 0), dtype=np.float32))
        _atomic_write(root / ITEMS, lines)
        _atomic_write(root / VECTORS, npy)
        self.digest = hashlib.sha256(lines + npy).hexdigest()
        meta = {"format": FORMAT, "embedder": self.embedder_name, "count": len(self.items),
                "dim": int(self.vectors.shape[2]) if self.items else 0,
                "merge_threshold": self.merge_threshold, "digest": self.digest, "info": self.info}
        _atomic_write(root / META, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())
        return root

    @classmethod
    def load(cls, path: str | Path) -> SkillBank:
        """Read a bank written by ``save``; a torn or edited bank is a ``SkillError``."""
        root = Path(path)
        if not (root / META).is_file():
            raise SkillError(f"No skills bank at {root}: {META} is missing "
                             "(build one with `envh skills induce RUN_DIR --out BANK`)")
        meta = json.loads((root / META).read_text())
        if meta.get("format") != FORMAT:
            raise SkillError(f"Skills bank {root} has format {meta.get('format')!r}; this envh reads {FORMAT}")
        lines, npy = (root / ITEMS).read_bytes(), (root / VECTORS).read_bytes()
        if hashlib.sha256(lines + npy).hexdigest() != meta["digest"]:
            raise SkillError(f"Skills bank {root} is inconsistent ({ITEMS} / {VECTORS} do not match "
                             f"{META}): it was edited or a save was interrupted; rebuild it")
        items = [item_from_data(json.loads(line), where=f"{ITEMS}:{n}")
                 for n, line in enumerate(lines.decode().splitlines(), start=1) if line.strip()]
        vectors = np.load(root / VECTORS, allow_pickle=False).astype(np.float32)
        if len(items) != meta["count"] or vectors.ndim != 3 or (items and vectors.shape[:2] != (len(items), 2)):
            raise SkillError(f"Skills bank {root}: {len(items)} items but vectors of shape {vectors.shape}")
        return cls(embedder_name=meta["embedder"], items=items, vectors=vectors,
                   merge_threshold=float(meta.get("merge_threshold", DEFAULT_MERGE_THRESHOLD)),
                   info=dict(meta.get("info") or {}), digest=meta["digest"])


def dedupe(items: list[MemoryItem], embedder: Embedder,
           threshold: float = DEFAULT_MERGE_THRESHOLD) -> list[MemoryItem]:
    """Merge near-duplicates within ``items`` (first occurrence keeps its text)."""
    bank = SkillBank(embedder_name=embedder.name, merge_threshold=threshold)
    bank.add(items, embedder)
    return bank.items
