"""Escapes found by attacking the sandbox after it was built; each stays fixed."""

from __future__ import annotations

import sys
import time

import envh
import pytest
from envh import Action, EnvHarness
from envh.errors import ContractCodeError, SpecError

TASK = None  # the default task (2, 3, 4)
ADD = Action(tool="combine", args={"i": 0, "j": 1, "op": "add"})


def test_an_untrusted_spec_cannot_raise_its_own_time_limit() -> None:
    """time_limit_ms comes from the same hostile spec: the jail caps it."""
    env = envh.make({"bridge": "toy24", "trust": "untrusted", "layers": [{
        "kind": "contract", "time_limit_ms": 1e9,
        "code": "import math\ndef filter_action(action, state, memo):\n    return math.factorial(10**8)\n"}]})
    env.reset(task=TASK, seed=0)
    t0 = time.monotonic()
    with pytest.raises(ContractCodeError, match="CPU time limit of 5100 ms|wall-clock limit of 12000 ms"):
        env.step(ADD)
    assert time.monotonic() - t0 < 13  # 5 s + the grace of CPU; 12 s of wall clock at worst
    env.close()


def test_an_untrusted_spec_cannot_import_a_python_class(tmp_path, monkeypatch) -> None:
    """Resolving 'module:Class' imports the module, running its code in this process."""
    marker = tmp_path / "imported"
    (tmp_path / "envh_adv_side_effect.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass X: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SpecError, match="not a contract class of an installed plugin"):
        envh.make({"bridge": "toy24", "trust": "untrusted",
                   "layers": [{"kind": "contract", "cls": "envh_adv_side_effect:X"}]})
    assert not marker.exists() and "envh_adv_side_effect" not in sys.modules


def test_deeply_nested_memo_is_a_typed_error_not_a_dead_jail() -> None:
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": (
        "def filter_action(action, state, memo):\n    x = []\n    for i in range(100000):\n"
        "        x = [x]\n    memo['deep'] = x\n")}]}, trust="untrusted")
    env.reset(task=TASK, seed=0)
    with pytest.raises(ContractCodeError):
        env.step(ADD)
    env.reset(task=TASK, seed=0)  # the jail answers again
    env.close()


class _LeaksARuntime(EnvHarness):
    """A (buggy) Python layer that puts a live object into ``info``."""

    kind = "leaky"

    def modify_transition(self, action, response, state):
        return type(response)(observation=response.observation, reward=response.reward,
                              info={**response.info, "handle": self})


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
def test_hooks_never_receive_runtime_objects_from_info(trust: str) -> None:
    from envh.bridges.toy24 import Toy24Env
    from envh.components.contract import CodeContract

    code = ("def modify_transition(action, response, state, memo):\n"
            "    memo['is_text'] = isinstance(response.info['handle'], str)\n")
    env = CodeContract(_LeaksARuntime(Toy24Env()), code, trust=trust)
    env.reset(task=TASK, seed=0)
    env.step(ADD)
    assert env.memo == {"is_text": True}
    env.close()


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
def test_a_huge_exception_message_is_truncated(trust: str) -> None:
    env = envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": (
        "def filter_action(action, state, memo):\n    raise ValueError('x' * 5000000)\n")}]}, trust=trust)
    env.reset(task=TASK, seed=0)
    with pytest.raises(ContractCodeError) as info:
        env.step(ADD)
    assert len(str(info.value)) < 5000
    env.close()


def test_a_python_component_forcing_success_fails_the_component_suite() -> None:
    """What ComponentContract's failing play catches: a step() that forges the reward."""
    from envh.bridges.toy24 import Toy24Env
    from envh.harness import audit_stack

    class Forger(EnvHarness):
        kind = "forger"

        def step(self, action):
            resp = self.inner.step(action)
            return type(resp)(observation=resp.observation, reward=1.0, terminated=resp.terminated,
                              info=resp.info)

    env = Forger(Toy24Env())
    assert any("step() is overridden" in f for f in audit_stack(env))


def test_mixins_are_refused_and_attribute_interceptors_recorded() -> None:
    from envh.bridges.toy24 import Toy24Env
    from envh.harness import audit_stack

    class Always:
        def evaluate(self):
            return envh.EvaluationResult(success=True, score=1.0)

    with pytest.raises(envh.errors.SealedVerifierError, match="through .*Always in its MRO"):
        type("Mixed", (Always, EnvHarness), {"kind": "mixed"})
    intercept = type("Intercept", (EnvHarness,), {
        "kind": "i", "__getattribute__": lambda s, n: object.__getattribute__(s, n)})
    assert any("__getattribute__" in f for f in audit_stack(intercept(Toy24Env())))
    with pytest.raises(envh.errors.SealedVerifierError):
        EnvHarness.__getattribute__ = lambda s, n: None  # type: ignore[method-assign]


def test_a_proxy_inner_is_found_and_the_base_is_still_the_bridge() -> None:
    from envh.harness import audit_stack, base_envs

    env = envh.make({"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 5}]})
    real = env.inner

    class Proxy(envh.ActionableEnv):  # forwards everything, lies about the verdict
        def __getattr__(self, name):
            return getattr(real, name)

        tools = reset = step = observe = get_env_state = env_state_schema = save_state = None  # type: ignore
        from_state = list_tasks = None  # type: ignore

        def evaluate(self):
            return envh.EvaluationResult(success=True, score=1.0)

    env.inner = Proxy()
    assert base_envs(env) == [real]
    assert any("inner is not the env" in f for f in audit_stack(env))
