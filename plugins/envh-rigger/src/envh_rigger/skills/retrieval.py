"""Retrieval (top-k with maximal marginal relevance) and the skills block for prompts.

MMR picks, one at a time, the item maximising
``lam * sim(query, item key) - (1 - lam) * max sim(item lesson, lessons already picked)``,
so k slots are not spent on k phrasings of one lesson.
"""

from __future__ import annotations

import attrs
import numpy as np

from .bank import SkillBank
from .embed import Embedder
from .records import MemoryItem

DEFAULT_K = 3
DEFAULT_LAMBDA = 0.7


@attrs.frozen(kw_only=True)
class Retrieved:
    """One retrieved item with its similarity to the query."""

    item: MemoryItem
    score: float


def mmr(query: np.ndarray, vectors: np.ndarray, k: int, lam: float = DEFAULT_LAMBDA,
        min_score: float | None = None, diversity: np.ndarray | None = None) -> list[int]:
    """Row indices of ``vectors`` chosen by MMR for unit vector ``query``.

    Redundancy is measured on ``diversity`` (same rows; default ``vectors``): the bank
    passes the lesson vectors, so two lessons for the same kind of task both make it.
    Rows whose similarity to the query is below ``min_score`` are never picked.
    """
    if k <= 0 or vectors.size == 0:
        return []
    other = vectors if diversity is None else diversity
    relevance = vectors @ query
    candidates = [i for i in range(len(relevance)) if min_score is None or relevance[i] >= min_score]
    picked: list[int] = []
    while candidates and len(picked) < k:
        if picked:
            redundancy = (other[candidates] @ other[picked].T).max(axis=1)
        else:
            redundancy = np.zeros(len(candidates), dtype=np.float32)
        scores = lam * relevance[candidates] - (1.0 - lam) * redundancy
        best = candidates[int(np.argmax(scores))]
        picked.append(best)
        candidates.remove(best)
    return picked


def retrieve(bank: SkillBank, query: str, embedder: Embedder, k: int = DEFAULT_K,
             lam: float = DEFAULT_LAMBDA, min_score: float | None = None) -> list[Retrieved]:
    """The ``k`` items of ``bank`` most useful for ``query`` (a task's goal or first
    observation), relevant and mutually diverse, in pick order."""
    if not len(bank):
        return []
    bank._check_embedder(embedder)
    qvec = embedder.embed([query])[0]
    keys = bank.keys
    relevance = keys @ qvec
    return [Retrieved(item=bank.items[i], score=float(relevance[i]))
            for i in mmr(qvec, keys, k, lam, min_score, diversity=bank.lessons)]


def render_skills_block(items: list[MemoryItem] | list[Retrieved], *, max_chars: int = 2000,
                        header: str = "") -> str:
    """Items as the text of a policy's skills block ('' when none).

    Chat policies put it under their own "Skills from earlier episodes:" heading, so
    there is no header unless one is asked for. Each item is one numbered entry: title,
    when it applies, the lesson; entries that would pass ``max_chars`` are left out
    whole, so the block never ends mid-sentence.
    """
    plain = [r.item if isinstance(r, Retrieved) else r for r in items]
    if not plain:
        return ""
    out = [header] if header else []
    used = len(header)
    for n, item in enumerate(plain, start=1):
        entry = (f"{n}. {item.title.strip()}\n"
                 f"   When to use: {item.when_to_use.strip()}\n"
                 f"   {' '.join(item.content.split())}")
        if used + len(entry) + 1 > max_chars and n > 1:
            break
        out.append(entry)
        used += len(entry) + 1
    return "\n".join(out)


def skills_for(bank: SkillBank, query: str, embedder: Embedder, k: int = DEFAULT_K,
               **options: float) -> str:
    """Retrieve and render in one call: what a runner puts in a policy's ``skills``."""
    return render_skills_block(retrieve(bank, query, embedder, k, **options))  # type: ignore[arg-type]
