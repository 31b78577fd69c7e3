"""What the jail sends back is bounded before the host decodes it: a small answer must
not become a huge object graph in the host process."""

from __future__ import annotations

import resource

import envh
import pytest
from envh import Action
from envh.errors import ContractCodeError

ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("payload", ["[[]] * 6000000", "[{}] * 6000000", "[0.5] * 7000000"])
def test_a_memo_of_many_small_values_is_refused_before_the_host_decodes_it(payload: str) -> None:
    """24 MB of '[],' in the jail's memo decoded to 450 MB of lists in the host."""
    code = f"def filter_action(action, state, memo):\n    memo['x'] = {payload}\n"
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]}, trust="untrusted")
    env.reset(task=None, seed=0)
    before = _rss_mb()
    with pytest.raises(ContractCodeError, match="JSON values|byte limit|jail"):
        env.step(ADD)
    assert _rss_mb() - before < 150
    assert env.memo == {}
    env.close()


def test_the_jail_answers_again_after_refusing_an_answer() -> None:
    code = ("def filter_action(action, state, memo):\n    if memo.get('big'):\n"
            "        memo['x'] = [[]] * 6000000\n    memo['n'] = memo.get('n', 0) + 1\n")
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]}, trust="untrusted")
    env.reset(task=None, seed=0)
    env.step(ADD)
    env.memo["big"] = True
    with pytest.raises(ContractCodeError):
        env.step(ADD)
    env.memo.pop("big")
    env.reset(task=None, seed=0)
    env.step(ADD)
    assert env.memo == {"n": 1}
    env.close()
