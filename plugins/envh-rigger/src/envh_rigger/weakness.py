"""Weaknesses as predicates over trajectories.

A weakness target names a behaviour; the loop measures it per episode as "the behaviour
shows and the episode fails". Built-in predicates (``NAME[:ARG[:ARG]]``):

* ``stops-early``: the episode ends by the policy's own stop/submit without success;
* ``repeats:N``: one action (tool and arguments) is taken at least N times;
* ``calls:TOOL[:REGEX]``: a call of TOOL whose JSON arguments match REGEX;
* ``submits-before-test[:REGEX]``: a submit/stop call before any call whose arguments
  match REGEX (default: a test run, ``pytest|test``);
* ``invalid:N``: at least N actions were invalid or answered with an error.

A bridge contributes more with a ``weakness_predicates()`` method on its class returning
``{name: callable(trajectory, *args) -> bool}``. Plain words are translated by keywords
(``translate``); the translation is recorded and shown in the report.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
from envh import Registry, errors

SUBMIT_TOOLS = ("submit", "stop", "finish", "answer")


def _calls(t: Any) -> list[tuple[str, str]]:
    return [(s.proposed.tool, json.dumps(dict(s.proposed.args), sort_keys=True, default=str))
            for s in t.steps if s.proposed is not None]


def stops_early(t: Any) -> bool:
    return not t.success and t.stop == "terminated"


def repeats(t: Any, n: str = "3") -> bool:
    counts = Counter(_calls(t))
    return bool(counts) and max(counts.values()) >= int(n)


def calls(t: Any, tool: str, pattern: str = "") -> bool:
    rx = re.compile(pattern) if pattern else None
    return any(name == tool and (rx is None or rx.search(args)) for name, args in _calls(t))


def submits_before_test(t: Any, pattern: str = r"pytest|\btest") -> bool:
    rx = re.compile(pattern)
    for name, args in _calls(t):
        if rx.search(args):
            return False
        if name in SUBMIT_TOOLS:
            return True
    return False


def invalid(t: Any, n: str = "1") -> bool:
    return sum(1 for s in t.steps if s.proposed is None or s.error) >= int(n)


BUILTIN: dict[str, Callable[..., bool]] = {
    "stops-early": stops_early, "repeats": repeats, "calls": calls,
    "submits-before-test": submits_before_test, "invalid": invalid,
}
# plain words → predicate (the first rule whose words all appear)
KEYWORDS: list[tuple[tuple[str, ...], str]] = [
    (("submit", "test"), "submits-before-test"),
    (("repeat",), "repeats:3"),
    (("loop",), "repeats:3"),
    (("invalid",), "invalid:1"),
    (("stop",), "stops-early"),
    (("give", "up"), "stops-early"),
    (("without", "goal"), "stops-early"),
]


@attrs.frozen(kw_only=True)
class Weakness:
    """A resolved predicate: ``text`` as given, ``predicate`` as ``NAME[:ARG...]``."""

    text: str
    predicate: str
    fn: Callable[..., bool] = attrs.field(eq=False, repr=False)
    args: tuple[str, ...] = ()

    def shows(self, t: Any) -> bool:
        """The behaviour shows in ``t``."""
        return bool(self.fn(t, *self.args))

    def bites(self, t: Any) -> bool:
        """The behaviour shows and the episode fails: the per-episode outcome measured."""
        return not t.success and self.shows(t)


def _bridge_predicates(registry: Registry | None, bridge: str | None) -> dict[str, Callable[..., bool]]:
    if registry is None or not bridge:
        return {}
    try:
        cls = registry.bridge(bridge).load()
    except Exception:  # noqa: BLE001 - an unloadable bridge contributes nothing here
        return {}
    extra = getattr(cls, "weakness_predicates", None)
    return dict(extra()) if callable(extra) else {}


def translate(text: str) -> str | None:
    """Plain words → a predicate string by keywords, or ``None``."""
    words = text.lower()
    for keys, predicate in KEYWORDS:
        if all(k in words for k in keys):
            return predicate
    return None


def resolve(text: str, *, registry: Registry | None = None, bridge: str | None = None) -> Weakness:
    """A predicate string (``calls:combine:div``) or plain words → ``Weakness``."""
    table = {**BUILTIN, **_bridge_predicates(registry, bridge)}
    name, *args = text.strip().split(":")
    if name not in table:
        translated = translate(text)
        if translated is None:
            raise errors.EnvhError(
                f"Cannot read the weakness {text!r} as a predicate. Use one of: "
                + ", ".join(sorted(table)) + " (e.g. weakness:repeats:3, weakness:calls:bash:pytest), "
                "or words naming one (\"submits before running tests\", \"repeats an action\", "
                "\"stops without reaching the goal\").")
        name, *args = translated.split(":")
    fn = table[name]
    return Weakness(text=text, predicate=":".join([name, *args]), fn=fn, args=tuple(args))
