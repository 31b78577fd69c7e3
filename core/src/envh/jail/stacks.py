"""Which jail a spec's untrusted code runs in.

The untrusted code of one spec — its contracts, the contracts of its chain legs, its
curriculum coach — runs in jails of that spec's own, never in another spec's: hostile
code can kill, slow or fill only its own spec's processes. A spec starts at most
``MAX_PER_STACK`` jail processes, and beyond its first only while half of the process's
``process.MAX_LIVE`` are free; past that, its further legs and coaches load into the
least-loaded of its jails, so neither one spec nor a few can take the jails every other
spec needs.

A spec is known by its content (its spec id): every stack ``envh.make`` builds from the
same spec in this process — a trainer's slots, a pool worker's warm envs, a chain's legs,
which are built by nested ``make`` calls inside the outermost one (``building``) — shares
that spec's jails, which live as long as one of those stacks does. Code built outside
``envh.make`` is grouped by the base bridge of the env it is built on.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from . import process
from .process import Jail

#: Jail processes one spec may start (its share of ``process.MAX_LIVE``).
MAX_PER_STACK = 4


class _Group:
    """The jails of one spec (weakly: a jail lives as long as code loaded into it, so a
    stack dropped without ``close()`` still ends its process), and the stacks (their base
    bridges) that keep the group."""

    def __init__(self) -> None:
        self._jails: list[weakref.ref[Jail]] = []
        self.holders: set[int] = set()

    def jails(self) -> list[Jail]:
        live = [j for j in (ref() for ref in self._jails) if j is not None]
        self._jails = [weakref.ref(j) for j in live]
        return live

    def add(self, jail: Jail) -> Jail:
        self._jails.append(weakref.ref(jail))
        return jail


_groups: dict[Any, _Group] = {}  # spec id (or ("bridge", id)) -> its group
_lock = threading.Lock()
_outermost: ContextVar[Any] = ContextVar("envh_jail_outermost", default=None)


class _Building:
    """What the outermost ``make`` is building: its base env and, computed on first use,
    its spec's id."""

    def __init__(self, env: Any, key: Callable[[], Any]) -> None:
        self.env, self._key, self._value = env, key, None

    @property
    def key(self) -> Any:
        if self._value is None:
            self._value = self._key()
        return self._value


@contextlib.contextmanager
def building(env: Any, key: Callable[[], Any] | None = None) -> Iterator[None]:
    """While ``envh.make`` builds layers on ``env`` (the spec whose id ``key()`` gives):
    the spec's code goes to that spec's jails, unless an outer ``make`` (this is a chain
    leg) already named its own."""
    outer = _outermost.get() is None
    token = _outermost.set(_Building(env, key or (lambda: ("bridge", id(env))))) if outer else None
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
    from ..harness import iter_layers

    held: _Building | None = _outermost.get()
    if held is None and env is None:
        return Jail()
    root = held.env if held is not None else env
    base = iter_layers(root)[-1]
    key = held.key if held is not None else ("bridge", id(base))
    with _lock:
        group = _groups.setdefault(key, _Group())
        if id(base) not in group.holders:
            try:  # the group lives while a stack built on it does
                weakref.finalize(base, _release, key, group, id(base))
            except TypeError:  # a bridge that cannot be weakly referenced: no sharing
                if not group.holders:
                    _groups.pop(key, None)
                return Jail()
            group.holders.add(id(base))
        jails = group.jails()
        # a spec's first jail always; more only while half the process's jails are free, so
        # MAX_LIVE / MAX_PER_STACK specs cannot take every jail from the next one
        if not jails or (len(jails) < MAX_PER_STACK and len(process._live) < process.MAX_LIVE // 2):
            return group.add(Jail())
        return min(jails, key=lambda jail: jail.program_count)


def spec_jails(key: Any) -> list[Jail]:
    """The live jails of the spec whose id is ``key`` (none when it has no group): the only
    processes its code may run in, for checks and tests."""
    group = _groups.get(key)
    return group.jails() if group is not None else []


def _release(key: Any, group: _Group, holder: int) -> None:
    """A stack of ``key``'s spec is gone; the last one takes the group with it (no lock: a
    finalizer may run while this thread holds it)."""
    group.holders.discard(holder)
    if not group.holders and _groups.get(key) is group:
        _groups.pop(key, None)
