"""Groups are drawn without replacement: every epoch over a source's tasks is a seeded
permutation; sources mix by weight; the draw is a pure function of (seed, position)."""

from __future__ import annotations

from collections import Counter

import envh
from envh_grpo import data


def _source(name: str, n: int, weight: float = 1.0) -> data.Source:
    tasks = tuple(envh.TaskRef(suite="toy24", split="easy", instance_id=f"{name}{i}") for i in range(n))
    return data.Source(name=name, spec="toy24", tasks=tasks, weight=weight)


def test_each_epoch_is_a_permutation_of_the_tasks():
    sources = [_source("t", 7)]
    drawn = [data.draw(sources, 3, g)[1].instance_id for g in range(21)]
    epochs = [drawn[0:7], drawn[7:14], drawn[14:21]]
    for epoch in epochs:  # without replacement: every task exactly once per epoch
        assert sorted(epoch) == sorted(t.instance_id for t in sources[0].tasks)
    assert len({tuple(e) for e in epochs}) == 3  # a fresh order each epoch
    assert epochs[0] != sorted(epochs[0])  # shuffled, not listed in order


def test_the_draw_is_a_pure_function_of_seed_and_position():
    sources = [_source("t", 5)]
    forward = [data.draw(sources, 11, g) for g in range(12)]
    backward = [data.draw(sources, 11, g) for g in reversed(range(12))][::-1]
    assert forward == backward  # resuming at a position draws what a continuous run drew
    assert [t for _, t in forward] != [t for _, t in (data.draw(sources, 12, g) for g in range(12))]


def test_mixed_sources_keep_their_ratio_and_each_source_its_epochs():
    sources = [_source("a", 3, weight=3.0), _source("b", 4, weight=1.0)]
    drawn = [data.draw(sources, 0, g) for g in range(400)]
    share = Counter(k for k, _ in drawn)
    assert 0.68 < share[0] / 400 < 0.82  # 3:1 by weight
    for k, source in enumerate(sources):
        seq = [t.instance_id for j, t in drawn if j == k]
        n = len(source.tasks)
        for start in range(0, len(seq) - n + 1, n):
            assert sorted(seq[start:start + n]) == sorted(t.instance_id for t in source.tasks)
