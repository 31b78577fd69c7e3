"""The GRPO objective: clipped policy ratio, k3 KL to a frozen reference, aggregation.

Per policy token t with advantage A_t and ratio ρ_t = exp(logπ_θ − logπ_old):

    ℓ_t = −min(ρ_t·A_t, clip(ρ_t, 1−ε, 1+ε_high)·A_t) + β·k3_t,
    k3_t = exp(logπ_ref − logπ_θ) − (logπ_ref − logπ_θ) − 1     (≥ 0, unbiased for KL)

Aggregation over the policy tokens (mask = 1):

* ``token`` (the default) — Σ ℓ_t / (number of policy tokens in the batch). Every token
  weighs the same, so a long multi-turn episode is not diluted against a short one and
  the loss has no length bias (DAPO, Dr. GRPO). With gradient accumulation and data
  parallelism pass ``normalizer`` = the policy tokens of the whole optimizer step, so the
  gradient does not depend on how the batch was cut into micro-batches.
* ``sequence`` — the mean over each sequence's tokens, then over sequences (GRPO as
  first published); short sequences weigh more per token.

Sampling mismatch (truncated importance sampling, TIS). A vLLM engine samples from its own
kernels, not from the training model: its log-prob of a token (``logπ_vllm``) differs
from the trainer's (``logπ_old``, the policy the update starts from). With ``tis_cap`` C
and the engine's log-probs, each policy token's clipped term is weighted by

    w_t = min(exp(logπ_old − logπ_vllm), C)                              (no gradient)

before aggregation; the KL term is not weighted. This is TRL's ``token_truncate`` mode
(``vllm_importance_sampling_correction``) and verl's ``tis_imp_ratio_cap``.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

AGGREGATIONS = ("token", "sequence")


@attrs.frozen(kw_only=True)
class LossParts:
    """The loss and what it is made of (means over policy tokens, detached floats)."""

    loss: torch.Tensor
    policy_loss: float
    kl: float
    clip_fraction: float
    ratio_mean: float
    tokens: int
    is_weight: float = 1.0  # mean TIS weight over policy tokens (1 without the correction)
    is_clipped: float = 0.0  # share of policy tokens whose weight hit the cap
    logp_diff: float = 0.0  # mean |logπ_old − logπ_vllm| over policy tokens


def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(π_θ ‖ π_ref) from log-probs of the sampled tokens."""
    diff = ref_logp - logp
    return torch.exp(diff) - diff - 1.0


