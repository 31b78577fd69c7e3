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
    true = rates.get(n, 1.0 if n == 1 else 0.0)
    if entry["meta"].get("continuous") == "guide":  # the guide knob on an entry (see below)
        true += (1 - true) * entry["meta"]["rate"] ** (n - 1)
    assert 0.4 <= true <= 0.6, (n, true, entry["meta"])
    # an "in" is confirmed on fresh seeds before it is accepted
    confirmation = entry["stats"]["validation"]["confirmation"]
    assert confirmation["decision"] == "in" and confirmation["decisive"] and confirmation["n"] >= 5


def test_sr_band_with_no_true_candidate_accepts_none(registry, tmp_path):
    """Neighbouring magnitudes jump over the band (0.1 → 0.9) and the list is all the
    designer may use: nothing may be accepted."""
    rates = {4: 0.0, 3: 0.1, 2: 0.9}
    summary = _rig(registry, tmp_path, "none", policy="rate", policy_options={"rates": rates},
                   target="sr:0.4-0.6", designer="template:toy24.replay-plan")
    assert summary["stops"][f"toy24/{TASK}"] != "accepted"
    assert _accepted(registry, tmp_path / "none") == []


def test_a_jump_between_list_entries_is_landed_by_the_guide_knob_at_a_true_in_band_rate(registry, tmp_path):
    """The same jump with the guide knob: stacked on the weaker entry (n numbers staged), each
    of the losing episodes' stop calls is replaced by the reference's next step from the
    current state with probability m, so a losing episode wins with probability m^(n-1) and
    the true rate is r_n + (1 - r_n) m^(n-1), continuous in m. (With a plan fixed at the start
    and an even replacement schedule it stayed at r_n for every m < 1: nothing could land.)"""
    rates = {4: 0.0, 3: 0.1, 2: 0.9}
    summary = _rig(registry, tmp_path, "knob", policy="rate", policy_options={"rates": rates},
                   target="sr:0.4-0.6")
    assert summary["stops"][f"toy24/{TASK}"] == "accepted", summary
    [(entry, spec)] = _accepted(registry, tmp_path / "knob")
    assert entry["meta"]["continuous"] == "guide", entry["meta"]
    n, m = _start_numbers(registry, spec), entry["meta"]["rate"]
    true = rates[n] + (1 - rates[n]) * m ** (n - 1)
    # the validator's stated error rates: P(judged in) <= 0.10 at p <= 0.2 or >= 0.8; between
    # there and the band it is judged in now and then (0.37 at 0.3, exact). This run accepts
    # m = 0.5 on 3 numbers, true rate 0.325 (0.335 measured over 400 fresh episodes).
    assert 0.2 < true < 0.8, (n, m, true)
    # the wins the guide played part of are counted and shown
    validation = entry["stats"]["validation"]
    assert 0 < validation["wins_with_rewrites"] <= validation["successes"] and validation["rewritten_steps"] > 0
    assert "wins had actions the candidate replaced" in (tmp_path / "knob" / "report.md").read_text()


def test_steps_band_accepts_the_candidate_with_the_right_true_mean(registry, tmp_path):
    summary = _rig(registry, tmp_path, "steps", policy="slow", target="steps:6-8")
    assert summary["stops"] == {f"toy24/{TASK}": "accepted"}, summary
    [(entry, spec)] = _accepted(registry, tmp_path / "steps")
    n = _start_numbers(registry, spec)
    assert 6 <= 3 * (n - 1) + 1 <= 8, (n, entry["meta"])
    assert entry["stats"]["validation"]["decision"] == "in"
    # and its step counts moved down from the base's (mean 10) on the same seeds: a sign test
    moved = entry["stats"]["validation"]["differs"]
    assert moved["rule"] == "paired" and moved["verdict"] == "beats" and moved["towards"] > moved["away"], moved


