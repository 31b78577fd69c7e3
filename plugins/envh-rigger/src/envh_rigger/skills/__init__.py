"""Skills, ReasoningBank-style: memory items induced from a policy's episodes, kept in a
bank on disk, retrieved by meaning (MMR) into the policy's system prompt.

Typical use::

    from envh_rigger.skills import SkillBank, make_embedder, skills_for
    bank = SkillBank.load("runs/rig/skills")
    block = skills_for(bank, first_observation.text, make_embedder())
    # pass ``block`` as the policy's skills option

Nothing heavy is imported here: the offline embedder loads its model on first use.
"""

from .bank import SkillBank, dedupe, merge_items
from .build import build_bank
from .embed import Embedder, MiniLMEmbedder, OpenAIEmbedder, make_embedder
from .episodes import read_episodes, view_of
from .induce import InductionCase, Inducer, cases_from, induce_all, make_inducer
from .records import EpisodeView, MemoryItem, Provenance, SkillError, StepView
from .retrieve import Retrieved, mmr, render_skills_block, retrieve, skills_for

__all__ = [
    "Embedder", "EpisodeView", "InductionCase", "Inducer", "MemoryItem", "MiniLMEmbedder",
    "OpenAIEmbedder", "Provenance", "Retrieved", "SkillBank", "SkillError", "StepView", "build_bank",
    "cases_from", "dedupe", "induce_all", "make_embedder", "make_inducer", "merge_items", "mmr",
    "read_episodes", "render_skills_block", "retrieve", "skills_for", "view_of",
]
