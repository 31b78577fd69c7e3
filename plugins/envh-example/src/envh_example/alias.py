"""Alias: extra tools that stand for fixed tool calls (``"r": move(direction=right)``).

Scaffolding in the Contract sense (f_A only): the alias is rewritten to its call before
the inner env sees it, so the verifier and the inner env are untouched. The aliases are
listed among the tools, so the policy knows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs
import envh
from envh import Action, ActionableEnv, Block, EnvHarness, LayerSpec, ToolSpec


@attrs.frozen(kw_only=True)
class AliasSpec(LayerSpec):
    """``aliases`` maps a new tool name to the action it stands for."""

    kind: Literal["alias"] = "alias"
    aliases: dict[str, Action] = attrs.field(factory=dict)


class Alias(EnvHarness):
    kind = "alias"

    def __init__(self, inner: ActionableEnv, aliases: Mapping[str, Action], *, layer_id: str | None = None) -> None:
        super().__init__(inner, layer_id=layer_id)
        self.aliases = dict(aliases)

    def tools(self) -> list[ToolSpec]:
        extra = [ToolSpec(name=name, description=f"Shortcut for {a.tool}({', '.join(f'{k}={v!r}' for k, v in a.args.items())}).")
                 for name, a in self.aliases.items()]
        return [*self.inner.tools(), *extra]

    def filter_action(self, action: Action, state: Mapping[str, Any]) -> Action | Block:
        target = self.aliases.get(action.tool)
        if target is None:
            return action
        if action.args:
            return Block(reason=f"the shortcut {action.tool!r} takes no arguments")
        return target


def build(spec: AliasSpec, inner: ActionableEnv, ctx: envh.BuildContext) -> Alias:
    names = {t.name for t in inner.tools()}
    clash = sorted(names & set(spec.aliases))
    if clash:
        raise envh.errors.SpecError(f"alias names {clash} shadow tools of the inner env; pick other names")
    return Alias(inner, spec.aliases, layer_id=spec.id or f"{ctx.index}:alias")
