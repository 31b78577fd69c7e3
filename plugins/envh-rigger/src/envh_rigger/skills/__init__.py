"""Skills, ReasoningBank-style: memory items induced from a policy's episodes, kept in a
bank on disk, retrieved by meaning (MMR) into the policy's system prompt.

Typical use::

    from envh_rigger.skills import SkillBank, make_embedder, skills_for
    bank = SkillBank.load("runs/rig/skills")
    block = skills_for(bank, first_observation.text, make_embedder())
    # pass ``block`` as the policy's skills option

Nothing heavy is imported here: the offline embedder loads its model on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> submodule: resolved on first access, so `envh --help` never imports numpy.
_EXPORTS = {
    "SkillBank": "bank", "dedupe": "bank", "merge_items": "bank", "build_bank": "build",
    "Embedder": "embed", "MiniLMEmbedder": "embed", "OpenAIEmbedder": "embed", "make_embedder": "embed",
    "read_episodes": "episodes", "view_of": "episodes", "InductionCase": "induce", "Inducer": "induce",
    "cases_from": "induce", "induce_all": "induce", "make_inducer": "induce", "SkilledPolicy": "policy",
    "EpisodeView": "records", "MemoryItem": "records", "Provenance": "records", "SkillError": "records",
    "StepView": "records", "Retrieved": "retrieval", "mmr": "retrieval", "render_skills_block": "retrieval",
    "retrieve": "retrieval", "skills_for": "retrieval",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
