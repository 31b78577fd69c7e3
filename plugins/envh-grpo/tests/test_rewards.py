"""The cost-aware reward, term by term, on crafted episodes."""

from __future__ import annotations

import attrs
import pytest
from envh_grpo.rewards import EpisodeFacts, RewardConfig, cost_aware, div_weight, turn_rewards

CFG = RewardConfig()


def test_every_term_by_hand():
    facts = EpisodeFacts(solved=True, turns=7, actions=("a", "b", "a", "c"),
                         replies=((1,), (1,), (1,), (2,), (3,), (4,), (5,)), invalid=3)
    t = cost_aware(facts, CFG, epoch=0)
    assert t.solved == 10.0
    assert t.efficiency == pytest.approx(1.0 - 7 / 70)
    assert t.diversity == pytest.approx(0.5 * 3 / 7)  # 3 distinct valid actions in 7 turns
    assert t.spam == pytest.approx(-0.1 * 2)  # two replies repeat the one before
    assert t.invalid == pytest.approx(-0.1 * 3)
    assert t.total == pytest.approx(10 + 0.9 + 1.5 / 7 - 0.2 - 0.3)


def test_efficiency_only_when_solved_and_never_negative():
    assert cost_aware(EpisodeFacts(solved=False, turns=1), CFG, 0).efficiency == 0.0
    assert cost_aware(EpisodeFacts(solved=True, turns=140), CFG, 0).efficiency == 0.0
    assert cost_aware(EpisodeFacts(solved=True, turns=0), CFG, 0).efficiency == 1.0


def test_diversity_weight_is_cosine_annealed():
    assert div_weight(CFG, 0) == pytest.approx(0.5)
    assert div_weight(CFG, 75) == pytest.approx(0.25)
    assert div_weight(CFG, 150) == pytest.approx(0.0, abs=1e-12)
    assert div_weight(CFG, 10_000) == pytest.approx(0.0, abs=1e-12)
    assert div_weight(CFG, -3) == pytest.approx(0.5)


def test_spam_is_capped_at_ten():
    facts = EpisodeFacts(solved=False, turns=16, replies=tuple((5, 5) for _ in range(16)))
    t = cost_aware(facts, CFG, 0)
    assert t.raw_spam == 15 and t.spam == pytest.approx(-1.0)


def test_no_actions_no_diversity():
    assert cost_aware(EpisodeFacts(solved=False, turns=0), CFG, 0).diversity == 0.0


def test_turn_rewards_sum_to_the_episode_reward():
    facts = EpisodeFacts(solved=True, turns=4, actions=("a", "b", "b", "c"),
                         replies=((1,), (1,), (2,), (3,)), invalid=1)
    terms = cost_aware(facts, CFG, epoch=30)
    per_turn = turn_rewards(facts, terms, CFG, [False, False, True, False])
    assert per_turn[:3] == pytest.approx([0.0, -0.1, -0.1])
    assert sum(per_turn) == pytest.approx(terms.total)
    assert turn_rewards(EpisodeFacts(solved=False, turns=0), terms, CFG, []) == []


def test_bad_reward_config_is_refused():
    with pytest.raises(ValueError, match="t_max"):
        RewardConfig(t_max=0)


def test_workspace_meta_actions_enter_diversity_and_spam_by_hand():
    facts = EpisodeFacts(solved=False, turns=8, actions=("a", "b"), invalid=0,
                         meta={"track": 5, "commit": 1, "recall": 0, "note": 4})
    t = cost_aware(facts, CFG, epoch=0)
    # R_div: mean of action diversity (2 distinct / 8 turns) and meta coverage (3 of 4 used)
    assert t.raw_diversity == pytest.approx(0.5 * (2 / 8 + 3 / 4))
    assert t.diversity == pytest.approx(0.5 * t.raw_diversity)
    # R_spam: meta-actions beyond 3 of a kind: track 2, note 1
    assert t.raw_spam == 3.0 and t.spam == pytest.approx(-0.3)
    # no workspace layer: the meta-actions are not read (counts of None)
    plain = cost_aware(attrs.evolve(facts, meta=None), CFG, epoch=0)
    assert plain.raw_diversity == pytest.approx(2 / 8) and plain.raw_spam == 0.0
    # a workspace that was never used: coverage 0, no spam
    idle = cost_aware(attrs.evolve(facts, meta={"track": 0, "commit": 0, "recall": 0, "note": 0}), CFG, 0)
    assert idle.raw_diversity == pytest.approx(0.5 * 2 / 8) and idle.raw_spam == 0.0


def test_meta_spam_lands_on_its_own_turns_and_turn_rewards_sum_to_the_total():
    cfg = RewardConfig(meta_allowance=1)
    turns = ("note", "note", "", "note", "track", "")
    facts = EpisodeFacts(solved=True, turns=6, actions=("x",) * 6, replies=tuple((i,) for i in range(6)),
                         meta={"note": 3, "track": 1}, meta_turns=turns)
    terms = cost_aware(facts, cfg, epoch=0)
    assert terms.raw_spam == 2.0
    per_turn = turn_rewards(facts, terms, cfg, [False] * 6)
    assert per_turn[1] == pytest.approx(-0.1) and per_turn[3] == pytest.approx(-0.1)  # 2nd and 3rd note
    assert per_turn[0] == per_turn[2] == per_turn[4] == 0.0
    assert sum(per_turn) == pytest.approx(terms.total)
    # counts without per-turn record: the excess is charged on the last turn, still summing to R
    unplaced = attrs.evolve(facts, meta_turns=())
    assert sum(turn_rewards(unplaced, terms, cfg, [False] * 6)) == pytest.approx(terms.total)
    # the cap holds across repeats and meta spam together
    capped = RewardConfig(meta_allowance=0, spam_cap=2.0)
    t2 = cost_aware(facts, capped, epoch=0)
    assert t2.spam == pytest.approx(-0.2)
    assert sum(turn_rewards(facts, t2, capped, [False] * 6)) == pytest.approx(t2.total)


def test_meta_allowance_must_not_be_negative():
    with pytest.raises(ValueError, match="meta_allowance"):
        RewardConfig(meta_allowance=-1)
