"""A trajectory page's steps, a page at a time, and each turn's prompt on demand.

A stored trajectory is read as plain JSON and only the shown page's steps are structured
into records (a 5,000-step episode is not built whole to show 100 steps). Prompts are not on
the page: a turn's prompt is fetched when the reader opens it, as the messages that differ
from the previous turn's prompt (a chat resends its whole history every turn, so whole
prompts on the page grow with the square of the turns), or whole on request.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from envh.rollout.trajectory import Trajectory, trajectory_from_data

#: steps shown on one trajectory page
STEPS = 100


@attrs.frozen(kw_only=True)
class PromptInfo:
    """What a step's model request sent, in counts: ``count`` messages, of which the first
    ``shared`` are the same as in the prompt of step ``after`` (the previous turn)."""

    count: int
    shared: int = 0
    after: int | None = None


@attrs.frozen(kw_only=True)
class StepsPage:
    """One page of an episode: ``trajectory`` holds only the shown steps, the first of which
    is the episode's step number ``first`` (0-based) of ``total``; ``usage`` is the whole
    episode's token count; ``prompts`` has one entry per shown step (``None``: no turn)."""

    trajectory: Trajectory
    first: int
    total: int
    usage: dict[str, int]
    prompts: tuple[PromptInfo | None, ...]
    page: int
    pages: int


def _steps(data: dict[str, Any]) -> list[Any]:
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise LookupError("not a readable trajectory (its steps are not a list)")
    return steps


def step_count(data: dict[str, Any]) -> int:
    """How many steps a stored trajectory has."""
    return len(_steps(data))


def _messages(step: Any) -> list[str] | None:
    turn = step.get("turn") if isinstance(step, dict) else None
    messages = turn.get("messages") if isinstance(turn, dict) else None
    return [str(m) for m in messages] if isinstance(messages, list) else None


def _shared(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def prompt_infos(steps: list[Any]) -> list[PromptInfo | None]:
    """Each step's prompt against the previous turn's: message counts, never the messages."""
    out: list[PromptInfo | None] = []
    previous: tuple[int, list[str]] | None = None
    for position, step in enumerate(steps):
        messages = _messages(step)
        if messages is None:
            out.append(None)
            continue
        shared = _shared(previous[1], messages) if previous else 0
        out.append(PromptInfo(count=len(messages), shared=shared, after=previous[0] if previous and shared else None))
        previous = (position, messages)
    return out


def _usage(steps: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for step in steps:
        usage = step.get("usage") if isinstance(step, dict) else None
        for name, n in (usage.items() if isinstance(usage, dict) else ()):
            if isinstance(n, (int, float)) and not isinstance(n, bool):
                out[str(name)] = out.get(str(name), 0) + int(n)
    return out


def steps_page(data: dict[str, Any], page: int, size: int = STEPS) -> StepsPage:
    """Page ``page`` (0-based; past the end: the last page) of a stored trajectory's steps."""
    steps = _steps(data)
    pages = max((len(steps) + size - 1) // size, 1)
    page = min(max(page, 0), pages - 1)
    first = page * size
    try:
        trajectory = trajectory_from_data({**data, "steps": steps[first:first + size]})
    except Exception as exc:  # noqa: BLE001 - cattrs' validation groups too: a damaged row is a clear 404
        raise LookupError(f"not a readable trajectory ({type(exc).__name__}: {exc})") from exc
    infos = prompt_infos(steps)[first:first + size]
    return StepsPage(trajectory=trajectory, first=first, total=len(steps), usage=_usage(steps),
                     prompts=tuple(infos), page=page, pages=pages)


def prompt(data: dict[str, Any], position: int, *, whole: bool = False) -> dict[str, Any]:
    """Step ``position``'s prompt: ``text`` is the messages after the ones it shares with the
    previous turn's prompt (all of them with ``whole``), as indented JSON; ``count``,
    ``shared``, ``after`` as in ``PromptInfo`` (``shared`` is 0 with ``whole``)."""
    steps = _steps(data)
    if not 0 <= position < len(steps):
        raise LookupError(f"step {position}: the episode has {len(steps)} steps")
    info = prompt_infos(steps[:position + 1])[-1]
    if info is None:
        raise LookupError(f"step {position} has no model turn")
    blobs: dict[str, Any] = {}
    for step in steps[:position + 1]:
        turn = step.get("turn") if isinstance(step, dict) else None
        if isinstance(turn, dict) and isinstance(turn.get("blobs"), dict):
            blobs.update(turn["blobs"])
    messages = [blobs[h] for h in _messages(steps[position]) or []]
    shared = 0 if whole else info.shared
    return {"step": position, "count": info.count, "shared": shared, "after": info.after if shared else None,
            "text": json.dumps(messages[shared:], indent=1)}
