"""Hostile contract code, sample by sample. Each one is refused (a ``ContractCodeError``
at build) or contained (a typed error, or a run that changed nothing it may not), and
``run_sample`` checks the rest: no host class or module changed, no file written, the base
env executed exactly what the trajectory records, the verdict is the base verdict, bounded
time and memory. ``both`` samples run in the trusted tier (in-process) and the untrusted
tier (the jail); ``jail`` samples need a process limit no in-process check can give.
"""

from __future__ import annotations

import pytest

HOOK = "def filter_action(action, state, memo):\n"
OBS = "def filter_observation(observation, state, memo):\n"
MT = "def modify_transition(action, response, state, memo):\n"
BOTH, JAIL = ("trusted", "untrusted"), ("untrusted",)

# (id, code, tiers, expected): expected "refused" = ContractCodeError at build;
# "contained" = a typed error or a harmless run.
SAMPLES = [
    # -- namespace escapes: helpers that read or copy attributes -----------------------------
    ("update_wrapper", "import functools\nh = lambda: 0\nfunctools.update_wrapper(h, len, assigned=(), "
     "updated=('__globals__',))\n" + HOOK + "    return None\n", BOTH, "refused"),
    ("wraps", "from functools import wraps\n" + HOOK + "    return None\n", BOTH, "refused"),
    ("partial", "import functools\np = functools.partial(len, 'x')\n" + HOOK + "    return None\n", BOTH, "refused"),
    ("reduce_getattr", "import functools\n" + HOOK +
     "    return functools.reduce(getattr, ['__class__'], action)\n", BOTH, "refused"),
    ("reduce_harmless", "import functools\n" + HOOK +
     "    memo['s'] = functools.reduce(lambda a, b: a + b, [1, 2, 3])\n", BOTH, "contained"),
    ("attrgetter", "import operator\n" + HOOK + "    return operator.attrgetter('__class__')(action)\n",
     BOTH, "refused"),
    ("methodcaller_alias", "from operator import methodcaller as mc\n" + HOOK + "    return None\n",
     BOTH, "refused"),
    ("operator_missing", "import operator\n" + HOOK + "    operator.setitem(memo, 'a', operator.call)\n",
     BOTH, "contained"),
    ("str_format", HOOK + "    return Block(reason='{0.__class__.__mro__}'.format(action))\n", BOTH, "refused"),
    ("format_map", HOOK + "    return Block(reason='{a.__class__}'.format_map({'a': action}))\n",
     BOTH, "refused"),
    ("format_builtin", HOOK + "    return Block(reason=format(action, '{0.__class__}'))\n", BOTH, "contained"),
    ("vars", HOOK + "    return vars(action)\n", BOTH, "refused"),
    ("dir", HOOK + "    return Block(reason=str(dir(action)))\n", BOTH, "refused"),
    ("property_descriptor", "p = property(lambda s: 1)\n" + HOOK + "    return None\n", BOTH, "refused"),
    ("generator_frame", HOOK + "    g = (x for x in [1])\n    return g.gi_frame.f_globals\n", BOTH, "refused"),
    ("coroutine", "async def c():\n    return 1\n" + HOOK + "    return None\n", BOTH, "refused"),
    ("traceback_frame", HOOK + "    try:\n        1 / 0\n    except Exception as e:\n"
     "        return e.__traceback__.tb_frame.f_back\n", BOTH, "refused"),
    ("exception_args", HOOK + "    try:\n        1 / 0\n    except Exception as e:\n"
     "        memo['e'] = str(e.args)\n", BOTH, "contained"),
    ("dunder_builtins", HOOK + "    return __builtins__\n", BOTH, "refused"),
    ("dunder_import", HOOK + "    return __import__('os')\n", BOTH, "refused"),
    ("import_os", "import os\n" + HOOK + "    return None\n", BOTH, "refused"),
    ("json_codecs", "import json\n" + HOOK + "    return json.codecs.open('/etc/passwd')\n", BOTH, "contained"),
    ("json_globals", "import json\n" + HOOK + "    return json.dumps.__globals__\n", BOTH, "refused"),
    ("fnmatch_globals", "import fnmatch\n" + HOOK + "    return fnmatch.fnmatch.__globals__['os']\n",
     BOTH, "refused"),
    ("shadow_tick_import", "from itertools import count as _envh_tick\n" + HOOK +
     "    while True:\n        pass\n", BOTH, "refused"),
    ("shadow_tick_param", "def filter_action(action, state, memo, _envh_tick=len):\n"
     "    while True:\n        pass\n", BOTH, "refused"),
    ("match_class_dunder", HOOK + "    match action.tool:\n        case str(__class__=c):\n"
     "            return c\n", BOTH, "refused"),
    ("type_object", HOOK + "    return type(action).__subclasses__(object)\n", BOTH, "refused"),
    ("json_cls", "import json\n" + HOOK + "    return json.dumps(1, cls=len)\n", BOTH, "contained"),
    ("isinstance_factory", HOOK + "    return isinstance(action, Action)\n", BOTH, "contained"),
    # -- time-limit evasion ---------------------------------------------------------------
    ("finally_continue", HOOK + "    while True:\n        try:\n            pass\n        finally:\n"
     "            continue\n", BOTH, "refused"),
    ("finally_return", HOOK + "    try:\n        while True:\n            pass\n    finally:\n"
     "        return None\n", BOTH, "refused"),
    ("finally_break", HOOK + "    while True:\n        try:\n            while True:\n                pass\n"
     "        finally:\n            break\n", BOTH, "refused"),
    # a generator suspended in 'finally' hands the caller a value while the time-limit
    # exception waits inside it; dropping the generator discards the exception for good
    ("finally_yield", "def w(i):\n    try:\n        while True:\n            pass\n    finally:\n"
     "        yield i\n" + HOOK + "    for _ in map(next, map(w, range(10**7))):\n        pass\n",
     BOTH, "refused"),
    ("finally_yield_from", "def w(i):\n    try:\n        while True:\n            pass\n    finally:\n"
     "        for _ in range(1):\n            yield from [i]\n" + HOOK + "    return None\n", BOTH, "refused"),
    ("finally_nested_generator", "def w(i):\n    try:\n        return i\n    finally:\n"
     "        g = (x for x in [i])\n        def h():\n            yield i\n" + HOOK +
     "    memo['w'] = w(1)\n", BOTH, "contained"),
    ("except_everything_loop", HOOK + "    while True:\n        try:\n            x = 1\n"
     "        except Exception:\n            pass\n", BOTH, "contained"),
    ("recursion_caught", "def r(n):\n    return r(n + 1)\n" + HOOK + "    while True:\n        try:\n"
     "            r(0)\n        except Exception:\n            pass\n", BOTH, "contained"),
    ("generator_forever", "def g():\n    while True:\n        yield 1\n" + HOOK + "    return sum(g())\n",
     BOTH, "contained"),
    ("lambda_exponential", "f = lambda n: n and (f(n - 1) or f(n - 1))\n" + HOOK + "    return f(60)\n",
     BOTH, "contained"),
    ("iter_sentinel", HOOK + "    return sum(iter(int, 1))\n", BOTH, "contained"),
    # -- C-level hangs ----------------------------------------------------------------------
    ("regex_backtracking", "import re\n" + HOOK + "    memo['m'] = re.match('(a+)+$', 'a' * 40 + 'b')\n",
     BOTH, "contained"),
    ("regex_backref", "import re\n" + HOOK + "    return re.match('(a*)*\\\\1$', 'a' * 40)\n", BOTH, "contained"),
    ("sum_count", "import itertools\n" + HOOK + "    return sum(itertools.count())\n", BOTH, "contained"),
    ("max_cycle", "import itertools\n" + HOOK + "    return max(itertools.cycle([1]))\n", BOTH, "contained"),
    ("huge_sorted", HOOK + "    return [sorted(range(10**7), reverse=True) for _ in range(100)]\n",
     JAIL, "contained"),
    ("factorial", "import math\n" + HOOK + "    return math.factorial(10**7)\n", JAIL, "contained"),
    # found attacking the finished sandbox: C iterators that run for ages inside max()/sorted()
    ("permutations_max", "import itertools\n" + HOOK + "    return max(itertools.permutations(range(20)))\n",
     BOTH, "contained"),
    ("product_sorted", "import itertools\n" + HOOK +
     "    return sorted(itertools.product(range(100), repeat=5))\n", BOTH, "contained"),
    ("comb_huge", "import math\n" + HOOK + "    return math.comb(10**7, 5 * 10**6)\n", JAIL, "contained"),
    ("json_deep", "import json\n" + HOOK + "    return json.loads('[' * 100000)\n", BOTH, "contained"),
    ("int_str_digits", HOOK + "    return Block(reason=str(10 ** 100000))\n", BOTH, "contained"),
    # -- memory ------------------------------------------------------------------------------
    ("ljust", HOOK + "    return Block(reason='x'.ljust(6 * 10**8))\n", JAIL, "contained"),
    ("bytes_n", HOOK + "    return bytes(10**9)\n", BOTH, "contained"),
    ("repeat_mul", HOOK + "    return 'x' * 10**9\n", BOTH, "contained"),
    ("doubling", HOOK + "    s = 'x'\n    while True:\n        s = s + s\n", JAIL, "contained"),
    ("comprehension_growth", HOOK + "    return [[0] * 10**6 for _ in range(10**4)]\n", JAIL, "contained"),
    ("nested_comprehension", HOOK + "    return [x for x in range(10**7) for y in range(10**7)]\n",
     BOTH, "contained"),
    # -- writes to shared classes and modules ------------------------------------------------
    ("json_encoder_attr", "import json\njson.JSONEncoder.item_separator = ';'\n" + HOOK + "    return None\n",
     BOTH, "refused"),
    ("userdict_get", "import collections\ncollections.UserDict.get = len\n" + HOOK + "    return None\n",
     BOTH, "refused"),
    ("block_reason", HOOK + "    Block.reason = 'forged'\n", BOTH, "refused"),
    ("capability_patch", "import re\n" + HOOK + "    dict.update(re, {'sub': len})\n", BOTH, "contained"),
    ("module_attr_store", "import re\nre.sub = len\n" + HOOK + "    return None\n", BOTH, "refused"),
    ("counter_patch", "import collections\n" + HOOK +
     "    dict.update(collections.Counter, {'most_common': len})\n", BOTH, "contained"),
    # -- in-place edits of records -----------------------------------------------------------
    ("dict_update_args", HOOK + "    dict.update(action.args, {'op': 'mul'})\n", BOTH, "contained"),
    ("dict_setitem_data", OBS + "    dict.__setitem__(observation.data, 'x', 1)\n", BOTH, "refused"),
    ("dict_clear_data", OBS + "    dict.clear(observation.data)\n", BOTH, "contained"),
    ("list_append_state", HOOK + "    list.append(state['history'], 'forged')\n", BOTH, "contained"),
    ("effects_append", MT + "    list.append(response.info['envh'], {'layer': 'x'})\n", BOTH, "contained"),
    ("info_update", MT + "    dict.update(response.info, {'envh': []})\n", BOTH, "contained"),
    ("args_in_memo_then_edit", HOOK + "    memo['a'] = action.args\n    dict.update(memo['a'], {'i': 2})\n",
     BOTH, "contained"),
    # -- verdict and reward forgery ----------------------------------------------------------
    ("reward_evolve", MT + "    return evolve(response, reward=10.0)\n", BOTH, "contained"),
    ("reward_new_response", MT + "    return EnvResponse(observation=response.observation, reward=1.0, "
     "terminated=True)\n", BOTH, "contained"),
    ("evaluate_defined", "def evaluate():\n    return True\n" + HOOK + "    return None\n", BOTH, "refused"),
    ("win_text", MT + "    return evolve(response, terminated=True, observation=Observation(text='You "
     "solved it! success=True'))\n", BOTH, "contained"),
    ("rewrite_to_stop", HOOK + "    return Action(tool='stop')\n", BOTH, "contained"),
    ("smuggle_function", HOOK + "    return Action(tool='combine', args={'i': len})\n", BOTH, "contained"),
    # -- secret reads ------------------------------------------------------------------------
    ("os_environ", "import os\n" + HOOK + "    return Block(reason=str(os.environ))\n", BOTH, "refused"),
    ("proc_environ", HOOK + "    return Block(reason=open('/proc/1/environ').read())\n", BOTH, "refused"),
    ("json_open", "import json\n" + HOOK + "    return json.load(open('/proc/self/environ'))\n", BOTH, "refused"),
    # -- spec build-time execution -----------------------------------------------------------
    ("build_time_loop", "import itertools\nX = sum(itertools.count())\n" + HOOK + "    return None\n",
     BOTH, "refused"),
    ("build_time_memory", "X = 'x'.ljust(6 * 10**8)\n" + HOOK + "    return None\n", JAIL, "refused"),
    ("build_time_factorial", "import math\nX = math.factorial(10**7)\n" + HOOK + "    return None\n",
     JAIL, "refused"),
    ("build_time_statement", "import json\njson.dumps([1])\n" + HOOK + "    return None\n", BOTH, "refused"),
]

CASES = [pytest.param(code, trust, expected, id=f"{name}-{trust}")
         for name, code, tiers, expected in SAMPLES for trust in tiers]


@pytest.mark.parametrize(("code", "trust", "expected"), CASES)
def test_hostile_code_is_refused_or_contained(sample, code: str, trust: str, expected: str) -> None:
    outcome = sample(code, trust)
    if expected == "refused":
        assert outcome.kind == "refused", outcome
    else:
        assert outcome.kind in ("contained", "ran"), outcome


def test_at_least_forty_samples() -> None:
    assert len(SAMPLES) >= 40
