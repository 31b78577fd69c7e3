"""Secure by default, for the adaptive kinds (moved from core's "Containment v3" tests):
a spec's host paths (a curriculum's ``audit``, a workspace's ``library``) need the
caller's trust, a spec cannot grant it to itself, and a curriculum's coach is code that
comes with the spec, jailed in that spec's own group."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import envh
import pytest
from envh.errors import SpecError
from envh.jail import bwrap_path, process, stacks

pytestmark = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                reason="the jail needs bubblewrap as root (dev/setup.d/jail.sh)")

UPPER = "def filter_observation(observation, state, memo):\n    return observation.text.upper()\n"
COACH = "def coach(stats):\n    return None\n"


def _contract(code: str = UPPER, **layer: object) -> dict[str, object]:
    return {"kind": "contract", "code": code, **layer}


def _spec(*layers: dict[str, object], **top: object) -> dict[str, object]:
    return {"bridge": "toy24", "layers": list(layers), **top}


# -- host paths: refused by default ------------------------------------------------------------
def test_host_paths_are_refused_by_default_and_allowed_to_a_trusted_call(tmp_path: Path) -> None:
    spec = {"bridge": "toy24", "layers": [{"kind": "workspace", "library": str(tmp_path / "lib")}]}
    with pytest.raises(SpecError, match="may not name a host path.*trust='trusted'"):
        envh.make(spec)
    try:
        env = envh.make(spec, trust="trusted")
    except SpecError as exc:  # a workspace option the kind rejects for another reason
        assert "host path" not in str(exc), exc
    else:
        env.close()


# -- attacks through the public API with the default settings ---------------------------------
def test_a_curriculum_coach_is_jailed_in_its_specs_group_and_cannot_ask_for_trust() -> None:
    layer = {"kind": "curriculum", "training": True, "params": {"size": {"range": [3, 5], "init": 4, "step": 1}},
             "policy": {"type": "coach", "code": COACH}}
    spec = _spec(layer, trust="trusted")
    with envh.make(spec) as env:
        coach = env.curriculum.coach
        jail = vars(coach)["_jail"]
        assert jail in stacks.spec_jails(envh.spec_id(spec))
    with pytest.raises(SpecError, match="Unknown curriculum policy options"):
        envh.make(_spec({**layer, "policy": {**layer["policy"], "trust": "trusted"}}), trust=None)


@pytest.mark.parametrize("layer", [
    {"kind": "curriculum", "training": True, "params": {"size": {}}, "audit": "audit.jsonl"},
    {"kind": "curriculum", "training": True, "params": {"size": {}}, "audit": ""},
    {"kind": "workspace", "library": "lib"},
    {"kind": "workspace", "library": ""},
    {"kind": "workspace", "library": "../../lib"},
])
@pytest.mark.parametrize("where", ["top", "chain-leg", "leg-marked-trusted"])
def test_host_paths_are_refused_in_chain_legs_and_relative_or_empty(layer: dict[str, object], where: str,
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    if where == "top":
        spec = _spec(layer, trust="trusted")
    else:
        leg = _spec(layer, **({"trust": "trusted"} if where == "leg-marked-trusted" else {}))
        spec = _spec({"kind": "chain", "legs": [leg]})
    with pytest.raises(SpecError, match="may not name a host path"):
        envh.make(spec)
    assert list(tmp_path.iterdir()) == []


def test_one_spec_with_many_legs_and_a_coach_stays_within_its_share_of_jails() -> None:
    gc.collect()
    before = process.live_count()
    leg = _spec(_contract())
    coach = {"kind": "curriculum", "training": True, "params": {"size": {}}, "policy": {"type": "coach", "code": COACH}}
    spec = _spec(_contract(), coach, {"kind": "chain", "legs": [leg] * 6})
    envs = [envh.make(spec) for _ in range(2)]
    try:
        assert process.live_count() - before <= stacks.MAX_PER_STACK
    finally:
        for env in envs:
            env.close()
