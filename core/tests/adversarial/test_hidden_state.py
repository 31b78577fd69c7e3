"""Hooks answer from their arguments and memo alone. Module-level lists, mutable default
arguments, closures made at top level and bound methods would carry data from one episode
(or env) to the next, out of reach of save/restore and replay: top-level values are frozen
after the code's top level runs, and stateful ones are refused."""

from __future__ import annotations

import envh
import pytest
from envh import Action
from envh.errors import ContractCodeError

ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})
HOOK = "def filter_action(action, state, memo):\n"
AGAIN = "        return Block(reason='seen in an earlier episode')\n"

CARRIERS = {
    "module_list": "SEEN = []\n" + HOOK + "    SEEN.append(1)\n    if len(SEEN) > 1:\n" + AGAIN,
    "module_dict": "SEEN = {}\n" + HOOK + "    n = SEEN.get('n', 0) + 1\n    SEEN.update(n=n)\n"
                   "    if n > 1:\n" + AGAIN,
    "default_list": "def filter_action(action, state, memo, hits=[]):\n    hits.append(1)\n"
                    "    if len(hits) > 1:\n" + AGAIN,
    "kwonly_default": "def filter_action(action, state, memo, *, hits=[]):\n    hits.append(1)\n"
                      "    if len(hits) > 1:\n" + AGAIN,
    "bound_method": "L = []\nPUSH = L.append\nCOUNT = L.count\n" + HOOK + "    PUSH(1)\n"
                    "    if COUNT(1) > 1:\n" + AGAIN,
    "closure": "def mk():\n    acc = []\n    return lambda: acc.append(1) or len(acc)\nTICK = mk()\n"
               + HOOK + "    if TICK() > 1:\n" + AGAIN,
    "iterator": "IT = iter(range(100))\n" + HOOK + "    if next(IT) > 0:\n" + AGAIN,
    "counter": "import collections\nC = collections.Counter()\n" + HOOK + "    C['x'] += 1\n"
               "    if C['x'] > 1:\n" + AGAIN,
    "deque": "import collections\nD = collections.deque()\n" + HOOK + "    D.append(1)\n"
             "    if len(D) > 1:\n" + AGAIN,
    "nested_in_tuple": "T = ([],)\n" + HOOK + "    T[0].append(1)\n    if len(T[0]) > 1:\n" + AGAIN,
}


def _two_episodes(code: str, trust: str) -> list[str]:
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]}, trust=trust)
    texts = []
    try:
        for _ in range(2):
            env.reset(task=None, seed=0)
            try:
                texts.append(env.step(ADD).observation.text)
            except ContractCodeError:
                texts.append("error")
    finally:
        env.close()
    return texts


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
@pytest.mark.parametrize("name", sorted(CARRIERS))
def test_no_state_survives_from_one_episode_to_the_next(name: str, trust: str) -> None:
    try:
        first, second = _two_episodes(CARRIERS[name], trust)
    except ContractCodeError:
        return  # refused at build: fine
    assert "earlier episode" not in second
    assert first == second


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
def test_constant_tables_still_read_like_the_literals(trust: str) -> None:
    code = ("import re, json\nP = re.compile('a')\nC = re.compile\nT = {'a': [1, (2, 3)], 's': {1, 2}}\n"
            "PLAN = json.loads('[{\"args\": {\"x\": [1]}}]')\nF = lambda x, d={'k': 1}: d['k'] + x\n"
            "def g():\n    return T['a']\nG = g\n" + HOOK +
            "    ok = (T['a'] == [1, (2, 3)] and 2 in T['s'] and F(1) == 2 and G() == [1, (2, 3)]\n"
            "          and PLAN[0]['args'] == {'x': [1]} and json.dumps(T['a']) == '[1, [2, 3]]'\n"
            "          and C('b').search('ab') is not None and P.search('a') is not None)\n"
            "    if not ok:\n        return Block(reason='constants changed meaning')\n")
    first, second = _two_episodes(code, trust)
    assert "constants changed meaning" not in first and first == second


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
def test_a_snapshot_restores_the_same_memo_however_often_it_is_loaded(trust: str) -> None:
    """Hooks change memo in place: a restored memo must not share lists with the snapshot."""
    code = (HOOK + "    h = memo.setdefault('h', [])\n    h.append(1)\n"
            "    return Block(reason='seen ' + str(len(h)))\n")
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]}, trust=trust)
    env.reset(task=None, seed=0)
    env.step(ADD)
    snap = env.save_state()
    texts = []
    for _ in range(3):
        env.from_state(snap)
        texts.append(env.step(ADD).observation.text)
    env.close()
    assert texts == ["Action blocked: seen 2"] * 3


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
def test_the_pattern_cache_cannot_be_read(trust: str) -> None:
    """re.compile.cache_info() counted what earlier episodes compiled."""
    code = "import re\n" + HOOK + "    re.compile('x' + str(len(memo)))\n" \
           "    return Block(reason=str(re.compile.cache_info().currsize))\n"
    first, second = _two_episodes(code, trust)
    assert first == second == "error"


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
def test_pattern_identity_does_not_tell_an_earlier_episode_filled_the_cache(trust: str) -> None:
    """'re.compile(p) is P' turned False once an earlier episode evicted p from the cache."""
    code = ("import re\nP = re.compile('p')\n" + HOOK +
            "    a = re.compile('p') is P\n    b = re.search('p', 'p').re is re.search('p', 'p').re\n"
            "    for i in range(300):\n        re.compile('junk' + str(i))\n"
            "    return Block(reason=str(a) + ' ' + str(b))\n")
    first, second = _two_episodes(code, trust)
    assert first == second == "Action blocked: False False"
