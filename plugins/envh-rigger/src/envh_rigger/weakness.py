"""Weaknesses as predicates over trajectories.

A weakness target names a behaviour; the loop measures it per episode as "the behaviour
shows and the episode fails". Built-in predicates (``NAME[:ARG[:ARG]]``):

* ``stops-early``: the episode ends by the policy's own stop/submit without success;
* ``repeats:N``: one action (tool and arguments) is taken at least N times;
* ``calls:TOOL[:REGEX]``: a call of TOOL whose JSON arguments match REGEX (RE2 syntax,
  matched in linear time: ``compile_pattern``);
* ``submits-before-test[:REGEX]``: a submit/stop call before any call whose arguments
  match REGEX (default: a test run, ``pytest|test``);
* ``invalid:N``: at least N actions were invalid or answered with an error.

Bridges contribute their own through the ``envh_weakness_predicates`` hook
(``WeaknessInfo``: Toy24's ``toy24.bad-position``, ``toy24.revisits``; ALFWorld's
``alfworld.revisits``), each with the plain words that name it and where it acts (its
``focus``, which ``guide`` concentrates on). Plain words are translated by keywords
(``translate``); when no keyword fits, a designer that can read them (the ``llm``
designer's ``translate_weakness``) picks a predicate from the table. The translation is
recorded and shown in the report.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
from envh import Registry, errors
from envh.rollout import Trajectory

SUBMIT_TOOLS = ("submit", "stop", "finish", "answer")


def _calls(t: Any) -> list[tuple[str, str]]:
    return [(s.proposed.tool, json.dumps(dict(s.proposed.args), sort_keys=True, default=str))
            for s in t.steps if s.proposed is not None]


def stops_early(t: Any) -> bool:
    """stops-early: the episode ends by the policy's own stop/submit without success."""
    return not t.success and t.stop == "terminated"


def repeats(t: Any, n: str = "3") -> bool:
    """repeats:N: one action (tool and arguments) is taken at least N times."""
    counts = Counter(_calls(t))
    return bool(counts) and max(counts.values()) >= int(n)


def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2, whose matching takes time linear in the text: a pattern
    from a user, a designer or a spec runs on a policy's arguments in this process, and
    Python's ``re`` can backtrack on it for hours (``(a+)+$``). ``re2.error`` for one RE2
    cannot run (backreferences, lookaround)."""
    import re2

    options = re2.Options()
    options.max_mem = 8 << 20  # a pattern's automaton: 200 characters never need more
    options.log_errors = False  # a refused pattern is an error for the caller, not a log line
    return re2.compile(pattern, options)


def focus_matcher(pattern: str | list[str] | tuple[str, ...]) -> Callable[[str], bool]:
    """A focus's ``pattern`` as a test of a text: one pattern, or a list of patterns that
    must all match (RE2 has no lookahead to join them in one)."""
    compiled = [compile_pattern(str(p)) for p in ([pattern] if isinstance(pattern, str) else pattern)]
    return lambda text: all(rx.search(text) is not None for rx in compiled)


def _risky_focus(pattern: Any) -> str | None:
    """Why ``pattern`` (one, or a list all of which must match) cannot be a focus's, or ``None``."""
    if isinstance(pattern, str):
        return _risky_pattern(pattern)
    if not (isinstance(pattern, list | tuple) and 0 < len(pattern) <= 8 and all(isinstance(p, str) for p in pattern)):
        return "must be a pattern or a list of 1-8 patterns that must all match"
    return next((why for why in map(_risky_pattern, pattern) if why), None)


def _pattern(pattern: str) -> Callable[[str], bool]:
    """``pattern``'s search (linear time: ``compile_pattern``)."""
    rx = compile_pattern(pattern)
    return lambda text: rx.search(text) is not None


def calls(t: Any, tool: str, pattern: str = "") -> bool:
    """calls:TOOL[:REGEX]: a call of TOOL whose JSON arguments match REGEX."""
    search = _pattern(pattern) if pattern else None
    return any(name == tool and (search is None or search(args)) for name, args in _calls(t))


def submits_before_test(t: Any, pattern: str = r"pytest|\btest") -> bool:
    """submits-before-test[:REGEX]: a submit/stop call before any call matching REGEX."""
    search = _pattern(pattern)
    for name, args in _calls(t):
        if search(args):
            return False
        if name in SUBMIT_TOOLS:
            return True
    return False


