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

With a ``workspace`` layer in the stack (its state counts the meta-actions track / commit /
recall / note), both terms also read the meta-actions: ``R_div`` is the mean of the action
diversity above and the share of the four meta-actions the episode used (the annealed
bonus pays for trying the workspace early in training), and ``R_spam`` adds every
meta-action beyond ``meta_allowance`` of its kind (a policy that notes or tracks on every
turn is spamming the workspace, not using it).

Pure Python (no torch): every term is returned, so each one is logged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

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
    meta_allowance: int = 3

    def __attrs_post_init__(self) -> None:
        if self.t_max <= 0:
            raise ValueError(f"reward.t_max must be > 0, got {self.t_max}")
        if self.anneal_epochs <= 0:
            raise ValueError(f"reward.anneal_epochs must be > 0, got {self.anneal_epochs}")
        if self.spam_cap < 0:
            raise ValueError(f"reward.spam_cap must be >= 0, got {self.spam_cap}")
        if self.meta_allowance < 0:
            raise ValueError(f"reward.meta_allowance must be >= 0, got {self.meta_allowance}")


@attrs.frozen(kw_only=True)
class EpisodeFacts:
    """What the reward needs to know about an episode."""

    solved: bool
    turns: int
    actions: tuple[str, ...] = ()  # the valid actions taken, in order
    replies: tuple[tuple[int, ...], ...] = ()
    invalid: int = 0
    #: the workspace layer's meta-action counts (``None``: the stack has no workspace)
    meta: Mapping[str, int] | None = None
    #: per turn, the meta-action it took ("" for none); places meta spam on its turn
    meta_turns: tuple[str, ...] = ()


#: the workspace's meta-actions (envh_adaptive.components.workspace.META, in the envh-adaptive plugin)
META = ("track", "commit", "recall", "note")


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


def meta_coverage(meta: Mapping[str, int]) -> float:
    """The share of the workspace's meta-actions used at least once."""
    return sum(1 for m in META if int(meta.get(m, 0)) > 0) / len(META)


def meta_spam(meta: Mapping[str, int], allowance: int) -> int:
    """Meta-actions beyond ``allowance`` of each kind."""
    return sum(max(0, int(meta.get(m, 0)) - allowance) for m in META)


def cost_aware(facts: EpisodeFacts, config: RewardConfig, epoch: int) -> RewardTerms:
    """The reward of one episode at training epoch ``epoch``, term by term."""
    solved = 1.0 if facts.solved else 0.0
    eff = max(0.0, 1.0 - facts.turns / config.t_max) * solved
    lam_div = div_weight(config, epoch)
    r_div = diversity(facts.actions, facts.turns)
    r_spam = float(spam_count(facts.replies))
    if facts.meta is not None:
        r_div = 0.5 * (r_div + meta_coverage(facts.meta))
        r_spam += meta_spam(facts.meta, config.meta_allowance)
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

    A turn pays its own invalid and spam penalties (spam stops costing after the cap; a
    meta-action beyond the allowance is spam on its own turn, or on the last turn when the
    turns of meta-actions are unknown); the outcome terms (solved, efficiency, diversity)
    land on the last turn.
    """
    n = facts.turns
    if n == 0:
        return []
    out = [0.0] * n
    spam_left = config.spam_cap
    excess = meta_spam(facts.meta, config.meta_allowance) if facts.meta is not None else 0
    placed = 0 if len(facts.meta_turns) == n else None  # meta spam charged turn by turn
    used: dict[str, int] = {}

    def charge(t: int, amount: float) -> None:
        nonlocal spam_left
        take = min(amount, spam_left)
        out[t] -= config.spam * take
        spam_left -= take

    for t in range(n):
        if t < len(invalid_turns) and invalid_turns[t]:
            out[t] -= config.invalid
        if t > 0 and t < len(facts.replies) and tuple(facts.replies[t]) == tuple(facts.replies[t - 1]):
            charge(t, 1.0)
        if placed is not None and facts.meta_turns[t] in META:
            kind = facts.meta_turns[t]
            used[kind] = used.get(kind, 0) + 1
            if used[kind] > config.meta_allowance and placed < excess:
                charge(t, 1.0)
                placed += 1
    if excess:  # what the per-turn record did not place (or no per-turn record at all)
        charge(n - 1, float(excess - (placed or 0)))
    out[-1] += terms.solved + terms.efficiency + terms.diversity
    return out
