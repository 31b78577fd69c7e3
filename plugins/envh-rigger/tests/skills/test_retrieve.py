"""Retrieval by meaning with the real offline embedder, MMR diversity, the skills block."""

from __future__ import annotations

from typing import Any

import numpy as np
from envh_rigger.skills import MemoryItem, SkillBank, mmr, render_skills_block, retrieve, skills_for


def item(title: str, when: str, content: str = "Do it.") -> MemoryItem:
    return MemoryItem(title=title, when_to_use=when, content=content)


BANK_ITEMS = [
    item("Run the test suite before submitting a patch", "When fixing a bug in a Python repository"),
    item("Open a container before taking an object from it", "When an object is inside a closed cabinet"),
    item("Multiply the two largest numbers first", "When combining four numbers to reach 24"),
    item("Search the page before clicking links", "When shopping on a website for a product"),
    item("Use multiplication to get close to the target", "When an arithmetic puzzle asks for 24"),
]


def _bank(embedder: Any) -> SkillBank:
    bank = SkillBank(embedder_name=embedder.name, merge_threshold=0.97)
    assert bank.add(BANK_ITEMS, embedder)["added"] == len(BANK_ITEMS)
    return bank


def test_retrieves_by_meaning(embedder: Any) -> None:
    bank = _bank(embedder)
    (top,) = retrieve(bank, "Your task is to: put a clean mug in the coffee machine. "
                            "The mug is in cabinet 3.", embedder, k=1)
    assert top.item.title == "Open a container before taking an object from it"
    (top,) = retrieve(bank, "The test test_parse fails after my change to the parser module", embedder, k=1)
    assert top.item.title.startswith("Run the test suite")
    picks = retrieve(bank, "Target: 24. Numbers: [0] 2, [1] 3, [2] 4.", embedder, k=2, lam=1.0)
    assert {r.item.title for r in picks} == {BANK_ITEMS[2].title, BANK_ITEMS[4].title}
    assert picks[0].score >= picks[1].score


def test_mmr_trades_relevance_for_diversity() -> None:
    q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    twin = np.array([0.9, 0.436, 0.0], dtype=np.float32)
    other = np.array([0.7, 0.0, 0.714], dtype=np.float32)
    vectors = np.stack([twin, twin * 0.999 + 0.001, other])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    assert mmr(q, vectors, k=2, lam=1.0) == [0, 1]  # pure relevance: both twins
    assert mmr(q, vectors, k=2, lam=0.5) == [0, 2]  # MMR: the second slot goes elsewhere
    assert mmr(q, vectors, k=5, lam=0.5, min_score=0.8) == [0, 1]
    assert mmr(q, vectors[:0], k=3) == []


def test_block_lists_items_within_budget(embedder: Any) -> None:
    block = render_skills_block(BANK_ITEMS[:2])
    assert block.startswith("1. Run")
    assert render_skills_block(BANK_ITEMS[:1], header="Skills:").startswith("Skills:\n1. ")
    assert "1. Run the test suite before submitting a patch" in block
    assert "   When to use: When an object is inside a closed cabinet" in block
    short = render_skills_block(BANK_ITEMS, max_chars=250)
    assert "1. " in short and "3. " not in short and len(short) <= 250
    assert render_skills_block([]) == ""
    text = skills_for(_bank(embedder), "Target: 24. Numbers: 1, 3, 4, 6", embedder, k=2)
    assert text.startswith("1. ") and "2. " in text and "24" in text
