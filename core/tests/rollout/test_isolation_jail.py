"""Untrusted contract code runs in its jail inside isolated pool workers too, at every
isolation level: a worker of the ``namespace`` level (uid 0 with no capabilities) could not
make the jail's user namespace, so every untrusted spec failed there."""

from __future__ import annotations

import os

import envh
import pytest
from envh.rollout.executors.pool import PoolExecutor
from envh.rollout.trajectory import EpisodeRequest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the isolation levels that hold as root need root")

CODE = "def filter_observation(observation, state, memo):\n    return observation.text.upper()\n"
SPEC = {"bridge": "toy24", "trust": "untrusted", "layers": [{"kind": "contract", "code": CODE}]}


@pytest.mark.parametrize("isolation", ["none", "user"])
def test_an_untrusted_contract_plays_in_a_pool_worker(registry, worker_env, isolation):
    data = envh.spec_to_data(envh.parse_spec(SPEC, registry), registry)
    request = EpisodeRequest(key="jailed", spec=data, spec_id=envh.spec_id(SPEC, registry), policy="solver",
                             max_steps=6)
    with PoolExecutor(1, isolation=isolation, **worker_env) as pool:
        (t,) = pool.run([request])
    assert t.error_class is None, t.error
    assert t.steps and all(s.observation.text == s.observation.text.upper() for s in t.steps)
    assert t.success


def test_ray_refuses_an_untrusted_spec_under_a_root_driver(registry, ray_executor):
    """An actor is a Ray worker: its code can submit tasks with a ``py_executable`` of its
    choosing, which the raylet starts as root outside any fence. So a root driver's Ray
    executor plays no untrusted spec (the pool's workers are no cluster members)."""
    data = envh.spec_to_data(envh.parse_spec(SPEC, registry), registry)
    request = EpisodeRequest(key="jailed-ray", spec=data, spec_id=envh.spec_id(SPEC, registry), policy="solver",
                             max_steps=6)
    with pytest.raises(envh.errors.EnvhError, match="Ray cannot fence untrusted specs"):
        list(ray_executor.run([request]))


def test_a_uid0_worker_cannot_start_the_jail_and_says_so_in_a_typed_error(registry, worker_env):
    """``namespace`` keeps uid 0, so the kernel's knobs in /proc are read-only binds there
    (root may write ``core_pattern`` by ownership alone: a program run as root on the
    host); with them the kernel refuses the jail a /proc of its own. The episode ends in a
    typed error, not a hang; ``user`` (the default) runs the jail."""
    data = envh.spec_to_data(envh.parse_spec(SPEC, registry), registry)
    request = EpisodeRequest(key="jailed", spec=data, spec_id=envh.spec_id(SPEC, registry), policy="solver",
                             max_steps=6, timeout_s=60)
    with PoolExecutor(1, isolation="namespace", **worker_env) as pool:
        (t,) = [t for t in pool.run([request]) if t.final]
    assert t.error_class == "env_error" and "ContractCodeError" in t.error, t.error
