"""Diagnosis against the reference: where a policy's episodes leave every winning path.

Each failed episode is replayed through the same spec at its seed, action by action (the
actions the policy proposed, through the same layers). Before each action the bridge's
reference solution from the current state is asked (``Bridge.reference_actions()``:
Toy24's solver, ALFWorld's planner, ...); after it, whether one still exists. A step
taken from a winnable state is counted under two action classes: the class of the
reference's next step (what the policy should have done: ``combine:sub``) and the class
of what the policy did (``stop``). A step after which no reference exists any more (and
the episode did not win, nor merely ran out of steps) is *fatal*: the episode was lost
there. Each failed episode's *decisive* step is its first fatal one, else (a game that stays
winnable to the end, as ALFWorld's mostly do) its first step off the reference. Per class::

    taken     - steps from a winnable state with this class, up to the decisive one
    off       - of those, where the policy's action differed from the reference's step
    fatal     - of those, after which the task could no longer be won
    decisive  - of those, the episode's decisive step

The weakness is the class with the highest Wilson lower bound on decisive / taken (at
least two; a tie between the two sides is broken in ``_weakest``): a class the policy slips on stands out against the classes it plays
well, where "stopped without reaching the goal" is true of every failed episode and names
nothing. ``uninformative`` lists the weakness predicates that show in every failed
episode (and so cannot tell a weakness apart). The replay is deterministic where the
episode was (seeded layers, a recorded action list); a bridge without a reference gets
``None``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from envh import Action, Registry, TaskRef, make
from envh.rollout import wilson

from .guidance import _call, reference_from_here

MAX_EPISODES = 8  # failed episodes replayed (each costs a reference per step)
MAX_STEPS = 60
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,15}")


def action_class(action: Action | Mapping[str, Any]) -> str:
    """``tool`` plus the short word-like string arguments (an operator, a verb, a mode):
    ``combine:sub``, ``heat``; numbers, paths and free text are left out."""
    tool = action.tool if isinstance(action, Action) else str(action.get("tool", ""))
    args = action.args if isinstance(action, Action) else action.get("args") or {}
    words = [str(v) for _k, v in sorted(dict(args).items()) if isinstance(v, str) and _WORD.fullmatch(v)]
    if not words and len(args) == 1:  # one free-text argument (a text command): its first word
        only = next(iter(dict(args).values()))
        if isinstance(only, str) and only.split():
            first = only.split()[0]
            words = [first] if _WORD.fullmatch(first) else []
    return ":".join([tool, *words])


def class_focus(cls: str) -> dict[str, Any]:
    """A guide focus matching actions of class ``cls`` (tool and word arguments)."""
    tool, *words = cls.split(":")
    focus: dict[str, Any] = {"tools": [tool]}
    if words:
        # a word is a whole JSON string (Toy24's "op": "sub") or the first word of one (ALFWorld's
        # "command": "heat potato 1 with microwave 1", whose class is its first word)
        # "(?:...)" per word, all of which must match (a list: RE2 has no lookahead to join them)
        patterns = [f'(?:"{re.escape(w)}"|"{re.escape(w)}\\s)' for w in dict.fromkeys(words)]
        focus["pattern"] = patterns[0] if len(patterns) == 1 else patterns
    return focus


def _proposed(step: Any) -> Action | None:
    act = getattr(step, "proposed", None) or getattr(step, "executed", None)
    if act is None:
        return None
    if isinstance(act, Action):
        return act
    if isinstance(act, Mapping):
        return Action(tool=str(act.get("tool", "")), args=dict(act.get("args") or {}))
    return None


def replay(spec: dict[str, Any], task: TaskRef, trajs: Sequence[Any], registry: Registry,
           *, max_episodes: int = MAX_EPISODES) -> dict[str, Any] | None:
    """Per-class counts over the failed episodes of ``trajs`` (``None``: no reference).

    Each failed episode has one *decisive* step: its first fatal step (after which the task
    cannot be won; running out of steps is not one), else, where the game stays winnable to
    the end (ALFWorld: a skipped step can be made up later), its first step off the
    reference. Steps up to the decisive one count as ``taken`` under their classes."""
    failed = [t for t in trajs if not t.success and not getattr(t, "error_class", None)][:max_episodes]
    expected: dict[str, dict[str, int]] = {}
    taken: dict[str, dict[str, int]] = {}
    decisive: list[dict[str, Any]] = []
    replayed = 0
    with make(spec, registry=registry) as env:
        env.reset(task=task, seed=0)
        if reference_from_here(env) is None:
            return None
        for traj in failed:
            env.reset(task=task, seed=traj.seed)
            replayed += 1
            steps: list[dict[str, Any]] = []
            plan = reference_from_here(env)  # from here on, the reference asked after a step serves the next
            for depth, step in enumerate(traj.steps[:MAX_STEPS]):
                action = _proposed(step)
                if action is None or not plan:
                    break  # lost before this step (or a dead end the layers made)
                ref = plan[0]
                off = _call(action) != _call(ref)
                response = env.step(action)
                ended = response.terminated or response.truncated
                won = bool(ended and env.evaluate().success)
                plan = None if response.terminated else reference_from_here(env)
                winnable = plan is not None
                fatal = not won and not winnable and not (response.truncated and not response.terminated)
                steps.append({"depth": depth, "expected": action_class(ref), "did": action_class(action),
                              "off": off, "fatal": fatal, "winnable_after": winnable})
                if fatal or ended:
                    break
            pick = next((i for i, st in enumerate(steps) if st["fatal"]), None)
            if pick is None:
                pick = next((i for i, st in enumerate(steps) if st["off"]), None)
            for i, st in enumerate(steps if pick is None else steps[:pick + 1]):
                for table, cls in ((expected, st["expected"]), (taken, st["did"])):
                    row = table.setdefault(cls, {"taken": 0, "off": 0, "fatal": 0, "decisive": 0})
                    row["taken"] += 1
                    row["off"] += int(st["off"])
                    row["fatal"] += int(st["fatal"])
                    row["decisive"] += int(i == pick)
            if pick is not None:
                decisive.append({"seed": traj.seed, **steps[pick]})
    return {"replayed": replayed, "expected": _rates(expected), "taken": _rates(taken), "divergences": decisive,
            "weakest": _weakest(expected, taken)}


def _rates(table: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    out = {}
    for cls, row in sorted(table.items()):
        lo, hi = wilson(row["decisive"], row["taken"])
        out[cls] = {**row, "rate": row["decisive"] / row["taken"], "interval": [round(lo, 4), round(hi, 4)],
                    "winnable_after_off": (row["off"] - row["fatal"]) / row["off"] if row["off"] else None}
    return out


def _weakest(expected: dict[str, dict[str, int]], taken: dict[str, dict[str, int]]) -> dict[str, Any] | None:
    """The class with the highest Wilson lower bound on its fatal share (>= 2 fatal steps).
    When the two sides tie (every loss is one slip: the reference's class and the policy's
    are equally concentrated), a slip within one tool (``combine:sub`` played as
    ``combine:add``) is named by the reference's class, since the policy plays that tool and
    misses the argument; a different tool (``stop`` where the reference combines) by the
    policy's own, which is what has to be replaced wherever it shows."""
    best: dict[str, dict[str, Any]] = {}
    for side, table in (("expected", expected), ("taken", taken)):
        for cls, row in table.items():
            if row["decisive"] < 2:
                continue
            lo = wilson(row["decisive"], row["taken"])[0]
            if side not in best or lo > best[side]["lower"] + 1e-12:
                best[side] = {"class": cls, "side": side, "lower": lo, **row}
    if len(best) < 2:
        return next(iter(best.values()), None)
    exp, tak = best["expected"], best["taken"]
    if abs(exp["lower"] - tak["lower"]) > 1e-9:
        return exp if exp["lower"] > tak["lower"] else tak
    return exp if exp["class"].split(":")[0] == tak["class"].split(":")[0] else tak


