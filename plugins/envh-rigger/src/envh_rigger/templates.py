"""The template protocol and the lookup of templates for a bridge.

A template (contributed through ``envh_templates``) is an object with:

* ``name`` and ``direction``: ``"scaffold"`` (the task gets easier: success rises,
  steps fall) or ``"pressure"`` (harder);
* ``magnitudes(env, task) -> list``: the settings that keep the task solvable, ordered
  from weakest to strongest effect (``env`` is the current stack, reset to ``task``);
* ``instantiate(env, task, magnitude) -> list[dict]``: the layer spec dicts.

The template designer searches the list by bisection, so the effect should grow with
the index.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from envh import ActionableEnv, Registry, TaskRef


class Template(Protocol):
    name: str
    direction: Literal["scaffold", "pressure"]

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[Any]:
        """Solvable settings, weakest first."""

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        """Layer spec dicts for ``magnitude``."""


def templates_for(registry: Registry, bridge: str, direction: str) -> list[tuple[str, Template]]:
    """Templates that apply to ``bridge`` (or to any bridge) in ``direction``, by name.

    Bridge-specific templates come before generic ones: they know the task best.
    """
    out = []
    for name, info in sorted(registry.templates().items()):
        if info.bridge not in (None, bridge):
            continue
        template = info.load()
        template = template() if isinstance(template, type) else template
        if getattr(template, "direction", None) == direction:
            out.append((0 if info.bridge else 1, name, template))
    return [(name, t) for _, name, t in sorted(out, key=lambda x: (x[0], x[1]))]
