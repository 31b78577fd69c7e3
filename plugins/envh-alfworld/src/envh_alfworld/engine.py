"""The real ALFWorld text engine: TextWorld's ``PddlEnv`` under alfworld's own wrappers.

This is the stack ``AlfredTWEnv`` builds for each game (``AlfredDemangler`` without
shuffling, ``AlfredInfos``), driven directly so one game is loaded exactly when asked
(AlfredTWEnv shuffles a game list). Engine quirks handled here:

* every ``PddlEnv`` copies fast-downward's shared library to a temporary file and dlopens
  it, and never releases it: a worker that builds engines over and over grows without
  bound. ``dlclose`` on it is not safe either (later loads crash in the C++ runtime), so
  :meth:`TextEngine.close` drops the engine's game state and returns its library copy to a
  process-wide free list that the next engine reuses. Copies never exceed the number of
  engines alive at once;
* ``PddlEnv.load(path)`` leaves the file open, so the game is read here and passed as data;
* fast-downward's PDDL translator overwrites ``sys.argv``; calls are wrapped to restore it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Iterator
from typing import Any

from envh import errors

_FREE_LIBS: list[Any] = []  # fast-downward library copies no live engine uses
_LIBS_LOCK = threading.Lock()


class PddlAdapter:
    """Everything this package knows about TextWorld's ``PddlEnv`` internals, in one place.

    Reusing a library copy means building a ``PddlEnv`` without its ``__init__`` (which
    loads a fresh copy) and, on release, clearing the attributes that hold the game.
    Those are private to TextWorld, so the adapter only runs on the versions it was
    written and tested for (``TESTED``, also pinned in pyproject.toml); ``check()``
    says so clearly on any other.
    """

    TESTED = ((1, 7), (1, 8))  # textworld >= 1.7, < 1.8
    GAME_ATTRS = ("_pddl_state", "_game_data", "_logic", "_entity_infos", "state", "prev_state")
    recycle = True  # hand released library copies to the next engine (off: tests of the leak)

    @classmethod
    def check(cls, version: str | None = None) -> None:
        import textworld

        version = version or textworld.__version__
        try:
            parts = tuple(int(p) for p in version.split(".")[:2])
        except ValueError:
            parts = (0, 0)
        low, high = cls.TESTED
        if not low <= parts < high:
            raise errors.EnvError(
                f"envh-alfworld's engine adapter was written for textworld "
                f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))} (it reuses PddlEnv "
                f"internals), but textworld {version} is installed: "
                f"pip install 'textworld[pddl]>={'.'.join(map(str, low))},<{'.'.join(map(str, high))}'")

    @classmethod
    def new_env(cls, infos: Any) -> Any:
        """A ``PddlEnv``, reusing a released library copy when there is one."""
        import textworld
        from textworld.envs import PddlEnv

        cls.check()
        with _LIBS_LOCK:
            lib = _FREE_LIBS.pop() if _FREE_LIBS else None
        if lib is None:
            return PddlEnv(infos)
        env = PddlEnv.__new__(PddlEnv)
        textworld.Environment.__init__(env, infos)  # what PddlEnv.__init__ does, minus load_lib()
        env.downward_lib = lib
        return env

    @classmethod
    def release(cls, pddl: Any) -> None:
        """Drop the game state of ``pddl`` and hand its library copy back."""
        lib = getattr(pddl, "downward_lib", None)
        for attr in cls.GAME_ATTRS:
            with contextlib.suppress(AttributeError):
                setattr(pddl, attr, None)
        if lib is not None:
            pddl.downward_lib = None
            if cls.recycle:
                with _LIBS_LOCK:
                    _FREE_LIBS.append(lib)


def _pddl_env(infos: Any) -> Any:
    return PddlAdapter.new_env(infos)


def loaded_library_copies() -> int:
    """How many copies of fast-downward's library this process has mapped (for tests, bench).

    Counted by inode: each ``PddlEnv`` maps its own temporary copy, which fast-downward
    unlinks at once, so /proc/self/maps names it ``/tmp/... (deleted)``."""
    try:
        with open("/proc/self/maps") as fh:
            inodes = set()
            for line in fh:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and "downward" in fields[5]:
                    inodes.add((fields[3], fields[4]))
            return len(inodes)
    except OSError:  # pragma: no cover - non-Linux
        return -1


@contextlib.contextmanager
def _keep_argv() -> Iterator[None]:
    saved = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = saved


class TextEngine:
    """One TextWorld PDDL engine; loads a ``game.tw-pddl`` and plays it.

    ``load`` is cheap to repeat for the same file (the parsed game is kept), so resets of
    the same task cost one PDDL translation only.
    """

    def __init__(self) -> None:
        self._env: Any = None
        self._game_file: str | None = None
        self.feedback = ""
        self.admissible: list[str] = []
        self.won = False

    def _ensure(self) -> Any:
        if self._env is None:
            try:
                import textworld
                from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise errors.EnvError(
                    "The ALFWorld engine is not installed: pip install envh-alfworld "
                    f"(needs alfworld and textworld[pddl]): {exc!r}") from exc
            infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
            self._env = AlfredInfos(AlfredDemangler(_pddl_env(infos), shuffle=False))
        return self._env

    def load(self, game_file: str) -> None:
        """Load ``game_file`` unless it is the one already loaded."""
        env = self._ensure()
        if game_file == self._game_file:
            return
        with _keep_argv():
            try:
                # Hand over parsed data: PddlEnv.load(path) leaves the file handle open.
                with open(game_file) as fh:
                    game = json.load(fh)
                env.load(game)
            except Exception as exc:
                self._game_file = None
                raise errors.EnvError(f"ALFWorld could not load game {game_file}: {exc!r}") from exc
        self._game_file = game_file

    def reset(self) -> str:
        """Restart the loaded game; returns the intro text (room, then the task)."""
        if self._game_file is None:
            raise errors.EnvError("TextEngine.reset() before load()")
        with _keep_argv():
            state = self._ensure().reset()
        self._absorb(state)
        return self.feedback

    def step(self, command: str) -> str:
        """Send one command. Inadmissible commands answer ``Nothing happens.`` like ALFWorld."""
        with _keep_argv():
            state, _score, _done = self._ensure().step(command)
        self._absorb(state)
        return self.feedback

    def _absorb(self, state: Any) -> None:
        self.feedback = str(state["feedback"])
        self.admissible = list(state["admissible_commands"] or [])
        self.won = bool(state["won"])

    def world(self) -> dict[str, Any]:
        """Ground truth of the loaded game (see ``envh_alfworld.state.world_view``)."""
        if self._env is None or self._game_file is None:
            return {}
        from envh_alfworld.state import world_view

        return world_view(self._env)

    def close(self) -> None:
        """Release the engine: drop its game state, hand its library copy back. Idempotent."""
        env, self._env, self._game_file = self._env, None, None
        self.admissible = []
        if env is None:
            return
        pddl = env
        while getattr(pddl, "_wrapped_env", None) is not None:
            pddl = pddl._wrapped_env
        with contextlib.suppress(Exception):
            env.close()
        PddlAdapter.release(pddl)
