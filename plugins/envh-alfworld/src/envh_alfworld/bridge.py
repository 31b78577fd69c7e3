"""AlfworldEnv: ALFWorld's text games behind ``envh.ActionableEnv``.

One tool, ``do(command)``. The observation text carries the goal and the engine's last
text; ``data`` carries the goal, the admissible commands and the task type. The verifier is
the game's own ``won`` flag. A step budget and a repetition guard truncate episodes; a Stage
replay rewinds both (``notify_replay_complete``).
"""

from __future__ import annotations

import re
from typing import Any

import attrs
from envh import (
    Action,
    Bridge,
    EnvResponse,
    EvaluationResult,
    Observation,
    ResetResult,
    TaskRef,
    ToolSpec,
    errors,
)

from envh_alfworld import data
from envh_alfworld.belief import BeliefTracker, parse_goal
from envh_alfworld.catalogue import TASK_TYPES
from envh_alfworld.engine import TextEngine
from envh_alfworld.state import STATE_SCHEMA

DO = ToolSpec(
    name="do",
    description=("Send one text command to the household game, e.g. 'go to drawer 1', 'open drawer 1', "
                 "'take mug 1 from drawer 1', 'move mug 1 to desk 1', 'heat mug 1 with microwave 1', "
                 "'clean mug 1 with sinkbasin 1', 'cool mug 1 with fridge 1', 'use desklamp 1', "
                 "'examine drawer 1', 'look', 'inventory'."),
    parameters={"type": "object", "properties": {
        "command": {"type": "string", "maxLength": 200, "description": "the command text"}},
        "required": ["command"], "additionalProperties": False},
)
_PUT = re.compile(r"^put (?P<o>.+?) (?:in|on|in/on|into|onto) (?P<r>.+)$")


