"""Hook specifications of envh. Plugins implement these with ``@envh.hookimpl``.

Contribution hooks return a list of frozen records, each with a ``name``; envh collects
them from every plugin, validates them in one place (``envh.plugins.manager``) and
reports name clashes naming both providers. Implementations import heavy code lazily,
inside the hook or behind a ``"module:attr"`` factory string, so ``import envh`` stays
cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import click

    from .records import (
        BridgeInfo,
        ComponentKind,
        DesignerInfo,
        DiagnoserInfo,
        ExecutorInfo,
        PolicyInfo,
        TemplateInfo,
        TrainerInfo,
        WeaknessInfo,
    )

hookspec = pluggy.HookspecMarker("envh")
hookimpl = pluggy.HookimplMarker("envh")


@hookspec
def envh_bridges() -> list[BridgeInfo]:
    """Contribute benchmark bridges.

    :return: ``BridgeInfo`` records; ``factory(**config)`` must return an
        ``envh.ActionableEnv`` (usually a subclass of ``envh.Bridge``).
    """
    raise NotImplementedError


@hookspec
def envh_component_kinds() -> list[ComponentKind]:
    """Contribute component kinds usable as ``{"kind": NAME, ...}`` layers in env specs.

    :return: ``ComponentKind`` records. ``spec_type`` is an attrs class with a ``kind``
        field (the tag); ``factory(spec, inner, ctx)`` wraps ``inner`` in an
        ``envh.EnvHarness`` subclass. The built-in stage, contract, chain and budget kinds
        come through this same hook.
    """
    raise NotImplementedError


@hookspec
def envh_policies() -> list[PolicyInfo]:
    """Contribute policies, named in specs and on the CLI as ``NAME`` or ``NAME:ARG``.

    :return: ``PolicyInfo`` records; ``factory(arg, **options)`` returns a policy.
    """
    raise NotImplementedError


@hookspec
def envh_executors() -> list[ExecutorInfo]:
    """Contribute episode executors (where and how episodes run).

    :return: ``ExecutorInfo`` records; ``factory(**options)`` returns an executor.
    """
    raise NotImplementedError


@hookspec
def envh_designers() -> list[DesignerInfo]:
    """Contribute designers that write candidate components for a target.

    :return: ``DesignerInfo`` records.
    """
    raise NotImplementedError


@hookspec
def envh_diagnosers() -> list[DiagnoserInfo]:
    """Contribute diagnosers that explain a policy's weakness from rollouts.

    :return: ``DiagnoserInfo`` records.
    """
    raise NotImplementedError


@hookspec
def envh_trainers() -> list[TrainerInfo]:
    """Contribute trainers.

    :return: ``TrainerInfo`` records.
    """
    raise NotImplementedError


@hookspec
def envh_templates() -> list[TemplateInfo]:
    """Contribute parameterised component templates for the template designer.

    :return: ``TemplateInfo`` records; ``bridge`` restricts a template to one bridge.
    """
    raise NotImplementedError


@hookspec
def envh_register_commands(cli: click.Group) -> None:
    """Add sub-commands to the ``envh`` command line.

    :param cli: the root ``click.Group``; add commands or groups to it.
    """
    raise NotImplementedError


@hookspec
def envh_configure_converter(converter: Any) -> None:
    """Register cattrs hooks on envh's converter (for records a plugin defines).

    :param converter: the ``cattrs.Converter`` from ``envh.serialization``.
    """


@hookspec
def envh_weakness_predicates() -> list[WeaknessInfo]:
    """Contribute weakness predicates over trajectories (a bridge's own failure patterns).

    :return: ``WeaknessInfo`` records; ``bridge`` restricts a predicate to one bridge.
    """
    raise NotImplementedError
