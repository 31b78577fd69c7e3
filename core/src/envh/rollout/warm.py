"""Warm resources of an episode worker: env stacks built once per spec id and reset in
place, policies built once per policy spec, and the package versions trajectories name.

Every executor (inline, pool worker, Ray actor) holds one ``Warm`` and passes it to
``run_episode``; an env or policy that failed is closed and dropped so the next episode
gets a fresh one.
"""

from __future__ import annotations

import json
import platform
from collections import OrderedDict
from importlib import metadata
from typing import Any

from .. import errors
from ..env import ActionableEnv
from ..plugins.manager import Registry, get_registry
from ..spec import make
from .policy import Policy
from .taps import BaseTap


def parse_policy_spec(spec: str) -> tuple[str, str | None]:
    """``"openai:gpt-4o"`` → ``("openai", "gpt-4o")``; ``"random"`` → ``("random", None)``."""
    name, sep, arg = spec.partition(":")
    return name.strip(), (arg if sep else None)


def resolve_policy(spec: str, registry: Registry | None = None, **options: Any) -> Policy:
    """Build the policy a spec string names, through ``registry.policy(name)``."""
    name, arg = parse_policy_spec(spec)
    factory = (registry or get_registry()).policy(name).load()
    policy: Policy = factory(arg, **options)
    return policy


def package_versions(registry: Registry) -> dict[str, str]:
    """Versions of python, envh and every distribution that contributed a plugin."""
    out = {"python": platform.python_version()}
    dists = {"envh", *(p.distribution for p in registry.loaded)}
    for dist in sorted(dists):
        if dist.startswith("("):
            continue
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


class Warm:
    """Envs keyed by spec id (at most ``max_envs``, least recently used closed first) and
    policies keyed by (spec, options). Not thread-safe: one per worker."""

    def __init__(self, registry: Registry | None = None, *, max_envs: int = 4, max_policies: int = 4) -> None:
        self.registry = registry or get_registry()
        self.max_envs, self.max_policies = max_envs, max_policies
        self._envs: OrderedDict[str, ActionableEnv] = OrderedDict()
        self._policies: OrderedDict[str, Policy] = OrderedDict()
        self._taps: dict[str, tuple[ActionableEnv, BaseTap]] = {}
        self._versions: dict[str, str] | None = None

    @property
    def versions(self) -> dict[str, str]:
        if self._versions is None:
            self._versions = package_versions(self.registry)
        return self._versions

    def env(self, spec_id: str, spec: dict[str, Any], trust: str = "untrusted",
            data: tuple[str, ...] = ()) -> ActionableEnv:
        """The warm env of ``spec_id`` built in tier ``trust`` with host paths ``data``
        granted (``envh.make``), built on first use."""
        spec_id = _tiered(spec_id, trust, data)
        env = self._envs.pop(spec_id, None)
        if env is None:
            env = make(spec, registry=self.registry, trust=trust, data=data)
        self._envs[spec_id] = env
        while len(self._envs) > self.max_envs:
            old_id, old_env = self._envs.popitem(last=False)
            self._taps.pop(old_id, None)
            _close_quietly(old_env)
        return env

    def tap(self, spec_id: str, env: ActionableEnv, trust: str = "untrusted", data: tuple[str, ...] = ()) -> BaseTap:
        """The base-env taps of the warm env of ``spec_id`` (installed once per env)."""
        spec_id = _tiered(spec_id, trust, data)
        held = self._taps.get(spec_id)
        if held is None or held[0] is not env:
            held = self._taps[spec_id] = (env, BaseTap(env))
        return held[1]

    def drop_env(self, spec_id: str, trust: str = "untrusted", data: tuple[str, ...] = ()) -> str | None:
        """Close and forget an env (after it failed); returns the close error, if any."""
        spec_id = _tiered(spec_id, trust, data)
        self._taps.pop(spec_id, None)
        env = self._envs.pop(spec_id, None)
        return None if env is None else _close_quietly(env)

    def policy(self, spec: str, options: dict[str, Any]) -> Policy:
        key = spec + "\0" + json.dumps(options, sort_keys=True, default=repr)
        policy = self._policies.pop(key, None)
        if policy is None:
            policy = resolve_policy(spec, self.registry, **options)
            if not isinstance(getattr(policy, "policy_id", None), str):
                raise errors.PluginError(
                    f"Policy {spec!r} built {type(policy).__name__}, which has no str policy_id; "
                    "policies implement envh.rollout.policy.Policy.")
        self._policies[key] = policy
        while len(self._policies) > self.max_policies:
            _close_quietly(self._policies.popitem(last=False)[1])
        return policy

    def drop_policy(self, spec: str, options: dict[str, Any]) -> None:
        key = spec + "\0" + json.dumps(options, sort_keys=True, default=repr)
        policy = self._policies.pop(key, None)
        if policy is not None:
            _close_quietly(policy)

    def close(self) -> list[str]:
        """Close everything; returns the close errors (closing goes on past failures)."""
        problems = [_close_quietly(p) for p in self._policies.values()]
        problems += [_close_quietly(e) for e in self._envs.values()]
        self._envs.clear()
        self._policies.clear()
        self._taps.clear()
        return [p for p in problems if p]


def _close_quietly(obj: Any) -> str | None:
    try:
        obj.close()
    except BaseException as exc:  # noqa: BLE001 - closing must go on (SystemExit from a plugin too)
        try:
            return f"{type(obj).__name__}.close() raised {type(exc).__name__}: {exc}"[:2000]
        except BaseException:  # noqa: BLE001
            return f"{type(obj).__name__}.close() raised {type(exc).__name__}"
    return None


def _tiered(spec_id: str, trust: str, data: tuple[str, ...] = ()) -> str:
    """The warm-cache key of a spec built in tier ``trust`` with ``data`` granted (and what
    ``ENVH_DATA`` grants now): one spec in two tiers, or under two grants, is two envs."""
    from ..hostpaths import grants

    key = spec_id if trust == "untrusted" else f"{spec_id}\0{trust}"
    try:
        granted = grants(data)
    except errors.SpecError:  # a grant that cannot be read: the build reports it; the key stays apart
        granted = ("?", *data)
    return key if not granted else "\0".join((key, "data", *granted))
