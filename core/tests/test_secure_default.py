"""Containment v3, item 1: a spec's code runs in the jail unless the *caller* trusts it.

A spec file is data a user downloads or a designer writes. ``envh.make(spec)`` with no
``trust`` jails its contract code; only ``make(spec, trust="trusted")`` (or a command's
``--trust-code``) runs it in this process, and the spec's own ``trust: trusted`` raises
nothing. Each attack below hung or bloated the host when the default was in-process; each
is a typed ``ContractCodeError`` through the default path now, within its limits.
"""

from __future__ import annotations

import gc
import os
import resource
import time
from pathlib import Path

import envh
import pytest
from envh import Action, errors
from envh.components.contract import CodeContract
from envh.errors import ContractCodeError, SpecError
from envh.jail import bwrap_path, process, stacks

pytestmark = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                reason="the jail needs bubblewrap as root (dev/setup.d/jail.sh)")

ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})
UPPER = "def filter_observation(observation, state, memo):\n    return observation.text.upper()\n"
RECURSION_STARVED = '''
def spin(k):
    try:
        spin(k + 1)
    except Exception:
        pass
    while True:
        pass

def filter_action(action, state, memo):
    spin(0)
'''
#: The attacks of the issue: each held the host (memory or CPU) in the in-process tier.
ATTACKS = {
    "ljust": "memo['n'] = len('x'.ljust(10**9))",
    "counter-elements": "import collections\n    memo['n'] = sum(1 for _ in collections.Counter({'a': 10**10}).elements())",
    "perm": "import math\n    memo['n'] = math.perm(3 * 10**6, 10**6) % 7",
    "append-while-reading": "l = [1]\n    any(map(l.append, l))",
    "difflib": "import difflib\n    memo['r'] = difflib.SequenceMatcher(None, 'ab' * 6000, 'ba' * 6000, autojunk=False).ratio()",
    "recursion-starved-deadline": None,
}


def _spec(code: str, **layer: object) -> dict[str, object]:
    return {"bridge": "toy24", "layers": [{"kind": "contract", "code": code, **layer}]}


def _tier(env: object) -> str:
    return str(vars(env)["trust"])


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_every_attack_is_contained_by_the_default(attack: str) -> None:
    body = ATTACKS[attack]
    code = RECURSION_STARVED if body is None else f"def filter_action(action, state, memo):\n    {body}\n"
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with envh.make(_spec(code)) as env:
        assert _tier(env) == "untrusted"  # checked first: the in-process tier would hang here
        env.reset(task=env.list_tasks()[0], seed=0)
        t0 = time.monotonic()
        with pytest.raises(ContractCodeError):
            env.step(ADD)
        assert time.monotonic() - t0 < 10  # its 250 ms CPU limit and a grace, on a loaded machine
        env.reset(task=env.list_tasks()[0], seed=0)  # the stack goes on: the next call gets a fresh jail
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert grown_mb < 200, f"the host grew by {grown_mb:.0f} MB"


@pytest.mark.parametrize("where", ["spec", "layer", "both"])
def test_a_spec_cannot_trust_itself(where: str) -> None:
    spec = _spec(UPPER, **({"trust": "trusted"} if where in ("layer", "both") else {}))
    if where in ("spec", "both"):
        spec["trust"] = "trusted"
    with envh.make(spec) as env:
        assert _tier(env) == "untrusted"
    with envh.make(spec, trust="untrusted") as env:
        assert _tier(env) == "untrusted"
    with envh.make(spec, trust="trusted") as env:  # only the caller raises it
        assert _tier(env) == "trusted" and vars(env)["sandbox"] is not None


def test_a_spec_or_layer_marked_untrusted_lowers_a_trusted_call() -> None:
    with envh.make({**_spec(UPPER), "trust": "untrusted"}, trust="trusted") as env:
        assert _tier(env) == "untrusted"
    with envh.make(_spec(UPPER, trust="untrusted"), trust="trusted") as env:
        assert _tier(env) == "untrusted"


def test_an_unknown_trust_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="trust must be one of"):
        envh.make(_spec(UPPER), trust="yes")


def test_chain_legs_are_built_in_the_callers_tier() -> None:
    leg = _spec(UPPER)
    spec = {"bridge": "toy24", "layers": [{"kind": "chain", "legs": [leg, leg]}]}
    for trust, tier in ((None, "untrusted"), ("trusted", "trusted")):
        with envh.make(spec, trust=trust) as env:
            legs = vars(env)["legs"]
            assert len(legs) == 3 and all(_tier(leg_env) == tier for leg_env in legs[1:])  # legs[0]: the base


def test_a_code_contract_built_in_code_is_jailed_unless_it_says_trusted() -> None:
    from envh.bridges.toy24 import Toy24Env

    with CodeContract(Toy24Env(), UPPER) as env:
        assert _tier(env) == "untrusted"
    with CodeContract(Toy24Env(), UPPER, trust="trusted") as env:
        assert _tier(env) == "trusted"


