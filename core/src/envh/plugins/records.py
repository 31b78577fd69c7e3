"""Contribution records: what plugins hand to envh through the ``envh_*`` hooks.

Each is a frozen attrs record with a ``name``. Heavy code stays unimported until used:
``factory`` may be a callable or an ``"module:attribute"`` string resolved on first use.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from .. import errors


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    """A declaration list as a tuple (any iterable of names or paths is accepted)."""
    return tuple(values)

_NAME = re.compile(r"^[a-z][a-z0-9_.-]*$")


def _check_name(_inst: Any, _attr: Any, value: str) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise errors.PluginError(
            f"Invalid contribution name {value!r}: use lower-case letters, digits, '_', '-', '.'")


def resolve(target: Callable[..., Any] | str) -> Callable[..., Any]:
    """Import ``"package.module:attr"`` lazily; callables pass through."""
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else []:
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise errors.PluginError(f"Cannot import {target!r}: {exc!r}") from exc
    return obj  # type: ignore[no-any-return]


@attrs.frozen(kw_only=True)
class Contribution:
    """Common shape: a unique ``name``, a lazy ``factory`` and a one-line ``description``."""

    name: str = attrs.field(validator=_check_name)
    factory: Callable[..., Any] | str
    description: str = ""

    def load(self) -> Callable[..., Any]:
        return resolve(self.factory)


@attrs.frozen(kw_only=True)
class BridgeInfo(Contribution):
    """A benchmark bridge; ``factory(**config)`` returns an ``ActionableEnv``.

    ``host_access`` names what of the host its env must reach from an isolated pool
    worker, beyond its own work directory: ``"docker"`` (the Docker daemon's sockets,
    which are root on the host), ``"network"`` (the host's network: services on its
    loopback, the internet). Workers of bridges and policies that do not name them cannot
    reach them (a network namespace of their own holds only its own loopback).

    ``data_paths`` names the host files and directories its env reads (isolated workers see
    nothing of root's home or of other directories in /tmp): ``"{key}"`` is the path in the
    bridge's config at ``key``; ``"NAME=default"`` the environment variable ``NAME``, else
    ``default`` (``~`` is the parent's home), and the worker gets ``NAME`` set to it; a plain
    absolute path is itself. ``"rw:"`` in front makes it writable. Resolved when the pool
    starts the bridge's episodes (``envh.rollout.executors.isolation.check_data_path``).
    """

    host_access: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    data_paths: tuple[str, ...] = attrs.field(default=(), converter=_strings)

    @host_access.validator
    def _known_access(self, _attribute: Any, value: tuple[str, ...]) -> None:
        unknown = sorted(set(value) - set(HOST_ACCESS))
        if unknown:
            raise ValueError(f"bridge {self.name!r} asks for unknown host access {unknown}; "
                             f"known: {', '.join(HOST_ACCESS)}")


#: What of the host a bridge may ask isolated workers to reach (``BridgeInfo.host_access``).
HOST_ACCESS = ("docker", "network")


@attrs.frozen(kw_only=True)
class ComponentKind(Contribution):
    """A component kind for env specs.

    ``spec_type`` is the attrs class of the layer's config (it must have a ``kind``
    field); ``factory(spec, inner, ctx)`` returns an ``EnvHarness`` around ``inner``.
    ``data_paths`` as for bridges (``BridgeInfo``), ``"{key}"`` naming the layer's fields.
    ``training_only``: a layer of this kind adapts the task distribution (a curriculum), so
    an evaluation run, whose task set stays fixed, refuses a spec holding one anywhere,
    chain legs included (``envh.rollout.plan.refuse_evaluation``; ``envh run --training``
    and ``build_plan(training=True)`` play it).
    """

    spec_type: type | str
    data_paths: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    training_only: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))


@attrs.frozen(kw_only=True)
class PolicyInfo(Contribution):
    """A policy; ``factory(arg, **options)`` returns a policy (``openai:MODEL`` → arg MODEL).
    ``data_paths`` as for bridges (``BridgeInfo``): ``"{arg}"`` is the policy's argument,
    other keys its options; ``host_access`` too (``"network"``: an endpoint to call)."""

    data_paths: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    host_access: tuple[str, ...] = attrs.field(default=(), converter=_strings)


@attrs.frozen(kw_only=True)
class ExecutorInfo(Contribution):
    """An episode executor (inline, pool, ray, ...); ``factory(**options)``."""


@attrs.frozen(kw_only=True)
class DesignerInfo(Contribution):
    """A designer that writes candidate components; ``factory(arg, **options)``."""


@attrs.frozen(kw_only=True)
class DiagnoserInfo(Contribution):
    """A diagnoser that explains a policy's failures from its rollouts."""


@attrs.frozen(kw_only=True)
class TrainerInfo(Contribution):
    """A trainer that trains a policy on (reshaped) envs."""


@attrs.frozen(kw_only=True)
class TemplateInfo(Contribution):
    """A parameterised component template for the template designer.

    ``bridge`` names the bridge it applies to (``None``: any); ``factory`` returns the
    template object (see the rigger plugin for its protocol).
    """

    bridge: str | None = None


@attrs.frozen(kw_only=True)
class WeaknessInfo(Contribution):
    """A weakness predicate over trajectories, for weakness targets and guidance.

    ``factory`` returns ``fn(trajectory, *args) -> bool`` (``args`` are the strings after
    the name in ``NAME:ARG:...``); ``bridge`` restricts it to one bridge (``None``: any);
    ``focus`` says where it acts, for templates that concentrate there (``{"tools": [...],
    "pattern": REGEX, "repeats": bool}``; ``None``: anywhere); ``keywords`` are plain
    words that name it (all must appear).
    """

    bridge: str | None = None
    focus: dict[str, Any] | None = None
    keywords: tuple[str, ...] = ()
