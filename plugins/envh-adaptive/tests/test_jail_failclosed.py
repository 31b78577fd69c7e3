"""Coaches in the jail (moved from core's fail-closed jail tests, issue 24): one spec's
coach never shares a jail with another spec's, so a coach whose call kills its jail
leaves the other spec's coach process running."""

from __future__ import annotations

import os
from pathlib import Path

import envh
import pytest
from envh.jail import bwrap_path
from envh_adaptive.components.curriculum import CurriculumLayer

pytestmark = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                reason="bubblewrap not installed (dev/setup.d/jail.sh)")


def coach_spec(code: str, audit: Path) -> dict:
    return {"bridge": "toy24", "layers": [{
        "kind": "curriculum", "training": True, "anchor": 0.0, "audit": str(audit),
        "params": {"size": {"range": [3, 5], "init": 3}},
        "policy": {"type": "coach", "code": code, "window": 1}}]}


def test_a_hostile_coach_does_not_reach_another_specs_coach(tmp_path: Path) -> None:
    """A coach whose call kills its jail: the coach of another spec keeps its process."""
    hang = "import math\ndef coach(stats):\n    return math.factorial(10**7)\n"
    up = "def coach(stats):\n    return {'size': 1}\n"
    hostile = envh.make(coach_spec(hang, tmp_path / "a.jsonl"), trust="trusted")  # the audit log is a host path
    victim = envh.make(coach_spec(up, tmp_path / "b.jsonl"), trust="trusted")
    try:
        curricula = [next(e for e in envh.iter_layers(env) if isinstance(e, CurriculumLayer)).curriculum
                   for env in (hostile, victim)]
        jail = curricula[1].coach._jail
        pid = jail.pid
        assert curricula[0].coach._jail is not jail and pid is not None
        decision = None
        while decision is None:
            decision = curricula[0].end_episode(True)
        assert decision["decision"] == "coach-failed", decision
        assert jail.pid == pid and jail.restarts == 0
        decision = None
        while decision is None:
            decision = curricula[1].end_episode(True)
        assert decision["decision"] == "coach" and decision["after"] == {"size": 4}, decision
    finally:
        hostile.close()
        victim.close()
