"""Fuzz the runner: random and malformed actions on Toy24 under every stack kind (stage,
contract code, chain, budget, and all of them composed), in-process and through the
pool. No exception may escape and every trajectory must be complete and consistent."""

from __future__ import annotations

import envh
import pytest
from envh.rollout.executors.pool import PoolExecutor
from envh.rollout.runner import run_episode
from envh.rollout.trajectory import (
    ERROR_CLASSES,
    EpisodeRequest,
    Trajectory,
    trajectory_from_json,
    trajectory_to_json,
)
from envh.rollout.warm import Warm
from envh.types import Observation

TASKS = [envh.TaskRef(suite="toy24", split=s, instance_id=i)
         for s, i in (("easy", "2,3,4"), ("medium", "1,2,6,6"), ("hard", "3,3,8,8"))]
CONTRACT = """
def filter_action(action, state, memo):
    memo['n'] = memo.get('n', 0) + 1
    if action.tool == 'combine' and action.args.get('op') == 'div':
        return Block(reason='division is closed today')
    if action.tool == 'combine' and action.args.get('op') == 'sub':
        return Action(tool='combine', args={'i': action.args['j'], 'j': action.args['i'], 'op': 'sub'})
    return None

def modify_transition(action, response, state, memo):
    if len(state['numbers']) == 1 and not response.terminated:
        return evolve(response, observation=Observation(text='One number left: call stop().'))
    return None

def filter_observation(observation, state, memo):
    return observation.text + ' [moves so far: ' + str(memo.get('n', 0)) + ']'
"""
FLAKY = """
def filter_action(action, state, memo):
    memo['n'] = memo.get('n', 0) + 1
    if memo['n'] > 6:
        raise ValueError('contract gave up after six actions')
    return None
"""
STAGE = {"kind": "stage", "actions": [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}]}
LEG = {"bridge": "toy24"}
STACKS = {
    "bare": [],
    "stage": [STAGE],
    "contract": [{"kind": "contract", "code": CONTRACT}],
    "flaky-contract": [{"kind": "contract", "code": FLAKY}],
    "chain-sequential": [{"kind": "chain", "legs": [LEG], "carry": True}],
    "chain-alternate": [{"kind": "chain", "legs": [LEG], "mode": "alternate"}],
    "budget": [{"kind": "budget", "max_steps": 5, "max_repeats": 3}],
    "composed": [STAGE, {"kind": "contract", "code": CONTRACT}, {"kind": "budget", "max_steps": 12},
                 {"kind": "chain", "legs": [LEG]}],
}
POLICIES = [("random:{seed}", {"invalid_rate": 0.3, "weights": {"stop": 0.05}}), ("fuzz:{seed}", {})]


def requests(registry, seeds=range(6), max_steps=25):
    out = []
    for name, layers in STACKS.items():
        spec = {"bridge": "toy24", "layers": layers}
        data, sid = envh.spec_to_data(envh.parse_spec(spec, registry), registry), envh.spec_id(spec, registry)
        for policy, options in POLICIES:
            for seed in seeds:
                out.append(EpisodeRequest(
                    key=f"{name}/{policy.format(seed=seed)}", spec=data, spec_id=sid, task=TASKS[seed % 3],
                    seed=seed, policy=policy.format(seed=seed), policy_options=options, max_steps=max_steps))
    return out


def check_complete(t: Trajectory, request: EpisodeRequest) -> None:
    assert isinstance(t, Trajectory) and t.final and t.key == request.key
    assert t.spec_id == request.spec_id and t.task == request.task and t.seed == request.seed
    assert t.stop in ("terminated", "truncated", "max_steps", "error")
    if t.error_class is not None:
        assert t.error_class in ERROR_CLASSES and t.error and t.stop == "error"
    else:
        assert t.verdict is not None and t.stop != "error" and t.policy_id and t.versions
    assert [s.index for s in t.steps] == list(range(len(t.steps))) and len(t.steps) <= request.max_steps
    for step in t.steps:
        assert isinstance(step.observation, Observation)
        if step.proposed is None:
            assert step.invalid and step.executed is None and step.blocked is None
        elif step.blocked is not None:
            assert step.executed is None and step.error["type"] == "blocked"
        else:
            assert step.executed is not None
    if t.steps and t.stop in ("terminated", "truncated"):
        last = t.steps[-1]
        assert (last.terminated if t.stop == "terminated" else last.truncated)
    assert trajectory_from_json(trajectory_to_json(t)) == t


def test_fuzz_inline_every_stack_kind(registry):
    warm = Warm(registry)
    seen_errors, seen_stops = set(), set()
    try:
        for request in requests(registry):
            t = run_episode(request, warm)
            check_complete(t, request)
            seen_errors.add(t.error_class)
            seen_stops.add(t.stop)
    finally:
        warm.close()
    # the fuzz reached the interesting paths, not just one
    assert {"env_error", None} <= seen_errors
    assert {"terminated", "truncated", "max_steps"} <= seen_stops


def test_fuzz_through_the_pool_gives_the_same_trajectories(registry, worker_env):
    reqs = requests(registry, seeds=range(3))
    warm = Warm(registry)
    try:
        inline = {r.key: run_episode(r, warm) for r in reqs}
    finally:
        warm.close()
    with PoolExecutor(2, **worker_env) as pool:
        pooled = {t.key: t for t in pool.run(reqs)}
    assert set(pooled) == set(inline)
    for request in reqs:
        a, b = inline[request.key], pooled[request.key]
        check_complete(b, request)
        if request.policy.startswith("random"):
            continue  # its calls depend on how many episodes the policy object played
        assert [(s.proposed, s.executed, s.observation, s.reward) for s in a.steps] == \
               [(s.proposed, s.executed, s.observation, s.reward) for s in b.steps]
        assert (a.verdict, a.error_class, a.stop) == (b.verdict, b.error_class, b.stop)


@pytest.mark.parametrize("max_steps", [1, 3])
def test_tiny_step_limits(registry, max_steps):
    warm = Warm(registry)
    try:
        for request in requests(registry, seeds=range(2), max_steps=max_steps):
            check_complete(run_episode(request, warm), request)
    finally:
        warm.close()