def test_beats_baseline_accepts_a_truly_better_candidate(registry, tmp_path):
    rates = {4: 0.0, 3: 0.1, 2: 0.95}
    summary = _rig(registry, tmp_path, "beats", policy="rate", policy_options={"rates": rates},
                   target="beats-baseline:0.5")
    assert summary["stops"] == {f"toy24/{TASK}": "accepted"}, summary
    [(entry, spec)] = _accepted(registry, tmp_path / "beats")
    n = _start_numbers(registry, spec)
    true_rate = rates.get(n, 1.0 if n == 1 else 0.0)
    assert true_rate >= entry["stats"]["baseline"]["success_rate"] + 0.5


def test_weakness_target_accepts_a_candidate_that_makes_the_predicate_bite(registry, tmp_path):
    """``calls:combine:div`` bites (shows and fails) with true rate q = 0.5 only under a
    contract blocking div; success stays 0.5, above the floor."""
    summary = _rig(registry, tmp_path, "weak", policy="divider", policy_options={"q": 0.5},
                   target="weakness:calls:combine:div", designer="template:toy24.block-operator")
    assert summary["stops"] == {f"toy24/{TASK}": "accepted"}, summary
    [(entry, spec)] = _accepted(registry, tmp_path / "weak")
    assert any("div" in (layer.get("code") or "") for layer in spec["layers"])
    val = entry["stats"]["validation"]
    assert val["weakness"] == "calls:combine:div" and val["decision"] == "in"
    assert entry["stats"]["baseline"]["weakness_rate"] == 0.0
    report = (tmp_path / "weak" / "report.md").read_text()
    assert "weakness rate" in report and "calls:combine:div" in report


def test_weakness_target_refuses_a_candidate_that_collapses_success(registry, tmp_path):
    """q = 1: blocking div makes the weakness bite every time, but nothing wins any more."""
    summary = _rig(registry, tmp_path, "floor", policy="divider", policy_options={"q": 1.0},
                   target="weakness:calls:combine:div", designer="template:toy24.block-operator")
    assert summary["stops"][f"toy24/{TASK}"] != "accepted"
    from envh_rigger.journal import Journal

    reasons = [e["attempt"]["reason"] for e in Journal(tmp_path / "floor").events(kind="attempt")]
    assert any("floor" in r for r in reasons), reasons


def test_weakness_in_plain_words_is_translated_and_unknown_words_refused(registry, tmp_path):
    from envh import errors
    from envh_rigger.weakness import resolve

    assert resolve("submits before running the tests").predicate == "submits-before-test"
    assert resolve("repeats the same action").predicate == "repeats:3"
    with pytest.raises(errors.EnvhError, match="Cannot read the weakness"):
        _rig(registry, tmp_path, "bad", policy="rate", target='weakness:"is sad"')
    assert not (tmp_path / "bad").exists()


def test_code_a_designer_wrote_runs_in_the_jail(registry, tmp_path):
    """Only the template designer's own code is trusted: anything else is marked untrusted
    and played in the jail process."""
    _rig(registry, tmp_path, "jail", policy="coin", target="sr:0.4-0.6", designer="writer", rounds=1)
    from envh_rigger.journal import Journal

    (attempt,) = [e["attempt"] for e in Journal(tmp_path / "jail").events(kind="attempt")]
    assert attempt["layers"][0]["trust"] == "untrusted"
    assert attempt["result"]["n"] >= 1 and not attempt["result"]["error_classes"], attempt["result"]


def test_a_band_the_baseline_pushes_past_one_is_reported_unreachable(registry, tmp_path):
    """A lift of 0.95 needs a base <= 0.05; a base showing 2 of 5 excludes that (Wilson lower
    bound 0.12), so no round is spent. (One of 5 would not: its lower bound is 0.04.)"""
    summary = _rig(registry, tmp_path, "far", policy="rate", policy_options={"rates": {4: 0.6}},
                   target="beats-baseline:0.95")
    assert summary["stops"] == {f"toy24/{TASK}": "target_unreachable"}
    assert summary["usage"]["rollouts"] == 5  # the observation only: no round was spent


