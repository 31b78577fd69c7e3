"""Bridge: the base class that puts one benchmark behind ``ActionableEnv``.

It gives every bridge, for free: validation of tool calls against the tool schemas
(policy mistakes become error observations), a replay log so ``save_state`` and
``from_state`` work without bridge code, and the context-manager protocol.
Subclasses implement ``_reset`` and ``_step`` plus the read-only methods.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar

from . import errors
from .env import ActionableEnv
from .types import Action, EnvResponse, Observation, ResetResult, TaskRef, thaw
from .validation import compile_tools


class Bridge(ActionableEnv):
    """Base class of bridges. ``name`` is the bridge's registered name."""

    name: ClassVar[str] = "bridge"
    #: True when any instance id of a known split is a task by construction (Toy24: any
    #: numbers); such bridges still refuse unknown splits, and say so in their docs.
    open_instances: ClassVar[bool] = False
    #: True when ``reference_actions()`` returning ``None`` means no win is possible from the
    #: current state (a solver that searches from any state: Toy24, WebShop text); False when
    #: it may only mean "no reference from here" (a walkthrough or gold patch for the start).
    reference_complete: ClassVar[bool] = False

    _episode: dict[str, Any] | None = None
    _checkers: dict[str, Any] | None = None
    _known_tasks: dict[str, frozenset[str]] | None = None

    @abc.abstractmethod
    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        """Start the episode; called by ``reset`` after bookkeeping."""

    @abc.abstractmethod
    def _step(self, action: Action) -> EnvResponse:
        """Apply an action whose tool and argument types are already validated."""

    def reset(self, *, task: TaskRef | None = None, seed: int | None = None,
              options: Mapping[str, Any] | None = None) -> ResetResult:
        opts = dict(options or {})
        if task is not None:
            self.check_task(task)
        self._episode = {"task": task, "seed": seed, "options": opts, "actions": [], "mark": None}
        self._checkers = None
        return self._reset(task, seed, opts)

    def step(self, action: Action) -> EnvResponse:
        if self._episode is None:
            raise errors.EnvhError(f"{type(self).__name__}.step() called before reset()")
        if not isinstance(action, Action):
            return self.error_response(
                f"Expected an Action(tool=..., args=...), got {type(action).__name__}.", kind="invalid_action")
        checkers = self._checkers
        if checkers is None:
            checkers = self._checkers = compile_tools(self.tools())
        check = checkers.get(action.tool)
        if check is None:
            return self.error_response(
                f"Unknown tool {action.tool!r:.80}. Available tools: {', '.join(sorted(checkers))}.",
                kind="unknown_tool")
        problem = check(action.args, action.tool)
        if problem:
            return self.error_response(f"Invalid call: {problem}.", kind="invalid_arguments")
        self._episode["actions"].append(action)
        return self._step(action)

    def check_task(self, task: TaskRef) -> None:
        """Refuse a task this bridge does not offer, before anything starts: an unknown
        split, or (unless ``open_instances``) an instance id ``list_tasks`` does not list.
        An ``open_instances`` bridge also takes TaskRef's default split (an id with no split).

        The error names the valid choices. The task list is read once per bridge and
        read again on a miss, so tasks added while the bridge lives are found.
        """
        if self.open_instances and task.split == "default":
            return  # TaskRef's own default: an instance without a split, any id by construction
        for fresh in (False, True):
            if fresh or self._known_tasks is None:
                known: dict[str, set[str]] = {}
                for ref in self.list_tasks():
                    known.setdefault(ref.split, set()).add(ref.instance_id)
                self._known_tasks = {k: frozenset(v) for k, v in known.items()}
            ids = self._known_tasks.get(task.split)
            if ids is not None and (self.open_instances or task.instance_id in ids):
                return
        assert self._known_tasks is not None
        if task.split not in self._known_tasks:
            raise errors.UnknownNameError(f"{self.name} split", task.split, list(self._known_tasks))
        choices = sorted(self._known_tasks[task.split])
        shown = choices if len(choices) <= 30 else [*choices[:30], f"... ({len(choices) - 30} more)"]
        raise errors.UnknownNameError(f"{self.name} task in split {task.split!r}:", task.instance_id, shown)

    def tunable_parameters(self) -> dict[str, dict[str, Any]]:
        """Parameters a curriculum (envh-adaptive's ``curriculum`` kind) may tune: name →
        ``{low, high, default, harder, description}`` (integers; ``default`` is the safe
        value; ``harder`` is 1 when a larger value makes the task harder, -1 when smaller
        does). None by default."""
        return {}

    def task_for(self, params: Mapping[str, Any], rng: Any) -> TaskRef:
        """A task drawn with ``rng`` (a ``random.Random``) for parameter values ``params``."""
        raise NotImplementedError(f"{type(self).__name__} declares no tunable parameters")

    def error_response(self, message: str, *, kind: str = "tool_error", reward: float = 0.0) -> EnvResponse:
        """The answer to a policy mistake: an observation saying what was wrong."""
        return EnvResponse(
            observation=Observation(text=f"Error: {message}"),
            reward=reward,
            info={"error": {"type": kind, "message": message}},
        )

    def reference_actions(self) -> list[Action] | None:
        """A known winning action sequence from the current state (the benchmark's own
        reference solution: a solver's plan, an expert walkthrough, a gold patch), or
        ``None`` when the bridge has none from here. Designers replay it through a
        candidate stack to prove the candidate leaves the task solvable. Default: the
        bridge's ``solve()`` oracle when it has one."""
        solve = getattr(self, "solve", None)
        plan = solve() if callable(solve) else None
        return None if plan is None else list(plan)

    def error_kinds(self) -> dict[str, str]:
        """The bridge's error taxonomy: each ``info["error"]["type"]`` it may answer with,
        mapped to the failure axis it evidences (S0, A, O, T, R, task_understanding).
        Diagnosers classify failures by it; bridges extend the base kinds with their own."""
        return {"invalid_action": "A", "unknown_tool": "A", "invalid_arguments": "A",
                "tool_error": "T", "episode_over": "task_understanding"}

    def notify_replay_complete(self) -> None:
        if self._episode is not None:
            self._episode["mark"] = len(self._episode["actions"])

    def replay_shown(self, observation: Observation) -> Observation:
        """Optional: a Stage above tells the bridge the observation it shows the policy
        after its replay; the bridge answers what is shown (default: that observation; a
        bridge may bring a reset view up to date with the world after the replay). Until
        the next action reaches the bridge, ``observe()`` returns the answer (every
        bridge's ``observe`` is wrapped to, see ``__init_subclass__``)."""
        if self._episode is not None:
            self._episode["shown"] = observation
        return observation

    def shown_after_replay(self) -> Observation | None:
        """What ``replay_shown`` recorded, while no action reached the bridge since the
        replay ended (``from_state`` replays to the same point); else None."""
        ep = self._episode
        if ep is None or ep.get("shown") is None or ep.get("mark") != len(ep["actions"]):
            return None
        shown: Observation = ep["shown"]
        return shown

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A bridge's ``observe()`` returns what a Stage showed after its replay, until
        the next action (``shown_after_replay``); otherwise the bridge's own answer."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("observe")
        if own is None or getattr(own, "_envh_after_replay", False):
            return

        def observe(self: Bridge) -> Observation:
            shown = self.shown_after_replay()
            return own(self) if shown is None else shown

        observe.__doc__, observe.__name__, observe.__qualname__ = own.__doc__, "observe", own.__qualname__
        observe._envh_after_replay = True  # type: ignore[attr-defined]
        setattr(cls, "observe", observe)  # noqa: B010 - the wrapper replaces the class's own

    # -- state -------------------------------------------------------------------------
    def save_state(self) -> dict[str, Any]:
        """Replay form: the reset arguments and every action that reached ``_step``."""
        ep = self._episode
        if ep is None:
            raise errors.StateError("save_state() called before reset()")
        task: TaskRef | None = ep["task"]
        return {
            "format": "replay",
            "bridge": self.name,
            "task": None if task is None else {"suite": task.suite, "split": task.split,
                                               "instance_id": task.instance_id},
            "seed": ep["seed"],
            "options": ep["options"],
            "actions": [{"tool": a.tool, "args": thaw(a.args)} for a in ep["actions"]],
            "replay_mark": ep["mark"],
        }

    def from_state(self, state: Mapping[str, Any]) -> Observation:
        if state.get("format") != "replay" or state.get("bridge") != self.name:
            raise errors.StateError(
                f"Cannot restore state of format {state.get('format')!r} for bridge "
                f"{state.get('bridge')!r} into bridge {self.name!r}.")
        task = TaskRef(**state["task"]) if state.get("task") else None
        self.reset(task=task, seed=state.get("seed"), options=state.get("options"))
        mark = state.get("replay_mark")
        if mark:
            self.notify_replay_start()
        for i, raw in enumerate(state.get("actions", [])):
            if i == mark:
                self.notify_replay_complete()
            self.step(Action(tool=raw["tool"], args=dict(raw.get("args") or {})))
        if mark is not None and mark == len(state.get("actions", [])):
            self.notify_replay_complete()
        # observe(), not the last replayed step's answer: that may be an error message,
        # and the restored env must look exactly like the saved one.
        return self.observe()