def aggregate(values: torch.Tensor, mask: torch.Tensor, *, mode: str = "token",
              normalizer: float | None = None) -> torch.Tensor:
    """Reduce per-token ``values`` ([B, T]) over ``mask`` by ``mode`` (see the module doc)."""
    if mode not in AGGREGATIONS:
        raise ValueError(f"Unknown loss aggregation {mode!r}. Choose one of: {', '.join(AGGREGATIONS)}")
    mask = mask.to(values.dtype)
    masked = torch.where(mask.bool(), values, torch.zeros_like(values))
    if mode == "token":
        denom = float(normalizer) if normalizer is not None else float(mask.sum().item())
        return masked.sum() / max(denom, 1.0)
    per_seq = mask.sum(dim=-1)
    seq_means = masked.sum(dim=-1) / per_seq.clamp(min=1.0)
    present = (per_seq > 0).to(values.dtype)
    denom = float(normalizer) if normalizer is not None else float(present.sum().item())
    return (seq_means * present).sum() / max(denom, 1.0)


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
              ref_logp: torch.Tensor | None = None, kl_coef: float = 0.0, epsilon: float = 0.2,
              epsilon_high: float | None = None, aggregation: str = "token",
              normalizer: float | None = None, behavior_logp: torch.Tensor | None = None,
              tis_cap: float | None = None) -> LossParts:
    """The clipped GRPO loss of a batch; tensors are [B, T] (advantages may be [B] or [B, T]).

    ``mask`` is 1 on the policy's own tokens only; prompt and environment tokens never
    contribute. ``kl_coef`` 0 needs no ``ref_logp``. ``behavior_logp`` (the sampling
    engine's log-probs) with ``tis_cap`` weights each token by the truncated
    importance-sampling weight (see the module doc); without either the loss is unweighted.
    """
    eps_high = epsilon if epsilon_high is None else epsilon_high
    if epsilon < 0 or eps_high < 0:
        raise ValueError(f"clip ranges must be >= 0, got epsilon={epsilon}, epsilon_high={eps_high}")
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logp)
    on = mask.bool()
    # off the mask (prompt, env tokens, padding) every input is neutralised before exp():
    # a 0 * inf there would otherwise turn the whole loss into NaN
    logp = torch.where(on, logp, old_logp.detach())
    advantages = torch.where(on, advantages, torch.zeros_like(advantages))
    if ref_logp is not None:
        ref_logp = torch.where(on, ref_logp, logp.detach())
    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1.0 - epsilon, 1.0 + eps_high)
    per_token = -torch.minimum(ratio * advantages, clipped * advantages)
    weight, tis = tis_weights(old_logp, behavior_logp, on, tis_cap)
    per_token = per_token * weight
    kl_value = torch.zeros((), dtype=logp.dtype)
    if kl_coef:
        if ref_logp is None:
            raise ValueError("kl_coef > 0 needs the reference model's log-probs (ref_logp)")
        kl_tok = k3(logp, ref_logp)
        per_token = per_token + kl_coef * kl_tok
        kl_value = _mean(kl_tok, mask)
    loss = aggregate(per_token, mask, mode=aggregation, normalizer=normalizer)
    with torch.no_grad():
        pg = _mean(-torch.minimum(ratio * advantages, clipped * advantages) * weight, mask)
        was_clipped = ((ratio < 1.0 - epsilon) & (advantages < 0)) | ((ratio > 1.0 + eps_high) & (advantages > 0))
        clip_frac = _mean(was_clipped.to(logp.dtype), mask)
        ratio_mean = _mean(ratio, mask)
    return LossParts(loss=loss, policy_loss=float(pg), kl=float(kl_value), clip_fraction=float(clip_frac),
                     ratio_mean=float(ratio_mean), tokens=int(mask.sum().item()), **tis)


def tis_weights(old_logp: torch.Tensor, behavior_logp: torch.Tensor | None, on: torch.Tensor,
                cap: float | None) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-token weights min(exp(logπ_old − logπ_vllm), cap) (1 off ``on``) and their
    statistics over ``on``; all ones when there is no engine log-prob or no cap."""
    ones = torch.ones_like(old_logp)
    if behavior_logp is None or cap is None:
        return ones, {}
    if not cap > 0:
        raise ValueError(f"tis_cap must be > 0, got {cap}")
    with torch.no_grad():
        diff = torch.where(on, old_logp.detach() - behavior_logp.to(old_logp.dtype), torch.zeros_like(old_logp))
        # an engine log-prob it could not give (NaN) leaves its token unweighted, as TRL does
        diff = torch.nan_to_num(diff, nan=0.0)
        raw = torch.exp(diff)
        weight = torch.where(on, torch.clamp(raw, max=cap), ones)
        m = on.to(old_logp.dtype)
        stats = {"is_weight": float(_mean(weight, m)), "is_clipped": float(_mean((raw > cap).to(m.dtype), m)),
                 "logp_diff": float(_mean(diff.abs(), m))}
    return weight, stats


def _mean(values: torch.Tensor, mask: torch.Tensor) -> Any:
    kept = torch.where(mask.bool(), values, torch.zeros_like(values))
    return (kept.sum() / mask.sum().clamp(min=1.0)).detach()


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log p(targets) under ``logits / temperature`` ([B, T, V] → [B, T]), in float32.

    Sampling at temperature τ draws from softmax(logits/τ); the ratio and KL must use the
    same distribution the tokens came from.
    """
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    # the picked logit minus logsumexp: no [B, T, V] log-softmax kept for the backward pass
    return torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
