"""The bank on disk and near-duplicate merging, with the real offline embedder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from envh_rigger.skills import MemoryItem, Provenance, SkillBank, SkillError, dedupe
from envh_rigger.skills.bank import ITEMS, META, VECTORS


def item(title: str, when: str, content: str = "x", task: str = "t/1") -> MemoryItem:
    prov = Provenance(source="baseline", method="contrast", inducer="rule", task=task, spec_id="s",
                      trajectories=(f"run/{task}#0", f"run/{task}#1"))
    return MemoryItem(title=title, when_to_use=when, content=content, provenance=(prov,))


ITEMS_ABOUT = [
    item("Run the tests before submitting a patch", "When fixing a bug in a Python repository"),
    item("Open a container before taking an object from it", "When an object is inside a closed cabinet"),
    item("Multiply the two largest numbers first", "When combining numbers to reach 24"),
]


def test_round_trip_keeps_items_vectors_and_provenance(tmp_path: Path, embedder: Any) -> None:
    bank = SkillBank(embedder_name=embedder.name)
    assert bank.add(ITEMS_ABOUT, embedder) == {"added": 3, "merged": 0}
    bank.info["note"] = "built in a test"
    bank.save(tmp_path / "bank")
    loaded = SkillBank.load(tmp_path / "bank")
    assert loaded.items == bank.items
    assert loaded.embedder_name == embedder.name and loaded.info == {"note": "built in a test"}
    np.testing.assert_array_equal(loaded.vectors, bank.vectors)
    assert loaded.vectors.shape == (3, 2, 384) and loaded.vectors.dtype == np.float32
    # saving again leaves no temporary files behind
    loaded.save(tmp_path / "bank")
    assert sorted(p.name for p in (tmp_path / "bank").iterdir()) == sorted([ITEMS, VECTORS, META])


def test_empty_bank_round_trips(tmp_path: Path, embedder: Any) -> None:
    SkillBank(embedder_name=embedder.name).save(tmp_path / "b")
    assert len(SkillBank.load(tmp_path / "b")) == 0


def test_edited_or_torn_bank_fails_loudly(tmp_path: Path, embedder: Any) -> None:
    bank = SkillBank(embedder_name=embedder.name)
    bank.add(ITEMS_ABOUT, embedder)
    root = bank.save(tmp_path / "bank")
    lines = (root / ITEMS).read_text().splitlines()
    (root / ITEMS).write_text("\n".join(lines[:2]) + "\n")  # as if killed between files
    with pytest.raises(SkillError, match="inconsistent"):
        SkillBank.load(root)
    with pytest.raises(SkillError, match="No skills bank"):
        SkillBank.load(tmp_path / "nowhere")


def test_bad_item_line_names_the_field(tmp_path: Path, embedder: Any) -> None:
    bank = SkillBank(embedder_name=embedder.name)
    bank.add(ITEMS_ABOUT[:1], embedder)
    root = bank.save(tmp_path / "bank")
    data = json.loads((root / ITEMS).read_text())
    data["tittle"] = data.pop("title")
    (root / ITEMS).write_text(json.dumps(data) + "\n")
    meta = json.loads((root / META).read_text())
    import hashlib

    meta["digest"] = hashlib.sha256((root / ITEMS).read_bytes() + (root / VECTORS).read_bytes()).hexdigest()
    (root / META).write_text(json.dumps(meta))
    with pytest.raises(SkillError, match=r"items.jsonl:1"):
        SkillBank.load(root)


def test_near_duplicates_merge_and_keep_every_source(embedder: Any) -> None:
    a = item("Open the container before taking an object from it",
             "When the object you need is inside a closed cabinet or drawer", task="house/1")
    b = item("Open a container before you take an object out of it",
             "When the object you need is in a closed drawer or cabinet", task="house/2")
    c = item("Run the tests before submitting", "When fixing a bug in a repository", task="swe/1")
    merged = dedupe([a, b, c], embedder)
    assert [m.title for m in merged] == [a.title, c.title]
    assert merged[0].support == 2
    assert [p.task for p in merged[0].provenance] == ["house/1", "house/2"]
    # an exact duplicate of an item already merged adds no provenance twice
    again = dedupe([a, a], embedder)
    assert len(again) == 1 and again[0].support == 1


def test_threshold_decides_what_counts_as_a_duplicate(embedder: Any) -> None:
    a = item("Multiply the two largest numbers first", "When combining numbers to reach 24")
    b = item("Add the smallest numbers first", "When combining numbers to reach 24")
    assert len(dedupe([a, b], embedder, threshold=0.99)) == 2
    assert len(dedupe([a, b], embedder, threshold=0.3)) == 1


def test_bank_refuses_another_embedders_vectors(embedder: Any) -> None:
    bank = SkillBank(embedder_name="openai:text-embedding-3-small")
    with pytest.raises(SkillError, match="same embedder"):
        bank.add(ITEMS_ABOUT, embedder)
