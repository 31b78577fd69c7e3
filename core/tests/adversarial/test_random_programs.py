"""Random programs over the allowed grammar: whatever they do, the only exception is a
``ContractCodeError`` and no call hangs (hypothesis; untrusted tier, shared jail)."""

from __future__ import annotations

import time

import envh
from envh import Action
from envh.errors import ContractCodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TASK = None  # the default task (no task list to build per bridge)
ACTIONS = [Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})]

LEAVES = st.sampled_from([
    "0", "1", "2", "7", "-3", "10**6", "'ab'", "'x'", "n", "s", "memo.get('k', 0)", "observation.text",
    "len(observation.text)", "state['numbers']", "observation.data", "[1, 2, 3]", "(1, 'a')", "{'a': 1}",
    "None", "True", "math.pi", "re.findall('[0-9]+', observation.text)"])
UNARY = ["len({})", "str({})", "sorted({})", "sum({})", "abs({})", "list({})", "set({})", "repr({})",
         "re.sub('a+', 'b', str({}))", "json.dumps({})", "json.loads(json.dumps({}))", "max({}, 1)",
         "[x for x in {}]", "{{k: 1 for k in str({})}}", "sum(itertools.islice(itertools.count(), {}))",
         "range({})", "math.factorial({})", "bytes({})", "itertools.repeat({}, 3)", "-({})", "not {}",
         "collections.Counter(str({}))", "functools.reduce(lambda a, b: a, [{}, 1])", "textwrap.fill(str({}))"]
BINARY = ["({} + {})", "({} * {})", "({} ** {})", "({} << {})", "({} // {})", "({} % {})", "({} == {})",
          "({} < {})", "({} and {})", "({} or {})", "({})[{}]", "min({}, {})", "({} if n else {})"]


def expressions() -> st.SearchStrategy[str]:
    return st.recursive(
        LEAVES,
        lambda inner: st.one_of(
            st.builds(lambda f, a: f.format(a), st.sampled_from(UNARY), inner),
            st.builds(lambda f, a, b: f.format(a, b), st.sampled_from(BINARY), inner, inner)),
        max_leaves=6)


def statements(depth: int = 2) -> st.SearchStrategy[list[str]]:
    simple = st.one_of(
        st.builds("n = {}".format, expressions()),
        st.builds("s = {}".format, expressions()),
        st.builds("memo['k'] = {}".format, expressions()),
        st.builds("return {}".format, expressions()),
        st.just("n = n + 1"), st.just("pass"))
    if depth == 0:
        return simple.map(lambda s: [s])
    body = st.lists(statements(depth - 1), min_size=1, max_size=3).map(lambda ls: [x for b in ls for x in b])
    indent = body.map(lambda lines: ["    " + line for line in lines])
    compound = st.one_of(
        st.builds(lambda c, b: [f"if {c}:", *b], expressions(), indent),
        st.builds(lambda c, b: [f"while {c}:", *b], expressions(), indent),
        st.builds(lambda e, b: [f"for x in {e}:", *b], expressions(), indent),
        st.builds(lambda b: ["try:", *b, "except Exception:", "    n = -1"], indent))
    return st.one_of(simple.map(lambda s: [s]), compound)


PROGRAMS = st.lists(statements(), min_size=1, max_size=4).map(
    lambda blocks: "import re, json, math, itertools, collections, functools, textwrap\n"
                   "def filter_observation(observation, state, memo):\n    n = 0\n    s = ''\n"
                   + "".join(f"    {line}\n" for b in blocks for line in b))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(PROGRAMS)
def test_random_programs_raise_only_typed_errors_and_never_hang(source: str) -> None:
    t0 = time.monotonic()
    try:
        env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": source,
                                                        "time_limit_ms": 100}]}, trust="untrusted")
    except ContractCodeError:
        return
    try:
        for call in (lambda: env.reset(task=TASK, seed=0), *(lambda a=a: env.step(a) for a in ACTIONS)):
            try:
                call()
            except ContractCodeError:
                pass
    finally:
        env.close()
    # two hook calls, each at worst killed at its wall-clock limit and the jail restarted
    assert time.monotonic() - t0 < 60