def invalid(t: Any, n: str = "1") -> bool:
    """invalid:N: at least N actions were invalid or answered with an error."""
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
    focus: dict[str, Any] | None = None  # where it acts (guidance concentrates there)
    translated_by: str = ""  # "", "keywords" or the designer that read the plain words

    def shows(self, t: Any) -> bool:
        """The behaviour shows in ``t``."""
        return bool(self.fn(t, *self.args))

    def bites(self, t: Any) -> bool:
        """The behaviour shows and the episode fails: the per-episode outcome measured."""
        return not t.success and self.shows(t)


@attrs.frozen(kw_only=True)
class Entry:
    """A predicate the table offers: its function, focus, keywords and one-line help."""

    fn: Callable[..., bool] = attrs.field(eq=False)
    focus: dict[str, Any] | None = None
    keywords: tuple[str, ...] = ()
    description: str = ""


def table(registry: Registry | None = None, bridge: str | None = None) -> dict[str, Entry]:
    """Built-ins plus the predicates contributed for ``bridge`` (or for any bridge)."""
    from .guidance import builtin_focus

    out = {name: Entry(fn=fn, focus=builtin_focus(name), description=(fn.__doc__ or "").strip())
           for name, fn in BUILTIN.items()}
    for name, info in (registry.weakness_predicates() if registry is not None else {}).items():
        if info.bridge not in (None, bridge):
            continue
        try:
            fn = info.load()
        except errors.PluginError:  # an unloadable predicate is not offered
            continue
        out[name] = Entry(fn=fn, focus=_checked_focus(info.focus), keywords=tuple(info.keywords),
                          description=info.description)
    return out


def _checked_focus(focus: Any) -> dict[str, Any] | None:
    """A plugin's focus as guide reads it, or ``None`` (anywhere) when it is malformed: a
    bad pattern would otherwise fail every guided episode."""
    if not isinstance(focus, dict):
        return None
    try:
        tools, pattern = focus.get("tools"), focus.get("pattern")
        if tools is not None and not (isinstance(tools, list | tuple) and all(isinstance(t, str) for t in tools)):
            return None
        if pattern is not None and _risky_focus(pattern):  # too long, or RE2 cannot run it
            return None
    except (TypeError, ValueError):
        return None
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in focus.items()
            if k in ("tools", "pattern", "repeats")}


#: words that can turn a keyword's meaning around ("never stops" is not stops-early)
_NEGATION = re.compile(r"\b(?:never|not|no|nor|neither|cannot)\b|n't\b")


def translate(text: str, entries: dict[str, Entry] | None = None) -> str | None:
    """Plain words → a predicate string by keywords (each the start of a word: "stop" is not
    in "nonstop"), or ``None``; also ``None`` when the words hold a negation, which keywords
    cannot read ("never stops"): a designer that reads words, or a predicate name, must."""
    words = text.lower()
    if _NEGATION.search(words):
        return None

    def has(k: str) -> bool:
        return re.search(r"\b" + re.escape(k.lower()), words) is not None

    for name, entry in (entries or {}).items():  # a bridge's own words first: they are specific
        if entry.keywords and all(has(k) for k in entry.keywords):
            return name
    for keys, predicate in KEYWORDS:
        if all(has(k) for k in keys):
            return predicate
    return None


def _make(text: str, predicate: str, entries: dict[str, Entry], how: str) -> Weakness:
    name, *args = predicate.split(":")
    entry = entries[name]
    focus = entry.focus
    if name in BUILTIN:  # a built-in's focus depends on its arguments
        from .guidance import builtin_focus

        focus = builtin_focus(predicate)
    return Weakness(text=text, predicate=":".join([name, *args]), fn=entry.fn, args=tuple(args),
                    focus=focus, translated_by=how)


def _risky_pattern(pattern: str) -> str | None:
    """Why ``pattern`` cannot be a predicate's or a focus's pattern, or ``None``: longer
    than 200 characters, or not a pattern RE2 runs (``compile_pattern``: it matches in
    linear time, so a pattern that would backtrack catastrophically in ``re`` is harmless)."""
    if len(pattern) > 200:
        return "is longer than 200 characters"
    try:
        compile_pattern(pattern)
    except Exception as exc:  # noqa: BLE001 - re2.error, and its option errors
        why = exc.args[0] if exc.args else exc
        why = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
        return (f"is not a pattern this engine runs ({why}); RE2 syntax, matched in linear time: "
                "no backreferences or lookaround")
    return None


