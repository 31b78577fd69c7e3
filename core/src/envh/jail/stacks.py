"""Which jail a spec's untrusted code runs in.

The untrusted code of one spec — its contracts, the contracts of its chain legs, its
curriculum coach — runs in jails of that spec's own, never in another spec's: hostile
code can kill, slow or fill only its own spec's processes. A spec starts at most
``MAX_PER_STACK`` jail processes; past that, its further legs and coaches load into the
least-loaded of them, so one spec cannot take the ``process.MAX_LIVE`` jails that every
other stack needs.

A spec is known by the base bridge of the env that the outermost ``envh.make`` in this
context is building (``building``, which ``make`` enters): a chain builds its legs with
nested ``make`` calls, and they all see the outermost one's bridge.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from .process import Jail

#: Jail processes one spec may start (its share of ``process.MAX_LIVE``).
MAX_PER_STACK = 4
_groups: dict[int, list[Jail]] = {}  # id(base bridge of a spec's stack) -> its jails
_lock = threading.Lock()
_outermost: ContextVar[Any] = ContextVar("envh_jail_outermost", default=None)


@contextlib.contextmanager
def building(env: Any) -> Iterator[None]:
    """While ``envh.make`` builds layers on ``env``: the spec's code goes to ``env``'s
    jails, unless an outer ``make`` (this is a chain leg) already named its own."""
    token = _outermost.set(env) if _outermost.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _outermost.reset(token)


def stack_jail(env: Any = None) -> Jail:
    """A jail for untrusted code of the spec being built (``env`` is the env the code is
    built on, when there is one): a new one while the spec has fewer than
    ``MAX_PER_STACK``, else the spec's jail with the fewest programs. Code built outside
    ``envh.make`` on no env gets a jail of its own."""
    root = _building() or env
    if root is None:
        return Jail()
    from ..harness import iter_layers

    base = iter_layers(root)[-1]
    with _lock:
        group = _group(base)
        if group is None:  # a bridge that cannot be weakly referenced: no grouping, no sharing
            return Jail()
        if len(group) < MAX_PER_STACK:
            group.append(Jail())
            return group[-1]
        return min(group, key=lambda jail: jail.program_count)


def _group(base: Any) -> list[Jail] | None:
    """The jails of the spec whose stack stands on ``base``; dropped with ``base``, so a
    later bridge at the same address never finds them."""
    key = id(base)
    group = _groups.get(key)
    if group is None:
        try:
            weakref.finalize(base, _groups.pop, key, None)
        except TypeError:
            return None
        group = _groups[key] = []
    return group


def _building() -> Any:
    """The env the outermost ``envh.make`` in this context is building, or None."""
    return _outermost.get()
