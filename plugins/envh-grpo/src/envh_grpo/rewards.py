"""The cost-aware episode reward, term by term (EvoHarness-RL):

    R = 10·solved + λ_eff·max(0, 1 − |τ|/T_max)·solved + λ_div(u)·R_div
        − λ_spam·min(R_spam, 10) − λ_inv·R_inv

* ``solved`` is the innermost bridge's verdict (never a component's; see ``rollout``);
* ``|τ|`` is the number of policy turns; the efficiency bonus exists only when solved;
* ``R_div`` is the share of turns that took a new valid action (distinct valid actions /
  turns: 1.0 when no action repeats and every reply parsed; invalid replies are not actions);
  its weight is cosine-annealed from ``div_start`` to ``div_end`` over ``anneal_epochs``;
* ``R_spam`` counts degenerate repetition: turns whose reply repeats the previous turn's
  reply token for token, capped at ``spam_cap``;
* ``R_inv`` counts invalid turns: replies that do not parse as an action, or actions the
  environment answered with an error.

Pure Python (no torch): every term is returned, so each one is logged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs


@attrs.frozen(kw_only=True)
class RewardConfig:
    """Weights of the cost-aware reward; the defaults are EvoHarness-RL's."""

    solved: float = 10.0
    efficiency: float = 1.0
    t_max: int = 70
    div_start: float = 0.5
    div_end: float = 0.0
    anneal_epochs: int = 150
    spam: float = 0.1
    spam_cap: float = 10.0
    invalid: float = 0.1

    def __attrs_post_init__(self) -> None:
        if self.t_max <= 0:
            raise ValueError(f"reward.t_max must be > 0, got {self.t_max}")
        if self.anneal_epochs <= 0:
            raise ValueError(f"reward.anneal_epochs must be > 0, got {self.anneal_epochs}")
        if self.spam_cap < 0:
            raise ValueError(f"reward.spam_cap must be >= 0, got {self.spam_cap}")


@attrs.frozen(kw_only=True)
class EpisodeFacts:
    """What the reward needs to know about an episode."""

    solved: bool
    turns: int
    actions: tuple[str, ...] = ()  # the valid actions taken, in order
    replies: tuple[tuple[int, ...], ...] = ()
    invalid: int = 0


@attrs.frozen(kw_only=True)
class RewardTerms:
    """Each term of R (already weighted) and their sum."""

    solved: float
    efficiency: float
    diversity: float
    spam: float
    invalid: float
    total: float
    div_weight: float
    raw_diversity: float
    raw_spam: float
    raw_invalid: float


def div_weight(config: RewardConfig, epoch: int) -> float:
    """λ_div(u): cosine from ``div_start`` at u = 0 to ``div_end`` at u ≥ U."""
    u = min(max(epoch, 0), config.anneal_epochs) / config.anneal_epochs
    return config.div_end + (config.div_start - config.div_end) * 0.5 * (1.0 + math.cos(math.pi * u))


def diversity(actions: Sequence[str], turns: int) -> float:
    """Distinct valid actions per turn (0.0 for an episode without turns)."""
    return min(len(set(actions)), turns) / turns if turns > 0 else 0.0


def spam_count(replies: Sequence[Sequence[int]]) -> int:
    """Turns whose reply repeats the previous turn's reply exactly."""
    return sum(1 for a, b in zip(replies, replies[1:]) if tuple(a) == tuple(b))


def cost_aware(facts: EpisodeFacts, config: RewardConfig, epoch: int) -> RewardTerms:
    """The reward of one episode at training epoch ``epoch``, term by term."""
    solved = 1.0 if facts.solved else 0.0
    eff = max(0.0, 1.0 - facts.turns / config.t_max) * solved
    lam_div = div_weight(config, epoch)
    r_div = diversity(facts.actions, facts.turns)
    r_spam = float(spam_count(facts.replies))
    terms = {
        "solved": config.solved * solved,
        "efficiency": config.efficiency * eff,
        "diversity": lam_div * r_div,
        "spam": -config.spam * min(r_spam, config.spam_cap),
        "invalid": -config.invalid * float(facts.invalid),
    }
    return RewardTerms(**terms, total=sum(terms.values()), div_weight=lam_div, raw_diversity=r_div,
                       raw_spam=r_spam, raw_invalid=float(facts.invalid))


def turn_rewards(facts: EpisodeFacts, terms: RewardTerms, config: RewardConfig,
                 invalid_turns: Sequence[bool]) -> list[float]:
    """Per-turn rewards for turn-level credit; they sum to ``terms.total``.

    A turn pays its own invalid and spam penalties (spam stops costing after the cap);
    the outcome terms (solved, efficiency, diversity) land on the last turn.
    """
    n = facts.turns
    if n == 0:
        return []
    out = [0.0] * n
    spam_left = config.spam_cap
    for t in range(n):
        if t < len(invalid_turns) and invalid_turns[t]:
            out[t] -= config.invalid
        if t > 0 and t < len(facts.replies) and tuple(facts.replies[t]) == tuple(facts.replies[t - 1]):
            take = min(1.0, spam_left)
            out[t] -= config.spam * take
            spam_left -= take
    out[-1] += terms.solved + terms.efficiency + terms.diversity
    return out
