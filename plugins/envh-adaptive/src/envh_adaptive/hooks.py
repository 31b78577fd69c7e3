"""envh hook implementations of the adaptive plugin: the curriculum and workspace kinds and
``envh workspace consolidate``.

Only ``@hookimpl`` functions live here; each imports its code lazily so loading the
plugin stays cheap.
"""

from __future__ import annotations

from typing import Any

from envh import ComponentKind, hookimpl


@hookimpl
def envh_component_kinds() -> list[ComponentKind]:
    c = "envh_adaptive.components"
    return [
        ComponentKind(name="curriculum", spec_type=f"{c}.curriculum:CurriculumSpec",
                      factory=f"{c}.curriculum:build", data_paths=("rw:{audit}",), training_only=True,
                      description="Adapt the bridge's tunable parameters between episodes (training runs)"),
        ComponentKind(name="workspace", spec_type=f"{c}.workspace:WorkspaceSpec", factory=f"{c}.workspace:build",
                      data_paths=("rw:{library}",),
                      description="Belief, Progress and Experience behind four meta-actions (track/commit/recall/note)"),
    ]


@hookimpl
def envh_register_commands(cli: Any) -> None:
    from .cli import workspace_group

    cli.add_command(workspace_group)
