"""The playground against the jail's limits: sessions whose specs hold many jails must not
lock every later user out (moved here with the UI from core's containment attacks)."""

from __future__ import annotations

import os

import pytest
import yaml
from envh.jail import bwrap_path, process, stacks
from envh_ui import playground as pg

UPPER = "def filter_observation(observation, state, memo):\n    return observation.text.upper()\n"
needs_bwrap = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                 reason="bubblewrap not installed (dev/setup.d/jail.sh)")


# == 8. the playground can hold every jail, and then never recovers ==============================
# MAX_SESSIONS (8) x MAX_PER_STACK (4) == MAX_LIVE (32): eight playground sessions whose
# spec is a contract plus a chain of three contract legs hold every jail process of the
# server. The next new() builds before it evicts the oldest session, so its build gets a
# JailError and evicts nothing: every later new() and check() (its check_contract_code
# needs a jail of its own) fails for every user, until the server restarts. Scaled here to
# 2 sessions and 8 jails (the same ratio).
@needs_bwrap
def test_the_playground_recovers_when_its_sessions_hold_every_jail(monkeypatch: pytest.MonkeyPatch) -> None:
    assert pg.MAX_SESSIONS * stacks.MAX_PER_STACK < process.MAX_LIVE  # the real numbers leave room
    monkeypatch.setattr(pg, "MAX_SESSIONS", 2)
    monkeypatch.setattr(process, "MAX_LIVE", process.live_count() + 2 * stacks.MAX_PER_STACK)
    leg = {"bridge": "toy24", "layers": [{"kind": "contract", "code": UPPER}]}
    hog = yaml.safe_dump({"bridge": "toy24", "layers": [{"kind": "contract", "code": UPPER},
                                                        {"kind": "chain", "legs": [leg] * 3}]})
    play = pg.Playground()
    try:
        for _ in range(2):
            assert "session" in play.new(hog, ""), "a hog session could not be built"
        answer = play.new(pg.DEFAULT_SPEC, "")
        assert "session" in answer, answer.get("error")
    finally:
        play.close()
