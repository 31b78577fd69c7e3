"""Group-relative advantages: how much better an episode (or a turn) did than its group.

A group is the G rollouts of one (task, env spec). Three baselines:

* ``std`` — ``(r − mean) / (std + eps)``, GRPO as published (std is the sample std, as
  in TRL's ``GRPOTrainer``);
* ``none`` — ``r − mean`` (Dr. GRPO: dividing by the std over-weights groups whose
  rewards barely differ);
* ``loo`` — leave-one-out, ``r_i − mean_{j≠i} r_j = G/(G−1)·(r_i − mean)`` (RLOO).

A group whose rewards are all equal carries no signal: every advantage is exactly 0
(never ``0/0``). A group of one has no baseline and gets 0 as well.

Credit: ``trajectory`` gives every policy token of an episode the episode's advantage;
``turn`` gives each turn the advantage of its reward-to-go ``Σ_{k≥t} γ^{k−t} r_k``,
normalised against every turn of the same group.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

BASELINES = ("std", "none", "loo")
CREDITS = ("trajectory", "turn")


def group_advantages(rewards: torch.Tensor, *, baseline: str = "std", eps: float = 1e-4) -> torch.Tensor:
    """Advantages of one group's rewards (1-D), by ``baseline``; float64 in, same dtype out."""
    if baseline not in BASELINES:
        raise ValueError(f"Unknown advantage baseline {baseline!r}. Choose one of: {', '.join(BASELINES)}")
    r = rewards.to(torch.float64).flatten()
    if not torch.isfinite(r).all():
        raise ValueError(f"Non-finite reward in a group: {r.tolist()}")
    n = r.numel()
    if n < 2:
        return torch.zeros_like(rewards, dtype=rewards.dtype if rewards.is_floating_point() else torch.float32)
    centred = r - r.mean()
    if bool((centred == 0).all()):
        out = torch.zeros_like(r)
    elif baseline == "std":
        out = centred / (r.std(unbiased=True) + eps)
    elif baseline == "loo":
        out = centred * (n / (n - 1))
    else:
        out = centred
    dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
    return out.to(dtype).reshape(rewards.shape)


def batch_advantages(rewards: Sequence[float], group_ids: Sequence[object], *, baseline: str = "std",
                     eps: float = 1e-4) -> list[float]:
    """Advantages of a flat batch whose items belong to groups named by ``group_ids``."""
    if len(rewards) != len(group_ids):
        raise ValueError(f"{len(rewards)} rewards but {len(group_ids)} group ids")
    members: dict[object, list[int]] = {}
    for i, g in enumerate(group_ids):
        members.setdefault(g, []).append(i)
    out = [0.0] * len(rewards)
    for idx in members.values():
        adv = group_advantages(torch.tensor([float(rewards[i]) for i in idx], dtype=torch.float64),
                               baseline=baseline, eps=eps)
        for i, a in zip(idx, adv.tolist()):
            out[i] = float(a)
    return out


def returns_to_go(turn_rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """``G_t = Σ_{k≥t} γ^{k−t} r_k`` for one episode's per-turn rewards."""
    out = [0.0] * len(turn_rewards)
    acc = 0.0
    for t in range(len(turn_rewards) - 1, -1, -1):
        acc = float(turn_rewards[t]) + gamma * acc
        out[t] = acc
    return out


def turn_advantages(group_turn_rewards: Sequence[Sequence[float]], *, baseline: str = "std",
                    gamma: float = 1.0, eps: float = 1e-4) -> list[list[float]]:
    """Turn-level credit for one group: per episode, per turn, the normalised reward-to-go.

    The baseline pools every turn of every episode in the group (episodes differ in
    length, so a per-turn-index baseline would compare unlike states).
    """
    returns = [returns_to_go(ep, gamma) for ep in group_turn_rewards]
    flat = [g for ep in returns for g in ep]
    if not flat:
        return [[] for _ in returns]
    adv = group_advantages(torch.tensor(flat, dtype=torch.float64), baseline=baseline, eps=eps).tolist()
    out: list[list[float]] = []
    pos = 0
    for ep in returns:
        out.append([float(a) for a in adv[pos:pos + len(ep)]])
        pos += len(ep)
    return out
