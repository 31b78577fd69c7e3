"""``skills:POLICY``: any chat policy with skills retrieved from a bank, once per episode.

At ``start`` the wrapper retrieves the top-k items (MMR) for the episode's first
observation — the task as the policy first reads it, which is what ReasoningBank queries
with — and hands the rendered block to the inner policy's ``skills`` option, so every
step of the episode sees the same block. The policy id names the bank's digest and k,
so a trajectory records which memory shaped it.

Options are plain JSON (they cross process boundaries): ``bank`` (a bank directory),
``k``, ``lam``, ``min_score``, ``embedder`` (default: the one the bank was built with),
``embedder_base_url``, ``embedder_api_key_env``; every other option goes to the inner
policy (``skills:openai:MODEL`` with ``base_url=...``).
"""

from __future__ import annotations

from typing import Any

from envh import Observation, TaskRef, ToolSpec, errors

from .bank import SkillBank
from .embed import make_embedder
from .retrieval import DEFAULT_K, DEFAULT_LAMBDA, Retrieved, render_skills_block, retrieve


class SkilledPolicy:
    """Wraps the policy named by ``arg`` (e.g. ``openai:gpt-4o-mini``, ``local:smollm2``)."""

    def __init__(self, arg: str | None = None, *, bank: str | None = None, k: int = DEFAULT_K,
                 lam: float = DEFAULT_LAMBDA, min_score: float | None = None, embedder: str | None = None,
                 embedder_base_url: str | None = None, embedder_api_key_env: str = "OPENAI_API_KEY",
                 max_chars: int = 2000, **inner_options: Any) -> None:
        if not arg:
            raise errors.PolicyError("The skills policy wraps another one: use 'skills:POLICY', "
                                     "e.g. skills:openai:gpt-4o-mini, with the option bank=DIR")
        if not bank:
            raise errors.PolicyError("The skills policy needs bank=DIR (from `envh skills induce`)")
        from envh.rollout import resolve_policy

        self.bank = SkillBank.load(bank)
        self.embedder = make_embedder(embedder or self.bank.embedder_name, base_url=embedder_base_url,
                                      api_key_env=embedder_api_key_env)
        self.k, self.lam, self.min_score, self.max_chars = k, lam, min_score, max_chars
        self.inner = resolve_policy(arg, **inner_options)
        if not hasattr(self.inner, "skills"):
            self.inner.close()
            raise errors.PolicyError(f"Policy {arg!r} has no skills block; wrap a chat policy "
                                     "(openai:MODEL, local:MODEL) instead")
        self.policy_id = f"skills[{self.bank.digest[:12]},k={k}]+{self.inner.policy_id}"
        self.retrieved: list[Retrieved] = []

    def start(self, *, task: TaskRef | None, tools: list[ToolSpec], observation: Observation,
              seed: int | None = None) -> None:
        self.retrieved = retrieve(self.bank, observation.text, self.embedder, k=self.k, lam=self.lam,
                                  min_score=self.min_score)
        self.inner.skills = render_skills_block(self.retrieved, max_chars=self.max_chars) or None
        self.inner.start(task=task, tools=tools, observation=observation, seed=seed)

    def act(self, observation: Observation, tools: list[ToolSpec]) -> Any:
        return self.inner.act(observation, tools)

    def close(self) -> None:
        self.inner.close()
        close = getattr(self.embedder, "close", None)
        if callable(close):
            close()
