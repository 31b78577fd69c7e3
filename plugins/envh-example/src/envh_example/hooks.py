"""The plugin's hook implementations: records only; code is imported when first used."""

from __future__ import annotations

import envh


@envh.hookimpl
def envh_bridges() -> list[envh.BridgeInfo]:
    return [envh.BridgeInfo(name="corridor", factory="envh_example.corridor:CorridorEnv",
                            description="Walk to the far end of a five-cell corridor (example plugin)")]


@envh.hookimpl
def envh_component_kinds() -> list[envh.ComponentKind]:
    return [envh.ComponentKind(name="alias", spec_type="envh_example.alias:AliasSpec",
                               factory="envh_example.alias:build",
                               description="Extra tools that stand for fixed tool calls (example plugin)")]
