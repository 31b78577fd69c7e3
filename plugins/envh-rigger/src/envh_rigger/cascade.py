"""The free checks a candidate passes before any rollout is spent on it.

In order: ``spec`` (the layers parse as registered component kinds), ``static`` (every
piece of contract code passes ``envh.sandbox.parse_and_check``), ``schema`` (stage actions
match the tool schemas), ``dry_run`` (the stack builds, resets, and takes a reference
episode's actions without raising), ``unsolvable`` (when the bridge has an oracle
``solve()``, its plan from the candidate's start state must still win under the
candidate). A failure is typed feedback for the designer and costs no rollouts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import attrs
from envh import Action, Registry, TaskRef, errors, make, parse_spec, spec_to_data
from envh.sandbox import parse_and_check
from envh.validation import compile_tools


@attrs.frozen(kw_only=True)
class CascadeResult:
    """``ok``, or the stage that failed with a message a model can act on."""

    ok: bool
    stage: str = ""
    message: str = ""
    layer: int | None = None


def _fail(stage: str, message: str, layer: int | None = None) -> CascadeResult:
    return CascadeResult(ok=False, stage=stage, message=message, layer=layer)


def combined(base: dict[str, Any], layers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The spec data of ``base`` with ``layers`` stacked on top (outermost last)."""
    return {**base, "layers": [*base.get("layers", []), *layers]}


def _contracts(data: Any) -> Iterator[dict[str, Any]]:
    if isinstance(data, dict):
        if data.get("kind") == "contract" and isinstance(data.get("code"), str):
            yield data
        for v in data.values():
            yield from _contracts(v)
    elif isinstance(data, list):
        for v in data:
            yield from _contracts(v)


def check(base: dict[str, Any], layers: Any, task: TaskRef, *, registry: Registry,
          reference: Sequence[Action] = ()) -> CascadeResult:
    """Run the cascade; ``reference`` is an action sequence to probe the stack with."""
    if not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers) or not layers:
        return _fail("spec", "layers must be a non-empty list of layer objects, each with a 'kind'")
    try:
        spec = spec_to_data(parse_spec(combined(base, layers), registry), registry)
    except errors.EnvhError as exc:
        return _fail("spec", str(exc))
    for i, layer in enumerate(layers):
        for contract in _contracts(layer):
            try:
                parse_and_check(contract["code"])
            except errors.ContractCodeError as exc:
                return _fail("static", str(exc), i)
    offset = len(base.get("layers", []))
    try:
        with make(base, registry=registry) as env:
            env.reset(task=task, seed=0)
            checkers = compile_tools(env.tools())
    except Exception as exc:  # noqa: BLE001 - the base itself must build; report, don't crash
        return _fail("dry_run", f"the current env failed to build or reset: {exc!r}")
    for i, layer in enumerate(spec["layers"][offset:]):
        if layer.get("kind") != "stage":
            continue
        for j, action in enumerate(layer.get("actions") or []):
            checker = checkers.get(action.get("tool"))
            if checker is None:
                return _fail("schema", f"stage action #{j} calls unknown tool {action.get('tool')!r}; "
                                       f"tools: {', '.join(sorted(checkers))}", i)
            problem = checker(action.get("args") or {}, action.get("tool"))
            if problem:
                return _fail("schema", f"stage action #{j}: {problem}", i)
    return _dry_run(spec, task, registry, reference)


def _dry_run(spec: dict[str, Any], task: TaskRef, registry: Registry,
             reference: Sequence[Action]) -> CascadeResult:
    try:
        env = make(spec, registry=registry)
    except Exception as exc:  # noqa: BLE001 - building untrusted layers may fail in any way
        return _fail("dry_run", f"building the candidate failed: {exc}")
    with env:
        try:
            env.reset(task=task, seed=0)
        except errors.ReplayError as exc:
            return _fail("dry_run", f"reset failed: {exc}")
        except Exception as exc:  # noqa: BLE001
            return _fail("dry_run", f"reset failed: {type(exc).__name__}: {exc}")
        oracle = getattr(env.unwrapped, "solve", None)
        try:
            plan = oracle() if callable(oracle) else None
        except Exception:  # noqa: BLE001 - an oracle that cannot answer is no oracle
            plan, oracle = None, None
        if callable(oracle) and plan is None:
            return _fail("unsolvable", "no solution exists from the candidate's start state; "
                                       "stage fewer or different actions")
        actions = list(plan) if plan is not None else list(reference)
        try:
            for k, action in enumerate(actions):
                resp = env.step(action)
                if plan is not None and resp.info.get("error"):
                    return _fail("unsolvable", (
                        f"the reference solution fails under the candidate at step {k} "
                        f"({action.tool} {action.args}): {resp.observation.text[:300]}. Never make "
                        "the task unsolvable: leave at least one winning path open"))
                if resp.terminated or resp.truncated:
                    break
            if plan is not None and not env.evaluate().success:
                return _fail("unsolvable", "the reference solution no longer wins under the candidate")
        except Exception as exc:  # noqa: BLE001 - contract code errors, timeouts, env bugs
            return _fail("dry_run", f"a dry-run step raised {type(exc).__name__}: {exc}")
    return CascadeResult(ok=True)
