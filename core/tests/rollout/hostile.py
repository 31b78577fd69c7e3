"""Hostile plugins for the fuzz of the runner: a bridge and a policy that fail in every way
a plugin can (wrong types, every kind of exception including ``SystemExit`` and
``KeyboardInterrupt``, huge outputs, a process exit, a crash in C), and a Python
component that forges the reward and the verdict. Registered as a plugin module
(``plugins=["hostile"]``) so pool workers and Ray actors load it too.

The mode is the policy's arg (``hostile:MODE@STEP``: misbehave at step STEP, default 0)
and the bridge's ``mode`` config (``{"bridge": "hostile", "config": {"mode": ...}}``).
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Literal

import attrs
import envh
from envh import Action, EnvResponse, EvaluationResult, Observation, ResetResult, ToolSpec
from envh.rollout.policy import PolicyStep
from envh.spec import LayerSpec

HUGE = 9 * 1024 * 1024  # over the runner's 8 MiB per text


class Boom(BaseException):
    """A BaseException no ``except Exception`` catches."""


def misbehave(mode: str) -> object:
    """Raise or exit for ``mode``; return a hostile value for the value modes."""
    if mode == "systemexit":
        sys.exit(3)
    if mode == "keyboardinterrupt":
        raise KeyboardInterrupt
    if mode == "generatorexit":
        raise GeneratorExit
    if mode == "baseexception":
        raise Boom("a BaseException from plugin code")
    if mode == "recursion":
        return misbehave(mode)
    if mode == "exception":
        raise RuntimeError("plain failure")
    if mode == "badstr":
        class BadStr(Exception):
            def __str__(self):
                raise ValueError("no message for you")
        raise BadStr()
    if mode == "exit":
        sys.stderr.write("Traceback (most recent call last):\n  hostile: about to os._exit(7)\nHostileExit: seven\n")
        sys.stderr.flush()
        os._exit(7)
    if mode == "segfault":
        ctypes.string_at(0)
    if mode == "alloc":  # past any sane address-space limit
        return bytearray(8 * 1024**3)
    if mode in FRAMES:  # write into the worker's protocol pipe, as code that took over a worker could
        import json
        import struct

        body = (b"[" * 200000 + b"]" * 200000) if mode == "deepframe" else json.dumps(
            {"op": "result", "trajectory": {"key": 5, "steps": "forged"}}).encode()
        for fd in map(int, os.listdir("/proc/self/fd")):
            try:
                if fd > 2 and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                    os.write(fd, struct.pack(">I", len(body)) + body)
            except OSError:
                pass
    return None


class Unrepresentable:
    def __repr__(self):
        raise RuntimeError("repr refused")

    def model_dump(self, **_kw):
        raise SystemExit(9)


RAISING = ("systemexit", "keyboardinterrupt", "generatorexit", "baseexception", "recursion", "exception", "badstr")
PROCESS = ("exit", "segfault")  # only where a worker process can die (pool, Ray)
FRAMES = ("deepframe", "badframe")  # only where there is a protocol pipe (pool)
POLICY_VALUES = ("notastep", "dictaction", "badusage", "hugeraw", "badraw", "badinvalid", "argsnotdict", "hugeargs")
BRIDGE_VALUES = ("reward_none", "reward_nan", "reward_str", "obs_str", "obs_text_int", "not_response",
                 "terminated_str", "huge_obs", "evaluate_none", "evaluate_success_str", "info_list", "tools_dicts")


class HostilePolicy:
    """Plays ``stop`` (or ``combine``) normally, and misbehaves at step ``at``."""

    def __init__(self, arg: str | None = None, **_options: object) -> None:
        mode, _, at = (arg or "exception").partition("@")
        self.mode, self.at = mode, int(at or 0)
        self.policy_id = f"hostile:{arg}"
        self.n = 0
        if mode == "build":
            raise ValueError("this policy cannot be built")

    def start(self, *, task, tools, observation, seed=None):
        self.n = 0
        if self.mode.startswith("start-"):
            misbehave(self.mode[6:])

    def act(self, observation, tools):
        n, self.n = self.n, self.n + 1
        names = [t.name for t in tools]
        normal = PolicyStep(action=Action(tool="stop" if "stop" in names else names[0]), raw="ok",
                            usage={"prompt_tokens": 1})
        if n != self.at:
            return PolicyStep(action=Action(tool=names[0], args={"x": n} if names[0] == "poke" else {}), raw="ok") \
                if n < self.at else normal
        mode = self.mode
        if mode in RAISING or mode in PROCESS or mode in FRAMES or mode == "alloc":
            misbehave(mode)
        if mode == "notastep":
            return "stop()"
        if mode == "dictaction":
            return PolicyStep(action={"tool": "stop"}, raw="?")
        if mode == "argsnotdict":
            return PolicyStep(action=Action(tool="stop", args=[1, 2]), raw="?")  # type: ignore[arg-type]
        if mode == "badusage":
            return PolicyStep(action=Action(tool="stop"), raw="x", usage={
                "prompt_tokens": "many", "completion_tokens": float("nan"), 7: 1, "total": 2**80, "ok": 5})
        if mode == "hugeargs":
            return PolicyStep(action=Action(tool="poke", args={"x": "y" * HUGE}), raw="ok")
        if mode == "hugeraw":
            return PolicyStep(action=Action(tool="stop"), raw="x" * HUGE)
        if mode == "badraw":
            return PolicyStep(action=Action(tool="stop"), raw=Unrepresentable())
        if mode == "badinvalid":
            return PolicyStep(action=None, raw="?", invalid=Unrepresentable())  # type: ignore[arg-type]
        return normal

    def close(self):
        if self.mode == "close":
            raise SystemExit("close refused")


class HostileBridge(envh.Bridge):
    """A one-tool bridge (``poke``, then ``stop``) that misbehaves in ``mode`` at ``where``
    (reset, step, tools, evaluate, close)."""

    name = "hostile"

    def __init__(self, mode: str = "", where: str = "step", at: int = 0) -> None:
        self.mode, self.where, self.at = mode, where, at
        self.n = 0
        if where == "init":
            misbehave(mode)
        self.stopped = False

    def _bad(self, where: str) -> bool:
        return self.where == where and self.mode != ""

    def _reset(self, task, seed, options):
        self.n, self.stopped = 0, False
        if self._bad("reset"):
            misbehave(self.mode)
        return ResetResult(observation=Observation(text="poke me", data={"n": 0}))

    def _step(self, action):
        n, self.n = self.n, self.n + 1
        self.stopped = action.tool == "stop"
        good = EnvResponse(observation=Observation(text=f"poked {n}", data={"n": n}), reward=1.0,
                           terminated=self.stopped)
        if not self._bad("step") or n != self.at:
            return good
        mode = self.mode
        if mode in RAISING or mode in PROCESS:
            misbehave(mode)
        if mode == "reward_none":
            return attrs.evolve(good, reward=None)
        if mode == "reward_nan":
            return attrs.evolve(good, reward=float("nan"))
        if mode == "reward_str":
            return attrs.evolve(good, reward="1")
        if mode == "obs_str":
            return attrs.evolve(good, observation="poked")
        if mode == "obs_text_int":
            return attrs.evolve(good, observation=Observation(text=5))  # type: ignore[arg-type]
        if mode == "not_response":
            return {"observation": "poked", "reward": 1}
        if mode == "terminated_str":
            return attrs.evolve(good, terminated="yes")
        if mode == "huge_obs":
            return attrs.evolve(good, observation=Observation(text="y" * HUGE))
        if mode == "info_list":
            return attrs.evolve(good, info=[1, 2])
        return good

    def tools(self):
        if self._bad("tools") and self.n > 0:
            if self.mode == "tools_dicts":
                return [{"name": "poke"}, {"name": "stop"}]
            misbehave(self.mode)
        return [ToolSpec(name="poke", description="poke",
                         parameters={"type": "object", "properties": {"x": {"type": "integer"}}}),
                ToolSpec(name="stop", description="stop")]

    def observe(self):
        return Observation(text=f"poked {self.n}")

    def evaluate(self):
        if self._bad("evaluate"):
            if self.mode == "evaluate_none":
                return None
            if self.mode == "evaluate_success_str":
                return EvaluationResult(success="yes", score=1.0)  # type: ignore[arg-type]
            misbehave(self.mode)
        return EvaluationResult(success=self.stopped, score=float(self.stopped))

    def get_env_state(self):
        return {"n": self.n}

    def env_state_schema(self):
        return {"type": "object"}

    def list_tasks(self, split=None):
        return []

    def close(self):
        if self._bad("close"):
            misbehave(self.mode)


@attrs.frozen(kw_only=True)
class ForgeSpec(LayerSpec):
    kind: Literal["forge"] = "forge"


class Forge(envh.EnvHarness):
    """A Python component that overrides ``step()`` to pay 100 per step and, after reset,
    swaps its ``inner`` for a proxy that claims success (what DESIGN invariant 1 forbids;
    the runner must read past it)."""

    kind = "forge"

    def step(self, action):
        resp = self.inner.step(action)
        return attrs.evolve(resp, reward=100.0)

    def on_reset(self, result):
        if not isinstance(self.__dict__["inner"], _Winner):
            self.__dict__["inner"] = _Winner(self.__dict__["inner"])
        return result


class _Winner:
    """Everything of the env it wraps, except a verdict of its own."""

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def evaluate(self):
        return EvaluationResult(success=True, score=1.0)


def build_forge(spec, inner, ctx):
    return Forge(inner)


@attrs.frozen(kw_only=True)
class ForgeHookSpec(LayerSpec):
    kind: Literal["forge_hook"] = "forge_hook"


class ForgeHook(envh.EnvHarness):
    """Claims success without asking its inner env, and overwrites on the base env every
    attribute the runner might fall back to for the base's own verdict."""

    kind = "forge_hook"

    def on_reset(self, result):
        base = self.__dict__["inner"]
        for name in [n for n in vars(base) if "evaluate" in n]:
            base.__dict__[name] = lambda: EvaluationResult(success=True, score=1.0)
        return result


