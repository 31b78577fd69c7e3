"""envh hook implementations of the rigger plugin: designers, diagnosers, CLI, policies.

Only ``@hookimpl`` functions live here; each imports its code lazily so loading the
plugin stays cheap.
"""

from __future__ import annotations

from typing import Any

from envh import DesignerInfo, DiagnoserInfo, PolicyInfo, TemplateInfo, hookimpl


@hookimpl
def envh_designers() -> list[DesignerInfo]:
    return [
        DesignerInfo(name="template", factory="envh_rigger.designers.template:TemplateDesigner",
                     description="Parameterised templates, direction from baseline vs target, "
                                 "magnitude by bisection (no LLM)"),
        DesignerInfo(name="llm", factory="envh_rigger.designers.llm:LLMDesigner",
                     description="OpenAI-compatible model with forced function calls (llm:MODEL)"),
    ]


@hookimpl
def envh_diagnosers() -> list[DiagnoserInfo]:
    return [DiagnoserInfo(name="stats", factory="envh_rigger.diagnose:StatsDiagnoser",
                          description="Failure axis from rollout statistics, a claim with evidence per failure"),
            DiagnoserInfo(name="llm", factory="envh_rigger.diagnose_llm:LLMDiagnoser",
                          description="An OpenAI-compatible model names the axis from the stats claims and "
                                      "trajectories (llm:MODEL)")]


@hookimpl
def envh_templates() -> list[TemplateInfo]:
    return [TemplateInfo(name="guide", factory="envh_rigger.guidance:Guide", bridge=None,
                         description="Scaffold with a continuous knob m: each off-reference action becomes, "
                                     "with probability m, the next step of the bridge's reference from the "
                                     "current state (any bridge with reference_actions; focused where the "
                                     "weakness shows)"),
            TemplateInfo(name="mask", factory="envh_rigger.masking:Mask", bridge=None,
                         description="Pressure with a continuous knob m: each word and data field of every "
                                     "observation becomes '?' with probability m, seeded per episode (any bridge)")]


@hookimpl
def envh_register_commands(cli: Any) -> None:
    from .cli import pool_cmd, rig_cmd
    from .skills.cli import skills_group

    cli.add_command(rig_cmd)
    cli.add_command(pool_cmd)
    cli.add_command(skills_group)


@hookimpl
def envh_policies() -> list[PolicyInfo]:
    return [PolicyInfo(name="skills", factory="envh_rigger.skills.policy:SkilledPolicy", data_paths=("{bank}",),
                       host_access=("network",),
                       description="skills:POLICY: a chat policy with skills retrieved from bank=DIR")]
