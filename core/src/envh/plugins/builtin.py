"""The contributions core ships, registered through the same hooks as any plugin."""

from __future__ import annotations

from .hookspecs import hookimpl
from .records import BridgeInfo, ComponentKind, ExecutorInfo, PolicyInfo, TemplateInfo, WeaknessInfo


@hookimpl
def envh_bridges() -> list[BridgeInfo]:
    return [BridgeInfo(name="toy24", factory="envh.bridges.toy24:Toy24Env",
                       description="The 24 arithmetic game (reference bridge, pure Python)")]


@hookimpl
def envh_component_kinds() -> list[ComponentKind]:
    c = "envh.components"
    return [
        ComponentKind(name="stage", spec_type=f"{c}.stage:StageSpec", factory=f"{c}.stage:build",
                      description="Replay actions after reset: a new start state (s0)"),
        ComponentKind(name="contract", spec_type=f"{c}.contract:ContractSpec",
                      factory=f"{c}.contract:build",
                      description="Rewrite/block actions, override transitions, mask observations"),
        ComponentKind(name="chain", spec_type=f"{c}.chain:ChainSpec", factory=f"{c}.chain:build",
                      description="Join environments; success only if every leg's verifier passes"),
        ComponentKind(name="budget", spec_type=f"{c}.budget:BudgetSpec", factory=f"{c}.budget:build",
                      description="Step limit and repetition guard (truncation)"),
    ]


@hookimpl
def envh_executors() -> list[ExecutorInfo]:
    x = "envh.rollout.executors"
    return [
        ExecutorInfo(name="inline", factory=f"{x}.inline:InlineExecutor",
                     description="Episodes one after another in this process (debugging)"),
        ExecutorInfo(name="pool", factory=f"{x}.pool:PoolExecutor",
                     description="Warm worker processes: scrubbed env, rlimits, timeouts, retries"),
        ExecutorInfo(name="ray", factory=f"{x}.ray:RayExecutor",
                     description="Warm Ray actors on a (local or remote) Ray cluster"),
    ]


@hookimpl
def envh_policies() -> list[PolicyInfo]:
    p = "envh.rollout.policies"
    return [
        PolicyInfo(name="scripted", factory=f"{p}.scripted:ScriptedPolicy", data_paths=("{arg}",),
                   description="A fixed list of actions (scripted:FILE, JSON or YAML): tests, replays"),
        PolicyInfo(name="random", factory=f"{p}.random_calls:RandomPolicy",
                   description="Random schema-valid tool calls, seeded (random:SEED): fuzzing"),
        PolicyInfo(name="human", factory=f"{p}.human:HumanPolicy",
                   description="A person at the terminal"),
        PolicyInfo(name="openai", factory=f"{p}.openai:OpenAIPolicy", host_access=("network",),
                   description="Any OpenAI-compatible chat endpoint (openai:MODEL, base_url=...)"),
        PolicyInfo(name="local", factory=f"{p}.local:LocalPolicy",
                   data_paths=("{arg}", "{model}"),
                   description="A local causal LM through transformers (local:smollm2, local:PATH)"),
    ]


@hookimpl
def envh_templates() -> list[TemplateInfo]:
    t = "envh.bridges.toy24_templates"
    return [
        TemplateInfo(name="toy24.replay-plan", factory=f"{t}:ReplayPlan", bridge="toy24",
                     description="Stage: replay the first n steps of the solver's plan (scaffold)"),
        TemplateInfo(name="toy24.replay-plan-autostop", factory=f"{t}:ReplayPlanAutoStop", bridge="toy24",
                     description="scaffold: stage 0..n plan steps and stop automatically at the target"),
        TemplateInfo(name="toy24.replay-plan-autostop-hint", factory=f"{t}:ReplayPlanAutoStopHint",
                     bridge="toy24", description="scaffold: as replay-plan-autostop, plus next-step hints"),
        TemplateInfo(name="toy24.hide-number", factory=f"{t}:HideNumber", bridge="toy24",
                     description="Contract: hide n numbers from the observation (pressure)"),
        TemplateInfo(name="toy24.block-operator", factory=f"{t}:BlockOperator", bridge="toy24",
                     description="Contract: block operators the solution does not need (pressure)"),
    ]


@hookimpl
def envh_weakness_predicates() -> list[WeaknessInfo]:
    w = "envh.bridges.toy24_weakness"
    return [
        WeaknessInfo(name="toy24.bad-position", factory=f"{w}:bad_position", bridge="toy24",
                     focus={"tools": ["combine"]}, keywords=("position",),
                     description="toy24.bad-position[:N]: names a position that does not exist, N times"),
        WeaknessInfo(name="toy24.revisits", factory=f"{w}:revisits", bridge="toy24",
                     focus={"tools": ["reset"]}, keywords=("revisit",),
                     description="toy24.revisits[:N]: the numbers return to an earlier state, N times"),
    ]
