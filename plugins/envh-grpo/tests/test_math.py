"""Advantages, loss and aggregation against values worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch
from envh_grpo.advantages import batch_advantages, group_advantages, returns_to_go, turn_advantages
from envh_grpo.loss import aggregate, grpo_loss, k3, token_logprobs


def close(a, b, tol=1e-6):
    return all(abs(x - y) < tol for x, y in zip(a, b, strict=True))


# -- advantages -------------------------------------------------------------------------
def test_std_baseline_uses_the_sample_std():
    # mean 0.5, sample std sqrt(1/3): 0.5 / 0.57735 = 0.866025
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), baseline="std", eps=0.0)
    assert close(adv.tolist(), [0.8660254, -0.8660254, -0.8660254, 0.8660254])


def test_three_baselines_on_one_group():
    r = torch.tensor([3.0, 1.0, 2.0])  # mean 2, sample std 1
    assert close(group_advantages(r, baseline="std", eps=0.0).tolist(), [1.0, -1.0, 0.0])
    assert close(group_advantages(r, baseline="none").tolist(), [1.0, -1.0, 0.0])
    # leave-one-out: 3 - mean(1, 2) = 1.5; 1 - mean(3, 2) = -1.5; 2 - mean(3, 1) = 0
    assert close(group_advantages(r, baseline="loo").tolist(), [1.5, -1.5, 0.0])


def test_eps_keeps_small_spreads_finite():
    adv = group_advantages(torch.tensor([1.0, 1.0 + 1e-9]), baseline="std", eps=1e-4)
    assert torch.isfinite(adv).all() and adv.abs().max() < 1e-4


@pytest.mark.parametrize("baseline", ["std", "none", "loo"])
def test_a_group_with_equal_rewards_has_zero_advantages(baseline):
    assert group_advantages(torch.tensor([10.5, 10.5, 10.5]), baseline=baseline).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("baseline", ["std", "none", "loo"])
def test_a_group_of_one_has_no_baseline(baseline):
    assert group_advantages(torch.tensor([7.0]), baseline=baseline).tolist() == [0.0]


def test_non_finite_rewards_are_refused():
    with pytest.raises(ValueError, match="Non-finite"):
        group_advantages(torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match="baseline"):
        group_advantages(torch.tensor([1.0, 2.0]), baseline="median")


def test_batch_advantages_normalise_within_each_group_only():
    adv = batch_advantages([1.0, 0.0, 5.0, 5.0, 2.0], ["a", "a", "b", "b", "a"], baseline="none")
    # group a: mean 1 → [0, -1, 1]; group b: equal → 0
    assert close(adv, [0.0, -1.0, 0.0, 0.0, 1.0])


def test_returns_to_go_and_turn_credit():
    assert close(returns_to_go([0.0, -0.1, 10.0], gamma=1.0), [9.9, 9.9, 10.0])
    assert close(returns_to_go([1.0, 1.0, 1.0], gamma=0.5), [1.75, 1.5, 1.0])
    # two episodes: returns [1, 1] and [0]; pooled mean 2/3 → none: [1/3, 1/3], [-2/3]
    adv = turn_advantages([[0.0, 1.0], [0.0]], baseline="none")
    assert close(adv[0], [1 / 3, 1 / 3]) and close(adv[1], [-2 / 3])
    assert turn_advantages([[], []]) == [[], []]


# -- loss -------------------------------------------------------------------------------
def _two_tokens(adv: float, eps: float = 0.2, eps_high=None):
    old = torch.tensor([[-1.0, -2.0]])
    logp = (old + torch.tensor([[math.log(1.5), math.log(0.5)]])).requires_grad_(True)
    parts = grpo_loss(logp, old, torch.tensor([adv]), torch.ones(1, 2), epsilon=eps, epsilon_high=eps_high)
    return logp, parts


def test_clipped_ratio_loss_by_hand():
    # ratios 1.5 and 0.5, A = +1, eps 0.2: min(1.5, 1.2) = 1.2 and min(0.5, 0.8) = 0.5
    _, parts = _two_tokens(+1.0)
    assert parts.loss.item() == pytest.approx(-(1.2 + 0.5) / 2)
    # A = -1: min(-1.5, -1.2) = -1.5 and min(-0.5, -0.8) = -0.8
    _, parts = _two_tokens(-1.0)
    assert parts.loss.item() == pytest.approx((1.5 + 0.8) / 2)
    assert parts.clip_fraction == pytest.approx(0.5)  # only the 0.5 ratio is clipped for A < 0


def test_epsilon_high_widens_the_upper_clip_only():
    _, parts = _two_tokens(+1.0, eps=0.2, eps_high=0.6)  # 1.5 < 1.6: unclipped
    assert parts.loss.item() == pytest.approx(-(1.5 + 0.5) / 2)


def test_clipped_tokens_get_no_gradient():
    logp, parts = _two_tokens(+1.0)
    parts.loss.backward()
    # token 0 is clipped (ratio 1.5 > 1.2 with A > 0); token 1: d/dlogp of -ratio/2 = -0.5·0.5
    assert logp.grad[0, 0].item() == 0.0
    assert logp.grad[0, 1].item() == pytest.approx(-0.25)


def test_k3_by_hand_and_kl_in_the_loss():
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    # exp(-ln 2) + ln 2 - 1 = 0.5 + 0.693147 - 1
    assert k3(logp, ref).item() == pytest.approx(0.5 + math.log(2) - 1)
    assert k3(logp, logp).item() == 0.0
    lp = torch.full((1, 2), math.log(0.5))
    parts = grpo_loss(lp, lp, torch.tensor([0.0]), torch.ones(1, 2), ref_logp=torch.full((1, 2), math.log(0.25)),
                      kl_coef=0.1)
    assert parts.loss.item() == pytest.approx(0.1 * (0.5 + math.log(2) - 1))
    assert parts.kl == pytest.approx(0.5 + math.log(2) - 1)
    with pytest.raises(ValueError, match="reference"):
        grpo_loss(lp, lp, torch.tensor([0.0]), torch.ones(1, 2), kl_coef=0.1)


def test_token_and_sequence_aggregation_by_hand():
    values = torch.tensor([[1.0, 99.0, 99.0, 99.0], [3.0, 3.0, 3.0, 99.0]])
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0]])
    assert aggregate(values, mask, mode="token").item() == pytest.approx((1 + 9) / 4)
    assert aggregate(values, mask, mode="sequence").item() == pytest.approx((1 + 3) / 2)
    assert aggregate(values, mask, mode="token", normalizer=10).item() == pytest.approx(1.0)
    # a sequence without policy tokens neither counts nor divides
    assert aggregate(values, torch.tensor([[0, 0, 0, 0], [1, 1, 1, 0]]), mode="sequence").item() == 3.0
    assert aggregate(values, torch.zeros(2, 4), mode="token").item() == 0.0


def test_masked_tokens_never_reach_the_loss_even_when_nan_free_garbage():
    old = torch.zeros(1, 3)
    logp = torch.tensor([[0.0, 50.0, -50.0]], requires_grad=True)  # huge ratios off the mask
    parts = grpo_loss(logp, old, torch.tensor([1.0]), torch.tensor([[1, 0, 0]]))
    parts.loss.backward()
    assert parts.loss.item() == pytest.approx(-1.0) and logp.grad[0, 1:].abs().sum() == 0


def test_token_logprobs_uses_the_sampling_temperature():
    logits = torch.tensor([[[2.0, 0.0]]])
    lp1 = token_logprobs(logits, torch.tensor([[0]]), 1.0).item()
    lp2 = token_logprobs(logits, torch.tensor([[0]]), 2.0).item()
    assert lp1 == pytest.approx(-math.log1p(math.exp(-2.0)))
    assert lp2 == pytest.approx(-math.log1p(math.exp(-1.0)))


def test_extreme_values_off_the_mask_cannot_poison_the_loss():
    # padding positions: the model's log-prob of a pad target can be very negative while
    # the padded old/ref log-probs are 0; exp(ref - logp) overflows to inf there
    logp = torch.tensor([[-0.5, -200.0, float("-inf")]], requires_grad=True)
    zeros = torch.zeros(1, 3)
    mask = torch.tensor([[1, 0, 0]])
    parts = grpo_loss(logp, torch.tensor([[-0.5, 0.0, 0.0]]), torch.tensor([2.0]), mask,
                      ref_logp=zeros, kl_coef=0.1)
    parts.loss.backward()
    want = -2.0 + 0.1 * (math.exp(0.5) - 0.5 - 1)
    assert math.isfinite(parts.loss.item()) and parts.loss.item() == pytest.approx(want)
    assert torch.isfinite(logp.grad).all() and logp.grad[0, 1:].abs().sum() == 0
    nan_adv = torch.tensor([[1.0, float("nan"), 1.0]])
    assert math.isfinite(grpo_loss(torch.zeros(1, 3), zeros, nan_adv, mask).loss.item())


# -- truncated importance sampling (vLLM's sampling mismatch) ---------------------------
# TRL 1.16 GRPOTrainer (vllm_importance_sampling_mode="token_truncate") and verl's
# compute_policy_loss (tis_imp_ratio_cap): w = min(exp(logp_old - logp_vllm), C), no
# gradient, multiplying the clipped policy term only (the KL term is added unweighted).
def test_tis_weights_the_policy_term_by_hand():
    old = torch.tensor([[-1.0, -2.0, -0.5, 0.0]])
    # exp(old - vllm) = 0.5, 4 (capped at 2), 1.25; the last position is off the mask
    vllm = old - torch.tensor([[math.log(0.5), math.log(4.0), math.log(1.25), 0.0]]) + torch.tensor([[0, 0, 0, -99.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    ref = old + math.log(0.5)  # k3 = 0.5 + ln 2 - 1 on every token
    logp = old.clone().requires_grad_(True)  # first update: ratio 1, the clipped term is -A = -1
    parts = grpo_loss(logp, old, torch.tensor([1.0]), mask, ref_logp=ref, kl_coef=0.1,
                      behavior_logp=vllm, tis_cap=2.0)
    k3_value = 0.5 + math.log(2) - 1
    assert parts.loss.item() == pytest.approx(-(0.5 + 2.0 + 1.25) / 3 + 0.1 * k3_value)
    assert parts.policy_loss == pytest.approx(-(0.5 + 2.0 + 1.25) / 3)
    assert parts.is_weight == pytest.approx(1.25) and parts.is_clipped == pytest.approx(1 / 3)
    assert parts.logp_diff == pytest.approx((math.log(2) + math.log(4) + math.log(1.25)) / 3)
    parts.loss.backward()
    # d/dlogp_t of -w_t·ratio_t/3 + 0.1·k3_t/3, at ratio 1 and ref - logp = -ln 2: k3' = 1 - exp(-ln 2) = 0.5
    want = [-0.5 / 3 + 0.05 / 3, -2.0 / 3 + 0.05 / 3, -1.25 / 3 + 0.05 / 3, 0.0]
    assert close(logp.grad[0].tolist(), want)


def test_tis_multiplies_the_clipped_term():
    # ratios 1.5 and 0.5 with A = +1 and eps 0.2: clipped terms 1.2 and 0.5; weights 0.5 and 2 (cap 3)
    old = torch.tensor([[-1.0, -2.0]])
    logp = old + torch.tensor([[math.log(1.5), math.log(0.5)]])
    vllm = old - torch.tensor([[math.log(0.5), math.log(2.0)]])
    parts = grpo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 2), behavior_logp=vllm, tis_cap=3.0)
    assert parts.loss.item() == pytest.approx(-(1.2 * 0.5 + 0.5 * 2.0) / 2)
    assert parts.is_clipped == 0.0


def test_tis_with_identical_logprobs_leaves_the_loss_unchanged():
    old = torch.tensor([[-1.0, -2.0, -0.3]])
    logp = (old + torch.tensor([[0.3, -0.4, 0.1]])).requires_grad_(True)
    plain_logp = logp.detach().clone().requires_grad_(True)
    mask, adv = torch.tensor([[1, 1, 0]]), torch.tensor([-0.7])
    ref = old - 0.2
    tis = grpo_loss(logp, old, adv, mask, ref_logp=ref, kl_coef=0.05, behavior_logp=old.clone(), tis_cap=2.0)
    plain = grpo_loss(plain_logp, old, adv, mask, ref_logp=ref, kl_coef=0.05)
    tis.loss.backward()
    plain.loss.backward()
    assert tis.loss.item() == plain.loss.item() and torch.equal(logp.grad, plain_logp.grad)
    assert (tis.is_weight, tis.is_clipped, tis.logp_diff) == (1.0, 0.0, 0.0)
    # no cap (the hf engine) or no engine log-probs: no weighting at all
    off = grpo_loss(logp.detach(), old, adv, mask, ref_logp=ref, kl_coef=0.05, behavior_logp=old - 5.0)
    assert off.loss.item() == plain.loss.item() and off.is_weight == 1.0


def test_tis_cap_must_be_positive():
    with pytest.raises(ValueError, match="tis_cap"):
        grpo_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1),
                  behavior_logp=torch.zeros(1, 1), tis_cap=0.0)
    from envh import errors
    from envh_grpo.config import check, from_data

    with pytest.raises(errors.SpecError, match="loss.tis_cap=0"):
        check(from_data({"loss": {"tis_cap": 0}}))
    assert from_data({}).loss.tis_cap == 3.0  # on by default (used with the vLLM engine)
    check(from_data({"loss": {"tis_cap": None}}))
