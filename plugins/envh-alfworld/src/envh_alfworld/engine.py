"""The real ALFWorld text engine: TextWorld's ``PddlEnv`` under alfworld's own wrappers.

This is the stack ``AlfredTWEnv`` builds for each game (``AlfredDemangler`` without
shuffling, ``AlfredInfos``), driven directly so one game is loaded exactly when asked
(AlfredTWEnv shuffles a game list). Two engine quirks are handled here:

* every ``PddlEnv`` dlopens its own copy of fast-downward's library and never releases it;
  :meth:`TextEngine.close` calls ``fast_downward.close_lib`` so workers that build many
  engines do not grow without bound;
* fast-downward's PDDL translator overwrites ``sys.argv``; calls are wrapped to restore it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from envh import errors


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
                from textworld.envs import PddlEnv
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise errors.EnvError(
                    "The ALFWorld engine is not installed: pip install envh-alfworld "
                    f"(needs alfworld and textworld[pddl]): {exc!r}") from exc
            infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
            self._env = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
        return self._env

    def load(self, game_file: str) -> None:
        """Load ``game_file`` unless it is the one already loaded."""
        env = self._ensure()
        if game_file == self._game_file:
            return
        with _keep_argv():
            try:
                env.load(game_file)
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
        """Release the engine and its private copy of fast-downward's library. Idempotent."""
        env, self._env, self._game_file = self._env, None, None
        if env is None:
            return
        pddl = env
        while hasattr(pddl, "_wrapped_env") and pddl._wrapped_env is not None:
            pddl = pddl._wrapped_env
        lib = getattr(pddl, "downward_lib", None)
        with contextlib.suppress(Exception):
            env.close()
        if lib is not None:
            import fast_downward

            pddl.downward_lib = None
            pddl._pddl_state = None
            with contextlib.suppress(Exception):
                fast_downward.close_lib(lib)
