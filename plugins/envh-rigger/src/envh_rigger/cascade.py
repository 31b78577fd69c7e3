"""The free checks a candidate passes before any rollout is spent on it.

In order: ``spec`` (the layers parse as registered component kinds), ``static`` (the
stack builds: contract code passes the sandbox's checks), ``schema`` (stage actions match
the tool schemas), ``dry_run`` (the stack resets and takes a probe episode's actions
without raising), ``unsolvable`` (the bridge's reference solution from the candidate's
start state, replayed through the candidate stack, must still win by the base bridge's
own verdict: never make the task unsolvable). A failure is typed feedback for the
designer and costs no rollouts. Bridges without a reference say so: ``reference`` in
the result tells which check ran.

The reference is replayed at several episode seeds (``REPLAY_SEEDS``, by default the
seeds the validation plays first): a candidate may draw per episode (a mask rate, a guide
probability, contract code keyed on the seed), and one that blocks the winning path in
some episodes only passes a single replay at seed 0. Eight seeds catch a candidate that
breaks a fraction q of episodes with probability 1 - (1 - q)^8 (0.90 at q = 0.25, 0.996 at
q = 0.5) and prove the reference wins in each of the first eight validation episodes; a
replay costs no rollout, but a reset and the verdict per seed (Toy24: microseconds;
ALFWorld: a game reset; SWE-bench: a container and a grading run each).

In a replay a step the candidate refuses (blocked, or answered with an error) is not by
itself a failure: the replay goes on and the base bridge's verdict decides. A reference may
call a tool the verdict does not need (SpreadsheetBench's ``validate`` before ``submit``),
and a harmless candidate that blocks that tool leaves the task solvable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from envh import (
    Action,
    ActionableEnv,
    Registry,
    TaskRef,
    compile_tools,
    errors,
    host_paths,
    make,
    parse_spec,
    spec_to_data,
)

from .guidance import reference_from_here, reference_or_error


@attrs.frozen(kw_only=True)
class CascadeResult:
    """``ok``, or the stage that failed with a message a model can act on."""

    ok: bool
    stage: str = ""
    message: str = ""
    layer: int | None = None
    reference: str = ""


def _fail(stage: str, message: str, layer: int | None = None, reference: str = "") -> CascadeResult:
    return CascadeResult(ok=False, stage=stage, message=message, layer=layer, reference=reference)


def combined(base: dict[str, Any], layers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The spec data of ``base`` with ``layers`` stacked on top (outermost last)."""
    return {**base, "layers": [*base.get("layers", []), *layers]}


#: How many episode seeds the reference is replayed at (see the module docstring).
REPLAY_SEEDS = 8


#: The base bridge's reference solution from its current state (``None``: it has none, or
#: it could not be computed): ``guidance.reference_from_here``, under the cascade's name.
reference_of = reference_from_here


def replay_reference(env: ActionableEnv, plan: Sequence[Action]) -> tuple[bool, str]:
    """Play ``plan`` through ``env`` (already reset); whether the base verdict is a win. A
    refused step (blocked, or an error) is passed over, not a failure by itself: the
    verdict decides, and the first refusal is named when it does not win."""
    refused = ""
    for k, action in enumerate(plan):
        resp = env.step(action)
        error = resp.info.get("error")
        if (error or resp.info.get("blocked")) and not refused:
            refused = (f"; the candidate refused step {k} ({action.tool} {dict(action.args)}): "
                       f"{resp.observation.text[:300]}")
        if resp.terminated or resp.truncated:
            break
    if not env.unwrapped.evaluate().success:
        return False, "the reference solution no longer wins under the candidate" + refused
    return True, ""


