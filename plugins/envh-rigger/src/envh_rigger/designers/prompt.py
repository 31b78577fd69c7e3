"""The LLM designer's prompt, built generically from what any bridge exposes.

The system prompt carries the design rules; the user message carries the tools (JSON
Schema), ``env_state_schema()``, the registered component kinds and their fields, the
baseline statistics and diagnosis, sampled successful and failed trajectories (actions
rendered as tool calls, observations trimmed), the target, and previous attempts with
their measured results or the typed reason they were rejected.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from ..episodes import render, sample
from .base import DesignContext

SYSTEM = """You design environment components ("harnesses") for an agent benchmark. A candidate
is a list of layer specs stacked on the current environment (innermost first). Layers
reshape the environment only at its interface: stage (replay actions after reset: a new
start state), contract (rewrite or block actions, override transitions, mask or augment
observations, written as Python code), and any other registered kind listed below. The
benchmark's verifier is sealed: you cannot change what counts as success.

Rules:
- Never make the task unsolvable. If rollouts all time out, or success is zero with the
  failures concentrated on blocked or rejected actions, your candidate is too strict:
  loosen it.
- If the policy fails, scaffold (make the task easier where it fails); if it always
  succeeds, add pressure (make it harder where it has slack).
- Prefer narrow perturbations that target the observed weakness over broad ones.
- Match the magnitude to the slack in the winning trajectories.
- Perturb only what the policy actually uses (tools and observations it touched).
- When refining a previous attempt, keep its working code and change only its magnitude.
- Contract code may define filter_action(action, state, memo) -> Action | Block | None,
  modify_transition(action, response, state, memo) -> EnvResponse | None,
  filter_observation(observation, state, memo) -> Observation | str | None.
  Available names: Action, Block(reason=...), Observation(text=..., data=...), EnvResponse,
  evolve(record, **changes). state is a read-only copy of the env state (schema below);
  memo is a dict kept for one episode. Imports only from: re, math, json, collections,
  itertools, string, difflib, functools, operator, statistics, heapq, bisect, textwrap,
  fnmatch, unicodedata. No dunder names, no classes, no open/eval/exec/getattr, no
  str.format (use + or f-strings). Hooks have a few milliseconds each.
- Always answer by calling the requested function."""

EXPLAIN = {"type": "function", "function": {
    "name": "explain", "description": "Explain why the policy fails or succeeds on this task.",
    "parameters": {"type": "object", "required": ["failure_axis", "rationale"], "properties": {
        "failure_axis": {"type": "string", "enum": ["S0", "A", "O", "T", "R", "task_understanding"],
                         "description": "S0 start state, A actions, O observations, T transitions, R reward"},
        "rationale": {"type": "string", "description": "evidence from the trajectories"}}}}}

PROPOSE = {"type": "function", "function": {
    "name": "propose_candidate", "description": "Propose a candidate: layer specs to stack on the env.",
    "parameters": {"type": "object", "required": ["diagnosis", "rationale", "layers"], "properties": {
        "diagnosis": {"type": "string", "description": "the weakness the candidate targets"},
        "rationale": {"type": "string", "description": "why this candidate moves the policy into the target"},
        "layers": {"type": "array", "minItems": 1, "description": "layer specs, innermost first",
                   "items": {"type": "object", "required": ["kind"],
                             "properties": {"kind": {"type": "string"}}}}}}}}


def _fields(spec_type: Any) -> dict[str, str]:
    try:
        return {f.name: str(f.type) for f in attrs.fields(spec_type) if f.name not in ("kind",)}
    except (TypeError, attrs.exceptions.NotAnAttrsClassError):
        return {}


def kinds_section(ctx: DesignContext) -> str:
    import importlib

    def resolve(ref: Any) -> Any:  # a ComponentKind's spec_type: a class or "module:attr"
        if not isinstance(ref, str):
            return ref
        module, _, attr = ref.partition(":")
        return getattr(importlib.import_module(module), attr)

    lines = []
    for name, kind in sorted(ctx.registry.component_kinds().items()):
        try:
            fields = _fields(resolve(kind.spec_type))  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - a kind whose spec type cannot load is listed bare
            fields = {}
        shown = ", ".join(f"{k}: {v}" for k, v in fields.items())
        lines.append(f"- {name}: {kind.description} Fields: {shown or '-'}")
    return "\n".join(lines)


def _attempt_line(a: Any) -> str:
    layers = json.dumps(a.layers)
    layers = layers if len(layers) <= 1200 else layers[:1200] + "...(truncated)"
    if a.result:
        r = a.result
        measured = (f"success {r['success_rate']:.2f} over {r['n']} rollouts "
                    f"(interval {r['interval'][0]:.2f}-{r['interval'][1]:.2f}), mean steps "
                    f"{r['mean_steps']:.1f}: {r['decision']} the band")
    else:
        measured = f"rejected before rollouts ({(a.cascade or {}).get('stage')})"
    return f"- round {a.round}, {a.verdict}: {measured}. Reason: {a.reason[:400]}\n  layers: {layers}"


def user_message(ctx: DesignContext) -> str:
    """Everything the model needs about the task, its rollouts and earlier attempts."""
    stats = {k: ctx.baseline[k] for k in ("n", "successes", "success_rate", "mean_steps",
                                          "mean_steps_success", "stops", "step_errors") if k in ctx.baseline}
    trajs = "\n\n".join(render(t) for t in sample(ctx.episodes)) or "(none)"
    hint = {"scaffold": "make it easier", "pressure": "make it harder", None: "keep it as is"}[ctx.direction]
    parts = [
        f"Task: {ctx.task} on bridge {ctx.bridge!r}. Round {ctx.round}.",
        f"Target: {ctx.target.describe()}; concrete band on {ctx.target.metric}: "
        f"[{ctx.band[0]:g}, {ctx.band[1]:g}]. The baseline suggests: {hint}.",
        "Tools of the environment (JSON Schema):\n" + json.dumps(
            [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in ctx.tools]),
        "Env state schema (what contract code receives as `state`):\n" + json.dumps(ctx.state_schema),
        "Component kinds you may use:\n" + kinds_section(ctx),
        "Current environment spec:\n" + json.dumps(ctx.spec),
        f"Baseline statistics: {json.dumps(stats)}",
        f"Statistical diagnosis ({ctx.diagnosis.get('failure_axis')}): {ctx.diagnosis.get('summary')}",
        "Sampled trajectories (shortest successes, longest failures):\n" + trajs,
    ]
    if ctx.attempts:
        parts.append("Previous attempts:\n" + "\n".join(_attempt_line(a) for a in ctx.attempts[-6:]))
    if ctx.candidate_episodes:
        played = "\n\n".join(render(t) for t in sample(ctx.candidate_episodes))
        parts.append("Trajectories played under your last measured candidate:\n" + played)
    if ctx.feedback:
        parts.append(f"Your last candidate failed the checks: {ctx.feedback}\nFix it.")
    return "\n\n".join(parts)
