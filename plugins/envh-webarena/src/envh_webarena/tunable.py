"""Tunable difficulty for the ``curriculum`` component kind: WebShop and MiniWoB++.

WebShop — ``goal_attributes`` (1–8): how many requirements the goal states, its attributes
plus its options ("machine wash cotton t-shirt, navy blue, large": 4), each of which the
reward checks. ``task_for`` draws a goal of the ``train`` split with exactly that many,
or, when the catalogue has none, with the nearest count (the easier one on a tie).

MiniWoB++ — ``level`` (1–5): a ladder of the package's own tasks and their difficulty
variants, ordered by how many actions and how much reading a task needs: one click or
field (1); a short sequence, easy variants (2); forms, dates, menus, medium variants (3);
search, inboxes, flights without delay (4); hard and transfer variants, free-form
perception (5). Within a family the variants keep MiniWoB's own order (``-easy`` <
``-medium`` < plain < ``-hard``; ``-nodelay`` before the animated original; ``-noscroll``
before scrolling; ``-nl-turk`` phrasing last). ``task_for`` draws a task of the level among
those the bridge offers, or of the nearest level that has some.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from envh import TaskRef, errors

WEBSHOP_PARAMETERS: dict[str, dict[str, Any]] = {
    "goal_attributes": {"low": 1, "high": 8, "default": 3, "harder": 1,
                        "description": "requirements in the goal (attributes + options), each scored"},
}
MINIWOB_LEVELS: tuple[tuple[str, ...], ...] = (
    ("click-button", "click-link", "click-test", "click-test-2", "click-dialog", "focus-text", "enter-text",
     "click-widget", "click-option"),
    ("click-button-sequence", "click-dialog-2", "click-checkboxes", "enter-password", "enter-text-2",
     "focus-text-2", "click-tab", "click-collapsible-nodelay", "login-user", "choose-date-easy",
     "click-tab-2-easy", "use-autocomplete-nodelay"),
    ("click-checkboxes-large", "click-collapsible", "click-tab-2-medium", "choose-list", "enter-date",
     "enter-time", "login-user-popup", "email-inbox-noscroll", "navigate-tree", "choose-date-medium",
     "use-autocomplete", "click-menu"),
    ("click-checkboxes-soft", "click-tab-2", "click-collapsible-2-nodelay", "email-inbox", "search-engine",
     "social-media-some", "choose-date-nodelay", "book-flight-nodelay", "enter-text-dynamic", "copy-paste"),
    ("click-checkboxes-transfer", "click-tab-2-hard", "click-collapsible-2", "email-inbox-nl-turk",
     "social-media-all", "choose-date", "book-flight", "use-colorwheel-2", "count-shape", "click-pie"),
)
MINIWOB_PARAMETERS: dict[str, dict[str, Any]] = {
    "level": {"low": 1, "high": len(MINIWOB_LEVELS), "default": 3, "harder": 1,
              "description": "MiniWoB++ task ladder: 1 one click or field … 5 hard and transfer variants"},
}


def _value(params: Mapping[str, Any], declared: Mapping[str, dict[str, Any]], bridge: str) -> int:
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise errors.UnknownNameError(f"{bridge} tunable parameter", unknown[0], list(declared))
    (name, spec), = declared.items()
    value = params.get(name, spec["default"])
    if type(value) is not int or not spec["low"] <= value <= spec["high"]:
        raise errors.SpecError(f"{bridge} {name} must be an integer in [{spec['low']}, {spec['high']}], got {value!r}")
    return value


def _nearest(buckets: Mapping[int, Sequence[Any]], wanted: int) -> Sequence[Any]:
    """The bucket at ``wanted``, else the nearest non-empty one (the lower on a tie)."""
    filled = sorted(k for k, v in buckets.items() if v)
    if not filled:
        return ()
    return buckets[min(filled, key=lambda k: (abs(k - wanted), k))]


def goal_requirements(goal: Mapping[str, Any]) -> int:
    """How many requirements a WebShop goal states: attributes plus options."""
    return len(goal.get("attributes") or ()) + len(goal.get("goal_options") or ())


def webshop_task_for(bridge: Any, params: Mapping[str, Any], rng: Any) -> TaskRef:
    from envh_webarena.webshop import data as wsdata

    wanted = _value(params, WEBSHOP_PARAMETERS, "webshop")
    goals = bridge.site.catalogue.goals
    buckets: dict[int, list[int]] = {}
    try:
        train = wsdata.split_indices(len(goals), "train", bridge.split_ranges)
    except errors.UnknownNameError:
        train = range(0)
    for i in train:
        buckets.setdefault(goal_requirements(goals[i]), []).append(i)
    chosen = _nearest(buckets, wanted)
    if not chosen:
        raise errors.EnvError(f"webshop: the train split has no goals in {bridge.data}; a curriculum draws "
                              "its tasks from train (set split_ranges)")
    return TaskRef(suite="webshop", split="train", instance_id=str(rng.choice(list(chosen))))


def miniwob_task_for(bridge: Any, params: Mapping[str, Any], rng: Any) -> TaskRef:
    from envh_webarena.miniwob import SPLIT, SUITE

    wanted = _value(params, MINIWOB_PARAMETERS, "miniwob")
    offered = set(bridge.task_names)
    buckets = {n: [t for t in tasks if t in offered] for n, tasks in enumerate(MINIWOB_LEVELS, 1)}
    chosen = _nearest(buckets, wanted)
    if not chosen:
        raise errors.EnvError(f"miniwob: none of the bridge's tasks ({', '.join(sorted(offered)[:8])}, ...) is on "
                              "the difficulty ladder; add ladder tasks to config.tasks")
    return TaskRef(suite=SUITE, split=SPLIT, instance_id=rng.choice(list(chosen)))