def check(base: dict[str, Any], layers: Any, task: TaskRef, *, registry: Registry,
          reference: Sequence[Action] = (), trusted: bool = True,
          seeds: Sequence[int] | None = None) -> CascadeResult:
    """Run the cascade; ``reference`` is a probe action sequence (an observed winning
    episode) used for the dry run when the bridge has no reference solution; ``seeds``: the
    episode seeds the reference is replayed at (default ``range(REPLAY_SEEDS)``). Layers from a
    designer that is not ``trusted`` may not name host paths (a curriculum's audit log, a
    workspace's library): the rigger's process would write or read them."""
    if not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers) or not layers:
        return _fail("spec", "layers must be a non-empty list of layer objects, each with a 'kind'")
    if not trusted and (named := host_paths(layers, "layers", registry)):
        return _fail("spec", f"a designed layer may not name a host path ({', '.join(named)}): leave it out")
    try:
        spec = spec_to_data(parse_spec(combined(base, layers), registry), registry)
    except errors.EnvhError as exc:
        return _fail("spec", str(exc))
    offset = len(base.get("layers", []))
    try:
        with make(base, registry=registry) as env:
            env.reset(task=task, seed=0)
            checkers = compile_tools(env.tools())
            # the current start has a reference: a candidate start without one cannot be shown
            # solvable (for a bridge whose "none" means "no win from here", Toy24's solver or
            # ALFWorld's planner, it is a dead end)
            base_reference = reference_of(env) is not None
            complete = bool(getattr(env.unwrapped, "reference_complete", False))

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
    seeds = list(range(REPLAY_SEEDS)) if seeds is None else list(seeds)
    if not seeds:
        raise ValueError("the cascade needs at least one seed to replay the reference at")
    return _dry_run(spec, task, registry, reference, base_reference, seeds, complete)


def _dry_run(spec: dict[str, Any], task: TaskRef, registry: Registry,
             probe: Sequence[Action], base_reference: bool = False, seeds: Sequence[int] = (0,),
             complete: bool = False) -> CascadeResult:
    try:
        env = make(spec, registry=registry)
    except errors.ContractCodeError as exc:
        return _fail("static", str(exc))
    except Exception as exc:  # noqa: BLE001 - building untrusted layers may fail in any way
        return _fail("dry_run", f"building the candidate failed: {exc}")
    with env:
        replayed, raised = 0, ""
        for n, seed in enumerate(seeds):
            try:
                env.reset(task=task, seed=seed)
            except Exception as exc:  # noqa: BLE001 - a stage that cannot replay, a hook that raises
                return _fail("dry_run", f"reset failed (seed {seed}): {type(exc).__name__}: {exc}")
            plan, raised = reference_or_error(env)
            if plan is None and base_reference:  # the bare start has one, the candidate's none
                why = (f"computing it raised {raised}" if raised else "its start state is a dead end" if complete
                       else "nothing shows the task can still be won from there")
                return _fail("unsolvable", "the bridge has a reference solution from the current env's start "
                             f"but none from the candidate's (episode seed {seed}: {why}). Never make the task "
                             "unsolvable: leave the reference's winning path open",
                             reference=f"error: {raised}" if raised else "none from the candidate's start")
            try:
                if plan is not None:
                    ok, why = replay_reference(env, plan)
                    if not ok:
                        return _fail("unsolvable", f"{why} (episode seed {seed}). Never make the task "
                                     "unsolvable: leave the reference's winning path open",
                                     reference=f"replayed: fails at seed {seed}")
                    replayed += 1
                    continue
                if not n:  # no reference: one probe episode is all a dry run can show
                    for action in probe:
                        resp = env.step(action)
                        if resp.terminated or resp.truncated:
                            break
                break
            except Exception as exc:  # noqa: BLE001 - contract code errors, timeouts, env bugs
                return _fail("dry_run", f"a dry-run step raised {type(exc).__name__}: {exc}")
    if replayed:
        return CascadeResult(ok=True, reference=f"replayed: the reference still wins at {replayed} episode "
                                                f"seed(s) {_seeds(seeds)}")
    return CascadeResult(ok=True, reference=(f"error: the bridge's reference raised {raised}; only probed" if raised
                                             else "none: the bridge has no reference solution from this start state"))


def _seeds(seeds: Sequence[int]) -> str:
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}..{seeds[-1]}"
    return ", ".join(map(str, seeds))