def summary(div: dict[str, Any] | None) -> str:
    """One line naming the weakness with its counts, or why none is named."""
    if div is None:
        return "no reference solution: no divergence diagnosis"
    w = div.get("weakest")
    if not w:
        return (f"no action class decides two of the {div['replayed']} replayed failures: no class stands out")
    lo, hi = wilson(w["decisive"], w["taken"])
    key = "expected" if w["side"] == "expected" else "did"
    mine = [d for d in div["divergences"] if d[key] == w["class"]]
    where = ("where the reference plays" if w["side"] == "expected" else "when the policy plays")
    lost = sum(d["fatal"] for d in mine)
    verb = "the task is lost" if lost * 2 >= max(1, len(mine)) else "the episodes leave the reference"
    pairs = [(d["expected"], d["did"]) for d in mine]
    common = max(set(pairs), key=pairs.count) if pairs else None
    instead = (f" (most often the reference's {common[0]} played as {common[1]})"
               if common and common[0] != common[1] else "")
    depths = [d["depth"] for d in mine]
    still = (f"; still winnable after {len(mine) - lost} of {len(mine)}" if lost < len(mine) else "")
    return (f"{verb} {where} {w['class']}{instead}: {w['decisive']} of {w['taken']} such steps from a "
            f"winnable state (95% interval {lo:.2f}-{hi:.2f}), at depth {min(depths) if depths else '?'}"
            f"-{max(depths) if depths else '?'}{still}")


def uninformative(predicates: Sequence[Any], trajs: Sequence[Any]) -> list[str]:
    """Predicates (``shows(t)``, ``predicate``) true of every failed episode: they name no
    weakness (Toy24's ``stops-early``: every failure ends with ``stop``)."""
    failed = [t for t in trajs if not t.success]
    if len(failed) < 2:
        return []
    return [p.predicate for p in predicates if all(p.shows(t) for t in failed)]