def test_a_worker_pool_plays_ahead_without_changing_any_decision(registry, tmp_path):
    """With two workers a validation plays at least two episodes at a time; episodes past the
    rule's stop are spares outside the decision, so every verdict equals the one-worker run's.
    (Pool workers load policies from installed plugins: the seeded random policy, from a
    start where 24 is already reached, wins about half its episodes.)"""
    with envh.make(SPEC, registry=registry) as env:
        env.reset(task=envh.TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6"), seed=0)
        plan = [{"tool": a.tool, "args": dict(a.args)} for a in env.unwrapped.solve() if a.tool == "combine"]
    spec = {"bridge": "toy24", "layers": [{"kind": "stage", "actions": plan}]}
    runs = {}
    for workers in (1, 2):  # guide at rate 0.5 answers every other off-plan action with stop()
        cfg = RigConfig(spec=spec, tasks=TASK, out=str(tmp_path / f"w{workers}"), max_steps=6, workers=workers,
                        policy="random:3", target="sr:0.7-0.9", rounds=1, designer="template:guide")
        rig(cfg, registry=registry)
        from envh_rigger.journal import Journal

        runs[workers] = [e["attempt"]["result"] for e in Journal(tmp_path / f"w{workers}").events(kind="attempt")]
    key = ("decision", "n", "successes")
    assert runs[1] and [[r[k] for k in key] for r in runs[1]] == [[r[k] for k in key] for r in runs[2]]
    assert 0 < runs[1][0]["successes"] < runs[1][0]["n"]
    assert all(r["spares"] == 0 for r in runs[1]) and runs[2][0]["spares"] == 1  # a worker played ahead


def test_code_a_designer_wrote_is_validated_with_a_worker_pool_too(registry, tmp_path):
    """Model-written code runs in the jail from inside the pool's worker processes too (the
    default --workers 2): no validation episode may end in an error. (Seen failing once while
    the jail and the workers' isolation were being changed: every episode an env_error.)"""
    cfg = RigConfig(spec=SPEC, tasks=TASK, out=str(tmp_path / "pool"), max_steps=40, workers=2,
                    policy="random:3", target="sr:0.7-0.9", rounds=1, designer="writer")
    rig(cfg, registry=registry)
    from envh_rigger.journal import Journal

    (attempt,) = [e["attempt"] for e in Journal(tmp_path / "pool").events(kind="attempt")]
    assert attempt["layers"][0]["trust"] == "untrusted"
    assert attempt["result"]["n"] >= 1 and not attempt["result"]["error_classes"], attempt["result"]


NOOP = """
def filter_action(action, state, memo):
    return None
"""


@pytest.mark.parametrize("target", ["beats-baseline:0.2", "beats-baseline:0", "beats-baseline:-0.2"])
def test_a_candidate_that_changes_nothing_is_never_accepted_by_a_relative_target(registry, tmp_path, target):
    """A no-op contract over a policy that wins half its episodes by independent draws: the
    old band around a 5-rollout base estimate accepted such a candidate 24-81 % of the time.
    Now base and candidate play the same seeds and the paired lift test decides (at most
    0.025 + 0.0125 + 0.00625 over these three rounds; this run is repeatable)."""
    from envh_rigger.journal import Journal

    out = tmp_path / target.replace(":", "_")
    summary = _rig(registry, tmp_path, out.name, policy="rate", policy_options={"rates": {4: 0.5}, "fresh": True},
                   target=target, designer="writer", designer_options={"code": NOOP}, rounds=3)
    assert summary["stops"][f"toy24/{TASK}"] == "rounds", summary
    attempts = [e["attempt"] for e in Journal(out).events(kind="attempt")]
    assert len(attempts) == 3 and all(a["verdict"] == "rejected" for a in attempts)
    for a in attempts:
        lift = a["result"]["lift"]
        assert lift["verdict"] == "not" and lift["pairs"] >= 10 and "paired lift test" in a["reason"]
    assert [a["result"]["lift"]["alpha"] for a in attempts] == [0.025, 0.0125, 0.00625]
    report = (out / "report.md").read_text()
    assert "paired lift test" in report and "lift over the base on the same" in report
