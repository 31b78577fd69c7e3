"""Loop-level tests: policies whose true rates are known, every target kind.

The ``rate`` policy succeeds with a known probability for each start state (the number
of numbers left), the ``slow`` policy wastes a known mean number of turns. So the true
rate of whatever candidate the loop accepts is known exactly, and it must be in the band.
"""

from __future__ import annotations

import envh
import pytest
from envh_rigger.pool import HarnessPool
from envh_rigger.run import RigConfig, rig

TASK = "medium/1,2,6,6"
SPEC = {"bridge": "toy24"}  # no step budget: episodes end by the policy's own stop


def _start_numbers(registry, spec) -> int:
    with envh.make(spec, registry=registry) as env:
        env.reset(task=envh.TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6"), seed=0)
        return len(env.get_env_state()["numbers"])


def _accepted(registry, out):
    pool = HarnessPool.open(out)
    return [(e, pool.load_spec(e["spec_id"])) for e in pool.entries()]


def _rig(registry, tmp_path, name, **kw):
    cfg = RigConfig(spec=SPEC, tasks=TASK, out=str(tmp_path / name), max_steps=40, workers=1, **kw)
    return rig(cfg, registry=registry)


@pytest.mark.parametrize("seed", [0, 1])
def test_sr_band_accepts_only_a_truly_in_band_candidate(registry, tmp_path, seed):
    rates = {4: 0.0, 3: 0.05, 2: 0.5}
    summary = _rig(registry, tmp_path, f"sr{seed}", policy="rate", policy_options={"rates": rates},
                   target="sr:0.4-0.6", seed=seed)
    assert summary["stops"] == {f"toy24/{TASK}": "accepted"}, summary
    [(entry, spec)] = _accepted(registry, tmp_path / f"sr{seed}")
    n = _start_numbers(registry, spec)
    assert 0.4 <= rates.get(n, 1.0 if n == 1 else 0.0) <= 0.6, (n, entry["meta"])


def test_sr_band_with_no_true_candidate_accepts_none(registry, tmp_path):
    """Neighbouring magnitudes jump over the band (0.1 → 0.9): nothing may be accepted."""
    rates = {4: 0.0, 3: 0.1, 2: 0.9}
    summary = _rig(registry, tmp_path, "none", policy="rate", policy_options={"rates": rates},
                   target="sr:0.4-0.6")
    assert summary["stops"][f"toy24/{TASK}"] != "accepted"
    assert _accepted(registry, tmp_path / "none") == []


def test_steps_band_accepts_the_candidate_with_the_right_true_mean(registry, tmp_path):
    summary = _rig(registry, tmp_path, "steps", policy="slow", target="steps:6-8")
    assert summary["stops"] == {f"toy24/{TASK}": "accepted"}, summary
    [(entry, spec)] = _accepted(registry, tmp_path / "steps")
    n = _start_numbers(registry, spec)
    assert 6 <= 3 * (n - 1) + 1 <= 8, (n, entry["meta"])
    assert entry["stats"]["validation"]["decision"] == "in"


def test_beats_baseline_accepts_a_truly_better_candidate(registry, tmp_path):
    rates = {4: 0.0, 3: 0.1, 2: 0.95}
    summary = _rig(registry, tmp_path, "beats", policy="rate", policy_options={"rates": rates},
                   target="beats-baseline:0.5")
    assert summary["stops"] == {f"toy24/{TASK}": "accepted"}, summary
    [(entry, spec)] = _accepted(registry, tmp_path / "beats")
    n = _start_numbers(registry, spec)
    true_rate = rates.get(n, 1.0 if n == 1 else 0.0)
    assert true_rate >= entry["stats"]["baseline"]["success_rate"] + 0.5
