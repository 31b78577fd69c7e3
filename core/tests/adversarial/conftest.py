"""Shared checks for hostile contract code: what must hold after every sample, whatever
the code tried (issue: untrusted code v2)."""

from __future__ import annotations

import builtins
import collections
import fnmatch
import functools
import json
import os
import resource
import time
from collections.abc import Callable
from typing import Any

import attrs
import envh
import pytest
import re2  # noqa: F401  (its first import registers pybind11 state on builtins)
from envh import Action, Block, EnvResponse, Observation, errors
from envh.harness import EnvHarness, base_envs

TASK = None  # the default task: no per-bridge task list to build (keeps the suite fast)
PLAY = [Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}),
        Action(tool="combine", args={"i": 0, "j": 2, "op": "mul"}),
        Action(tool="combine", args={"i": 0, "j": 1, "op": "add"}), Action(tool="stop")]
CANARY_DIR = "/tmp/envh-adversarial-canary"
SECRET = "envh-adversarial-secret-value"

#: Host objects hostile code has tried to change: classes, modules, builtins.
WATCHED: dict[str, Any] = {
    "json.JSONEncoder": json.JSONEncoder, "json": json, "collections.UserDict": collections.UserDict,
    "collections": collections, "fnmatch": fnmatch, "functools": functools, "os": os,
    "builtins": builtins, "Block": Block, "Action": Action, "Observation": Observation,
    "EnvResponse": EnvResponse, "EnvHarness": EnvHarness, "str": str, "dict": dict, "attrs": attrs,
}


def snapshot() -> dict[str, dict[str, int]]:
    return {name: {k: id(v) for k, v in vars(obj).items()} for name, obj in WATCHED.items()}


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@attrs.frozen
class Outcome:
    kind: str  # "refused" (at build), "contained" (a typed error while playing), "ran"
    error: str | None
    seconds: float


def executed_per_trajectory(responses: list[EnvResponse]) -> list[dict[str, Any]]:
    """What the base env ran, according to the recorded layer effects."""
    out = []
    for proposed, resp in responses:
        effect = resp.info["envh"][-1]
        if effect["action"] == "blocked" or (resp.info.get("error") or {}).get("type") == "blocked":
            continue
        sent = effect.get("sent") or {"tool": proposed.tool, "args": envh.types.thaw(proposed.args)}
        out.append(sent)
    return out


def run_sample(code: str, trust: str, *, layer: dict[str, Any] | None = None,
               limit_s: float = 20.0) -> Outcome:
    """Build a Toy24 stack with ``code`` as a contract in tier ``trust``, play ``PLAY``, and
    check every invariant; the outcome."""
    before, rss, t0 = snapshot(), max_rss_mb(), time.monotonic()
    spec = {"bridge": "toy24", "layers": [layer or {"kind": "contract", "code": code}]}
    responses: list[tuple[Action, EnvResponse]] = []
    kind, error = "ran", None
    try:
        env = envh.make(spec, trust=trust)
    except errors.ContractCodeError as exc:
        kind, error, env = "refused", str(exc), None
    if env is not None:
        try:
            env.reset(task=TASK, seed=0)
            for action in PLAY:
                resp = env.step(action)
                responses.append((action, resp))
                if resp.terminated or resp.truncated:
                    break
        except errors.ContractCodeError as exc:
            kind, error = "contained", str(exc)
        base = base_envs(env)[0]
        recorded = executed_per_trajectory(responses)
        ran = base.save_state()["actions"]
        # the base env executed exactly what the trajectory records (an error step adds
        # nothing: the contract raised after the base step at most once)
        assert ran[: len(recorded)] == recorded and len(ran) - len(recorded) in (0, 1), (ran, recorded)
        verdict = env.evaluate()
        assert verdict == type(base).evaluate(base)
        with envh.make({"bridge": "toy24"}) as bare:
            bare.from_state(base.save_state())
            assert bare.evaluate() == verdict
        env.close()
    seconds = time.monotonic() - t0
    assert seconds < limit_s, f"took {seconds:.1f} s"
    assert snapshot() == before, "hostile code changed a host class or module"
    assert max_rss_mb() - rss < 300, "the host process grew by hundreds of MB"
    assert not os.path.exists(CANARY_DIR) or not os.listdir(CANARY_DIR), "a file was written"
    assert SECRET not in (error or "")
    return Outcome(kind=kind, error=error, seconds=seconds)


@pytest.fixture(scope="session", autouse=True)
def _secret_in_environment() -> Any:
    os.environ["ENVH_ADVERSARIAL_SECRET"] = SECRET
    yield
    os.environ.pop("ENVH_ADVERSARIAL_SECRET", None)


@pytest.fixture
def sample() -> Callable[..., Outcome]:
    return run_sample