def check_predicate(predicate: str, entries: dict[str, Entry]) -> str:
    """``predicate`` if it names a table entry with readable arguments, else an error."""
    name, *args = str(predicate).strip().split(":")
    if name not in entries:
        raise errors.EnvhError(f"unknown predicate {name!r}; choose one of: {', '.join(sorted(entries))}")
    if name in ("repeats", "invalid") and any(not (a.isascii() and a.isdigit()) or int(a) < 1 for a in args):
        raise errors.EnvhError(f"{name} takes a whole number >= 1, got {':'.join(args)!r}")
    if name == "repeats" and args and int(args[0]) < 2:  # "taken once" is any episode with an action
        raise errors.EnvhError("repeats:1 shows in every episode that takes an action: use repeats:2 or more")
    patterns = args[1:2] if name == "calls" else args[:1] if name == "submits-before-test" else []
    for pattern in patterns:
        if problem := _risky_pattern(pattern):
            raise errors.EnvhError(f"{predicate!r}: the pattern {pattern!r} {problem}")
    try:  # the arguments must make sense to the predicate: try it on an empty episode
        entries[name].fn(Trajectory(key="check", spec_id="check"), *args)
    except Exception as exc:  # noqa: BLE001 - any failure means the arguments do not fit
        raise errors.EnvhError(f"{predicate!r}: the arguments do not fit {name} ({exc!r})") from None
    return ":".join([name, *args])


def resolve(text: str, *, registry: Registry | None = None, bridge: str | None = None,
            reader: Callable[[str, dict[str, str]], str | None] | None = None) -> Weakness:
    """A predicate string (``calls:combine:div``) or plain words → ``Weakness``.

    Plain words go through the keywords first; when none fits and ``reader`` is given
    (``reader(text, {name: description}) -> predicate``, e.g. the ``llm`` designer's
    ``translate_weakness``), its answer is checked against the table and used.
    """
    entries = table(registry, bridge)
    name = text.strip().split(":")[0]
    if name in entries:
        return _make(text, check_predicate(text.strip(), entries), entries, "")
    translated = translate(text, entries)
    if translated is not None:
        return _make(text, translated, entries, "keywords")
    if reader is not None:
        import inspect

        listing = {k: e.description for k, e in sorted(entries.items())}
        if "usable" in inspect.signature(reader).parameters:  # the reader retries on bad arguments
            answer = reader(text, listing, usable=lambda p: check_predicate(p, entries))
        else:
            answer = reader(text, listing)
        if answer:
            try:
                return _make(text, check_predicate(answer, entries), entries, "designer")
            except errors.EnvhError as exc:
                raise errors.EnvhError(f"The designer read the weakness {text!r} as {answer!r}, which is not a "
                                       f"usable predicate: {exc}.") from None
    raise errors.EnvhError(
        f"Cannot read the weakness {text!r} as a predicate. Use one of: "
        + ", ".join(sorted(entries)) + " (e.g. weakness:repeats:3, weakness:calls:bash:pytest), "
        "or words naming one (\"submits before running tests\", \"repeats an action\", "
        "\"stops without reaching the goal\").")


def weakness_focus(ctx: Any) -> tuple[dict[str, Any] | None, str]:
    """Where the weakness is, for a designer context: the focus of the predicate (built-in
    or the bridge's, at its default arguments) that shows most in the failed episodes
    beyond the won ones, and its name; ``(None, "")`` when none separates them."""
    from .guidance import focus_for

    episodes = list(ctx.episodes)
    return focus_for(probes(ctx.registry, ctx.bridge), [t for t in episodes if not t.success],
                     [t for t in episodes if t.success])


def probes(registry: Any, bridge: str, *, focused: bool = True) -> list[Any]:
    """The predicates (built-in and the bridge's) usable at their default arguments; with
    ``focused`` only those a guide can focus on."""
    entries = table(registry, bridge)
    out = []
    for name, entry in entries.items():
        if focused and entry.focus is None:
            continue
        try:
            out.append(_make(name, check_predicate(name, entries), entries, ""))
        except errors.EnvhError:  # needs arguments (calls:TOOL): nothing to probe with
            continue
    return out