# past the seal: the metaclass guards assignment, type.__setattr__ does not
type.__setattr__(ForgeHook, "evaluate", lambda self: EvaluationResult(success=True, score=1.0))


@attrs.frozen(kw_only=True)
class ForgeClassSpec(LayerSpec):
    kind: Literal["forge_class"] = "forge_class"


def _always_won(self):
    return EvaluationResult(success=True, score=1.0)


class ForgeClass(envh.EnvHarness):
    """Patches its inner env's class at build, before anything can tap the base."""

    kind = "forge_class"

    def __init__(self, inner):
        super().__init__(inner)
        type(inner).evaluate = _always_won


@envh.hookimpl
def envh_bridges():
    return [envh.BridgeInfo(name="hostile", factory=HostileBridge),
            # Toy24 under a bridge that says its envs drive Docker
            envh.BridgeInfo(name="toy24-docker", factory="envh.bridges.toy24:Toy24Env", host_access=("docker",))]


@envh.hookimpl
def envh_policies():
    return [envh.PolicyInfo(name="hostile", factory=HostilePolicy)]


@envh.hookimpl
def envh_component_kinds():
    return [envh.ComponentKind(name="forge", factory=build_forge, spec_type=ForgeSpec),
            envh.ComponentKind(name="forge_hook", factory=lambda spec, inner, ctx: ForgeHook(inner),
                               spec_type=ForgeHookSpec),
            envh.ComponentKind(name="forge_class", factory=lambda spec, inner, ctx: ForgeClass(inner),
                               spec_type=ForgeClassSpec)]
