"""``envh run`` jails a spec's code unless ``--trust-code`` says otherwise (containment
v3): the tier travels with each episode request, not in the spec, so a spec cannot pick it.

The probe hook allocates a 1 GB string: a trusted (in-process) hook in a pool worker
manages, the jail's 512 MB address space does not, so the outcome says which tier ran."""

from __future__ import annotations

import json

import envh
import pytest
from envh.rollout.executors.pool import PoolExecutor
from envh.rollout.trajectory import EpisodeRequest

from .test_cli import envh as envh_cli

PROBE = ("def filter_observation(observation, state, memo):\n"
         "    return observation.text + ' len=' + str(len('x'.ljust(10**9)))\n")
SPEC = {"bridge": "toy24", "trust": "trusted", "layers": [{"kind": "contract", "code": PROBE, "trust": "trusted"}]}


def _request(registry, trust: str | None) -> EpisodeRequest:
    data = envh.spec_to_data(envh.parse_spec(SPEC, registry), registry)
    extra = {} if trust is None else {"trust": trust}
    return EpisodeRequest(key=f"probe-{trust}", spec=data, spec_id=envh.spec_id(SPEC, registry), policy="solver",
                          max_steps=6, timeout_s=60, **extra)


@pytest.mark.parametrize("trust", [None, "trusted"])
def test_a_pool_worker_builds_the_spec_in_the_requests_tier(registry, worker_env, trust):
    with PoolExecutor(1, isolation="none", **worker_env) as pool:
        (t,) = [t for t in pool.run([_request(registry, trust)]) if t.final]
    if trust == "trusted":
        assert t.error_class is None and t.success, t.error
        assert "len=1000000000" in t.steps[0].observation.text
    else:  # the default: the jail, whatever the spec says of itself
        assert t.error_class == "env_error" and "MemoryError" in t.error, t.error


def test_envh_run_jails_unless_trust_code(tmp_path, cli_env):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    for flag, successes in (((), 0), (("--trust-code",), 1)):
        out = tmp_path / f"run{len(flag)}"
        envh_cli("run", str(spec), "--split", "medium", "--tasks", "1", "--policy", "solver", "--workers", "1",
                 "--isolation", "none", "--out", str(out), "--plugin", "rollout_policies", *flag, env=cli_env,
                 check=False)
        shown = json.loads(envh_cli("show", str(out), "--json", env=cli_env).stdout)
        assert shown[0]["episodes"] == 1 and shown[0]["successes"] == successes, shown
        assert shown[0]["manifest"]["config"].get("trust_code", False) is bool(flag)