# -- classes: installed code only, unless the caller trusts the spec ---------------------------
def test_a_class_of_an_installed_plugin_loads_by_default() -> None:
    reg = envh.make_plugin_manager(entry_points=False, plugins=[_plugin_module()])
    spec = {"bridge": "toy24", "layers": [{"kind": "contract", "cls": "envh_secure_default_plugin:Upper"}]}
    with envh.make(spec, registry=reg) as env:
        assert type(env).__name__ == "Upper"


@pytest.mark.parametrize("name", ["Unchecked", "Inherits"])
def test_a_plugin_class_must_declare_its_options_safe_for_untrusted_specs(name: str) -> None:
    """A plugin class runs its options in this process: only one that says it checks them
    as untrusted data (``spec_safe = True`` on the class itself, not inherited) loads by
    default."""
    reg = envh.make_plugin_manager(entry_points=False, plugins=[_plugin_module()])
    spec = {"bridge": "toy24", "layers": [{"kind": "contract", "cls": f"envh_secure_default_plugin:{name}"}]}
    with pytest.raises(SpecError, match="spec_safe"):
        envh.make(spec, registry=reg)
    with envh.make(spec, registry=reg, trust="trusted") as env:
        assert type(env).__name__ == name


def test_a_class_outside_envh_and_the_plugins_is_refused_before_import(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "envh_secure_side_effect.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nfrom envh import EnvHarness\nclass X(EnvHarness):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = {"bridge": "toy24", "layers": [{"kind": "contract", "cls": "envh_secure_side_effect:X"}]}
    with pytest.raises(SpecError, match="not a contract class of an installed plugin"):
        envh.make(spec)
    assert not marker.exists()
    for bad in ("os:system", "envh_secure_side_effect", ".envh:X", "envh.x;import os:X", "__import__:x"):
        with pytest.raises((SpecError, errors.EnvhError)):
            envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "cls": bad}]})
    assert not marker.exists()
    with envh.make(spec, trust="trusted"):  # the caller may trust it
        assert marker.exists()


@pytest.mark.parametrize("target", ["envh.components.contract:CodeContract",
                                    "envh_secure_default_plugin:CodeContract",
                                    "envh_secure_default_plugin:envh.components.contract.CodeContract",
                                    "envh.harness:EnvHarness"])
def test_envhs_own_classes_cannot_be_named_to_trust_code(target: str) -> None:
    """``CodeContract`` takes its tier as an option: named as a class, with
    ``config: {code, trust: trusted}``, it would run the code in this process. envh's own
    classes are not plugin code, also when a plugin module re-exports them."""
    reg = envh.make_plugin_manager(entry_points=False, plugins=[_plugin_module()])
    spec = {"bridge": "toy24", "layers": [{"kind": "contract", "cls": target,
                                           "config": {"code": ATTACK_PROBE, "trust": "trusted"}}]}
    with pytest.raises(SpecError, match="not a contract class of an installed plugin"):
        envh.make(spec, registry=reg)


ATTACK_PROBE = "def filter_action(action, state, memo):\n    memo['n'] = len('x'.ljust(10**9))\n"


def _plugin_module() -> object:
    """A plugin module registered in code (what an installed plugin's entry point gives)."""
    import sys
    import types

    mod = types.ModuleType("envh_secure_default_plugin")
    exec(  # noqa: S102 - a test plugin's source, defined here
        "import envh\n"
        "from envh import EnvHarness\n"
        "from envh.components.contract import CodeContract\n"
        "class Upper(EnvHarness):\n"
        "    kind = 'upper'\n"
        "    spec_safe = True\n"
        "class Unchecked(EnvHarness):\n"
        "    kind = 'unchecked'\n"
        "class Inherits(Upper):\n"
        "    pass\n", mod.__dict__)
    sys.modules[mod.__name__] = mod
    return mod


# -- jails are shared by spec content ----------------------------------------------------------
def test_many_stacks_of_one_spec_share_that_specs_jails() -> None:
    """A trainer builds one stack per slot: 40 stacks of one spec must not need 40 jails
    (32 is the process's limit); they share the spec's ``MAX_PER_STACK``, and another spec
    still gets jails of its own."""
    gc.collect()
    live_before = len(process._live)
    envs = [envh.make(_spec(UPPER)) for _ in range(40)]
    try:
        jails = {id(vars(e)["_jail"]) for e in envs}
        assert len(jails) <= stacks.MAX_PER_STACK
        assert len(process._live) - live_before <= stacks.MAX_PER_STACK
        with envh.make(_spec(UPPER + "\n# another spec\n")) as other:
            assert id(vars(other)["_jail"]) not in jails
        for env in envs[:3]:
            result = env.reset(task=env.list_tasks()[0], seed=0)
            assert result.observation.text.isupper()
    finally:
        for env in envs:
            env.close()
    del envs
    gc.collect()
    assert len(process._live) <= live_before  # the spec's jails end with its last stack


def test_stacks_of_different_specs_never_share_a_jail() -> None:
    a = [envh.make(_spec(UPPER)) for _ in range(2)]
    b = [envh.make(_spec(UPPER.replace("upper", "lower"))) for _ in range(2)]
    try:
        assert not {id(vars(e)["_jail"]) for e in a} & {id(vars(e)["_jail"]) for e in b}
    finally:
        for env in a + b:
            env.close()