class AlfworldEnv(Bridge):
    """ALFWorld (TextWorld engine).

    :param data_path: ALFWorld data root (default ``$ALFWORLD_DATA``, else ``~/.cache/alfworld``).
    :param split: split used when ``reset`` gets no task (its first game).
    :param task_types: only list games of these ALFRED task types.
    :param max_steps: truncate after this many ``do`` calls (ALFWorld's usual 50); None: no limit.
    :param max_repeats: truncate after this many identical observations in a row; None: off.
    :param show_admissible: append the admissible commands to the observation text.
    """

    _replaying = False  # between notify_replay_start and _complete: budgets are paused
    _reset_obs: Observation | None = None  # what reset() showed (a stage in `reset` mode shows it)
    name = "alfworld"

    def __init__(self, data_path: str | None = None, split: str = "train",
                 task_types: list[str] | None = None, max_steps: int | None = 50,
                 max_repeats: int | None = None, show_admissible: bool = False) -> None:
        data.check_split(split)
        unknown = sorted(set(task_types or ()) - set(TASK_TYPES))
        if unknown:
            raise errors.SpecError(f"Unknown ALFWorld task type(s) {', '.join(map(repr, unknown))} in "
                                   f"task_types. Choose from: {', '.join(TASK_TYPES)}")
        if max_steps is not None and max_steps < 1:
            raise errors.SpecError(f"alfworld max_steps must be >= 1 or null, got {max_steps}")
        if max_repeats is not None and max_repeats < 2:
            raise errors.SpecError(f"alfworld max_repeats must be >= 2 or null, got {max_repeats}")
        self.root = data.data_root(data_path)
        self.split, self.task_types = split, list(task_types) if task_types else None
        self.max_steps, self.max_repeats, self.show_admissible = max_steps, max_repeats, show_admissible
        self._games: dict[str, list[data.GameInfo]] = {}
        self.engine = TextEngine()
        self.belief = BeliefTracker()
        self.task: TaskRef | None = None
        self.task_type = ""
        self.goal = ""
        self.steps = self.repeats = 0
        self.last_command: str | None = None
        self.truncated = False
        self._obs = Observation(text="", data={})
        self._intro = ""
        self._guard_text: str | None = None  # after a replay: its last answer, for the guard
        self._belief_before_replay: dict[str, Any] | None = None
        self._game_files: dict[TaskRef, str] = {}

    # -- tasks ---------------------------------------------------------------------------
    def list_games(self, split: str | None = None, *, refresh: bool = False) -> list[data.GameInfo]:
        """Playable games with their task types (``list_tasks`` without the types). The
        scan (which reads every game file, as alfworld does) is cached per split."""
        splits = [split] if split else list(data.SPLITS)
        for s in splits:
            if refresh or s not in self._games:
                self._games[s] = data.discover(self.root, s)
        games = [g for s in splits for g in self._games[s]]
        if self.task_types:
            games = [g for g in games if g.task_type in self.task_types]
        return games

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        return [g.task for g in self.list_games(split)]

    def tunable_parameters(self) -> dict[str, dict[str, Any]]:
        from envh_alfworld.tunable import PARAMETERS  # task tier, room size, distractors, closed

        return {name: dict(spec) for name, spec in PARAMETERS.items()}

    def task_for(self, params: Any, rng: Any) -> TaskRef:
        from envh_alfworld.tunable import task_for  # a game built by the procedural builder

        return task_for(self, params, rng)

    def check_task(self, task: TaskRef) -> None:
        """The core's check on the canonical name; when a game is not listed, say why
        (missing, movable/sliced, unsolvable) where the folder tells."""
        canonical = data.canonical_task(task)
        try:
            super().check_task(canonical)
        except errors.UnknownNameError:
            if (data.split_root(self.root, canonical.split) / canonical.instance_id / data.GAME_FILE).is_file():
                data.game_file_for(self.root, canonical)  # movable, sliced or unsolvable: say so
            raise

    def tools(self) -> list[ToolSpec]:
        return [DO]

    # -- episode -------------------------------------------------------------------------
    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        if task is None:
            games = self.list_games(self.split)
            if not games:
                raise errors.EnvError(f"No ALFWorld games in split {self.split!r} under {self.root}. {data.FETCH_HINT}")
            task = games[0].task
        task = data.canonical_task(task)
        if task not in self._game_files:
            self._game_files[task] = data.game_file_for(self.root, task)
        game_file = self._game_files[task]
        self.engine.load(game_file)
        intro = self.engine.reset().strip()
        self.task, self.goal = task, parse_goal(intro)
        self.task_type = _task_type(game_file)
        self.belief.reset(intro)
        self.steps = self.repeats = 0
        self.last_command, self.truncated, self._replaying = None, False, False
        self._intro, self._guard_text = intro, None
        self._obs = self._reset_obs = self._observation(intro, with_goal=False)
        return ResetResult(observation=self._obs, info={"task": str(task), "task_type": self.task_type,
                                                          "game_file": game_file})

    def _step(self, action: Action) -> EnvResponse:
        if self.engine.won or self.truncated:
            return self.error_response("The episode is over; reset() to play again.", kind="episode_over")
        command = " ".join(str(action.args["command"]).strip().lower().split())
        info: dict[str, Any] = {}
        if command not in self.engine.admissible and (m := _PUT.match(command)):
            alias = f"move {m.group('o')} to {m.group('r')}"
            if alias in self.engine.admissible:
                info["command_rewritten"] = {"from": command, "to": alias}
                command = alias
        self.steps += 1
        self.last_command = command
        if command not in self.engine.admissible:
            feedback = "Nothing happens."
            info["error"] = {"type": "inadmissible_command",
                             "message": f"{command!r} is not a valid command here. Valid now: "
                                        + ", ".join(self.engine.admissible)}
        else:
            feedback = self.engine.step(command)
            self.belief.update(command, feedback)
        previous = self._obs.text if self._guard_text is None else self._guard_text
        self._guard_text = None
        self._obs = self._observation(feedback)
        self.repeats = self.repeats + 1 if self._obs.text == previous else 0
        won = self.engine.won
        if not won and not self._replaying:
            if self.max_steps is not None and self.steps >= self.max_steps:
                self.truncated, info["truncated_by"] = True, f"step budget of {self.max_steps} used"
            elif self.max_repeats is not None and self.repeats + 1 >= self.max_repeats:
                self.truncated = True
                info["truncated_by"] = f"the same observation {self.max_repeats} times in a row"
        return EnvResponse(observation=self._obs, reward=1.0 if won else 0.0, terminated=won,
                           truncated=self.truncated, info=info)

    def _observation(self, feedback: str, *, with_goal: bool = True) -> Observation:
        text = f"Your task is to: {self.goal}.\n{feedback}" if with_goal else feedback
        if self.show_admissible:
            text += "\nAdmissible commands: " + ", ".join(self.engine.admissible)
        return Observation(text=text, data={"goal": self.goal, "task_type": self.task_type,
                                            "admissible_commands": list(self.engine.admissible),
                                            "feedback": feedback})

    def notify_replay_start(self) -> None:
        self._replaying = True
        self._belief_before_replay = self.belief.state()

    def notify_replay_complete(self) -> None:
        super().notify_replay_complete()
        self.steps = self.repeats = 0
        self.truncated = False
        self._replaying = False
        if self._belief_before_replay is not None:
            # What the replay showed was never shown to the policy: the belief goes back to
            # what it had seen, keeping only what it holds (it can feel that).
            holding = self.belief.holding
            self.belief.restore(self._belief_before_replay)
            self.belief.holding = holding
            self._belief_before_replay = None
        # Nor is the replay's last answer what the policy is told: observe() gives the room
        # and the task, as at reset, with the commands admissible now (what a stage with
        # `observation: reset` shows; the stage's own ResetResult decides what is shown).
        # The repetition guard still counts from that last answer, as before.
        self._guard_text = self._obs.text
        self._obs = self._observation(self._intro, with_goal=False)

    def replay_shown(self, observation: Observation) -> Observation:
        """A stage showing the reset view (``observation: reset``) shows the room and the
        task with the commands admissible after its replay, not the list from before it;
        any other observation (``last``, or one a layer below the stage rewrote) is shown
        as it is. ``observe()`` returns it until the next action."""
        if self._reset_obs is not None and observation.text == self._reset_obs.text:
            observation = self._observation(self._intro, with_goal=False)
        return super().replay_shown(observation)

    def observe(self) -> Observation:
        return attrs.evolve(self._obs, data=dict(self._obs.data))

    def evaluate(self) -> EvaluationResult:
        won = self.engine.won
        return EvaluationResult(success=won, score=1.0 if won else 0.0,
                                metrics={"steps": self.steps, "task_type": self.task_type})

    # -- state ---------------------------------------------------------------------------
    def reference_actions(self) -> list[Action] | None:
        """The planner's walkthrough from here (see ``reference.py``)."""
        from .reference import walkthrough_from_here

        return walkthrough_from_here(self)

    def get_env_state(self) -> dict[str, Any]:
        belief = self.belief.snapshot()
        task = self.task
        world = self.engine.world()
        return {
            "task": None if task is None else {"suite": task.suite, "split": task.split,
                                               "instance_id": task.instance_id},
            "goal": self.goal, "task_type": self.task_type,
            "room_receptacles": list(self.belief.room),
            "location": belief["location"], "holding": belief["holding"],
            "belief": {"receptacles": belief["receptacles"], "object_states": belief["object_states"]},
            "world": world,
            "admissible_commands": list(self.engine.admissible),
            "last_command": self.last_command, "last_feedback": self._obs.data.get("feedback", ""),
            "steps": self.steps, "max_steps": self.max_steps,
            "repeats": self.repeats, "max_repeats": self.max_repeats,
            "won": self.engine.won, "done": self.engine.won or self.truncated,
        }

    def belief_edges(self) -> list[tuple[str, str, str]]:
        """The belief tracker as (subject, relation, object) facts, for the workspace
        kind's ``track``: where the agent is and what it holds, each receptacle seen with
        its open state and contents, and object states the agent caused."""
        b = self.belief.snapshot()
        edges: list[tuple[str, str, str]] = []
        if b["location"]:
            edges.append(("agent", "at", b["location"]))
        if b["holding"]:
            edges.append(("agent", "holds", b["holding"]))
        for name, info in b["receptacles"].items():
            if info.get("open") is not None:
                edges.append((name, "is", "open" if info["open"] else "closed"))
            for item in info.get("contents") or []:
                edges.append((name, "contains", item))
        for obj, states in b["object_states"].items():
            edges += [(obj, "is", state) for state in states]
        return edges

    def env_state_schema(self) -> dict[str, Any]:
        return STATE_SCHEMA

    def close(self) -> None:
        self.engine.close()


def _task_type(game_file: str) -> str:
    import json
    from pathlib import Path

    try:
        return str(json.loads((Path(game_file).parent / "traj_data.json").read_text())["task_type"])
    except (OSError, ValueError, KeyError):
        return ""
