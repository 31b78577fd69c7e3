"""Any env spec as a ``gymnasium.Env``, and every installed bridge as ``envh/<bridge>``.

Observations are the observation text. Actions come in two formats:

- ``action_format="dict"`` (the default): a ``Dict`` space derived from the tool schemas,
  ``{"tool": <index>, "args": {<tool name>: {<param>: value}}}``, where only the chosen
  tool's args are used (a tool without parameters has a one-value placeholder space).
  Enums and booleans are ``Discrete``; integers with ``minimum``/``maximum`` in their
  schema are ``Discrete`` over that range (bridges set the range from the episode, e.g.
  Toy24's positions lie within the current puzzle), so ``action_space.sample()`` makes
  calls a bridge can act on. The space is rebuilt at each ``reset`` from the tools the
  stack offers then.
- ``action_format="json"``: JSON text, ``{"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}``.

A malformed action is an error observation, as everywhere in envh. Without ``task=``,
each reset draws a task from ``split`` (or from every task the bridge lists) with the
env's seeded RNG. ``register_envs`` registers ``envh/<bridge>`` with a ``TimeLimit`` of
``DEFAULT_MAX_EPISODE_STEPS``, so the standard random loop always ends::

    import gymnasium, envh.gym
    envh.gym.register_envs()
    env = gymnasium.make("envh/toy24")          # max_episode_steps=50 unless you pass one
    obs, info = env.reset(seed=0)
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        done = terminated or truncated

Gymnasium is imported only here, so ``import envh`` stays cheap.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from . import errors
from .env import ActionableEnv
from .spec import EnvSpec, make
from .types import Action, EnvResponse, Observation, TaskRef, ToolSpec

_PRINTABLE = frozenset(string.printable)
_INT_BOUND = 2**31 - 1
#: The episode length ``register_envs`` gives every ``envh/<bridge>`` id (gymnasium's TimeLimit).
DEFAULT_MAX_EPISODE_STEPS = 50
#: Integers without bounds in their schema sample from this range, not ±2**31.
_FREE_INT = (-16, 16)


class UnicodeText(spaces.Text):
    """A ``Text`` space holding any string up to ``max_length`` (env text is not ASCII);
    samples are printable ASCII."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=_PRINTABLE, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


def _param_space(schema: Mapping[str, Any]) -> tuple[spaces.Space[Any], Callable[[Any], Any]]:
    """A space for one JSON Schema parameter and the decoder from its samples to JSON."""
    kind, enum = schema.get("type"), schema.get("enum")
    if enum:
        return spaces.Discrete(len(enum)), lambda x: enum[int(x)]
    if kind == "boolean":
        return spaces.Discrete(2), lambda x: bool(int(x))
    if kind == "integer":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if lo is not None and hi is not None:
            if int(hi) < int(lo):
                raise errors.SpecError(f"Tool parameter schema {dict(schema)} has maximum < minimum: no action fits it")
            return spaces.Discrete(int(hi) - int(lo) + 1, start=int(lo)), int
        lo = int(lo) if lo is not None else min(_FREE_INT[0], int(hi) if hi is not None else 0)
        hi = int(hi) if hi is not None else max(_FREE_INT[1], lo)
        return spaces.Discrete(hi - lo + 1, start=lo), int
    if kind == "number":
        lo, hi = schema.get("minimum", -1e6), schema.get("maximum", 1e6)
        if hi < lo:
            raise errors.SpecError(f"Tool parameter schema {dict(schema)} has maximum < minimum: no action fits it")
        return spaces.Box(low=lo, high=hi, shape=(), dtype=np.float64), lambda x: float(x)
    if kind == "string":
        return UnicodeText(int(schema.get("maxLength", 1024))), str
    return UnicodeText(4096), json.loads  # arrays, objects, anything: JSON text


class ToolActionSpace:
    """The ``Dict`` action space of a tool list, and its decoder to ``Action``."""

    def __init__(self, tools: list[ToolSpec]) -> None:
        self.tools = list(tools)
        self.names = [t.name for t in tools]
        self.decoders: dict[str, dict[str, Callable[[Any], Any]]] = {}
        per_tool: dict[str, spaces.Space[Any]] = {}
        for tool in tools:
            params, decoders = {}, {}
            for name, schema in (tool.parameters.get("properties") or {}).items():
                params[name], decoders[name] = _param_space(schema)
            # gymnasium rejects empty Dict spaces: a tool without parameters gets a unit space
            per_tool[tool.name] = spaces.Dict(params) if params else spaces.Discrete(1)
            self.decoders[tool.name] = decoders
        self.space = spaces.Dict({"tool": spaces.Discrete(len(tools)), "args": spaces.Dict(per_tool)})

    def decode(self, sample: Mapping[str, Any]) -> Action:
        index = int(sample["tool"])
        if not 0 <= index < len(self.names):  # -1 would silently pick the last tool
            raise IndexError(f"tool index {index} is outside 0..{len(self.names) - 1}")
        tool = self.names[index]
        given = (sample.get("args") or {}).get(tool)
        given = given if isinstance(given, Mapping) else {}
        return Action(tool=tool, args={k: dec(given[k]) for k, dec in self.decoders[tool].items() if k in given})


def _parse_json_action(text: Any) -> Action:
    data = json.loads(text) if isinstance(text, (str, bytes)) else text
    if not isinstance(data, dict) or not isinstance(data.get("tool"), str):
        raise ValueError('expected a JSON object like {"tool": "name", "args": {...}}')
    args = data.get("args", {})
    if not isinstance(args, dict):
        raise ValueError('"args" must be a JSON object')
    return Action(tool=data["tool"], args=args)


def _task(value: TaskRef | str | None, suite: str) -> TaskRef | None:
    if value is None or isinstance(value, TaskRef):
        return value
    split, _, instance = value.rpartition("/")
    return TaskRef(suite=suite, split=split or "default", instance_id=instance)


class EnvhGymEnv(gymnasium.Env[str, Any]):
    """An envh stack behind gymnasium's API.

    :param spec: an env spec (mapping, path, or ``EnvSpec``), or a built ``ActionableEnv``
        (the gym env then owns it and closes it).
    :param task: a fixed task (``TaskRef`` or ``"split/instance_id"``); else ``split``.
    :param split: draw each episode's task from this split with the env's RNG (default:
        from every task the bridge lists).
    :param action_format: ``"dict"`` (from the tool schemas, the default) or ``"json"`` (text).
    :param max_text: observations are cut to this many characters.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # text: fps is nominal

    def __init__(self, spec: EnvSpec | Mapping[str, Any] | str | Path | ActionableEnv, *,
                 task: TaskRef | str | None = None,
                 split: str | None = None, action_format: str = "dict", max_text: int = 65_536,
                 max_action_text: int = 4096, render_mode: str | None = None, registry: Any = None) -> None:
        if action_format not in ("json", "dict"):
            raise ValueError(f"action_format must be 'json' or 'dict', got {action_format!r}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.env: ActionableEnv = spec if isinstance(spec, ActionableEnv) else make(spec, registry=registry)
        suite = getattr(self.env.unwrapped, "name", "default")
        self.task, self.split = _task(task, suite), split
        if split is not None:
            self.env.list_tasks(split)  # an unknown split fails here, naming the valid ones
        self.action_format, self.render_mode, self.max_text = action_format, render_mode, max_text
        self.observation_space = UnicodeText(max_text)
        self._codec = ToolActionSpace(self.env.tools()) if action_format == "dict" else None
        self.action_space = self._codec.space if self._codec else UnicodeText(max_action_text)
        self._text = ""
        self._closed = False

    def _choose_task(self, options: Mapping[str, Any] | None) -> TaskRef | None:
        if options and options.get("task") is not None:
            return _task(options["task"], getattr(self.env.unwrapped, "name", "default"))
        if self.task is not None:
            return self.task
        tasks = self.env.list_tasks(self.split)
        if not tasks:
            return None  # the bridge's default task
        return tasks[int(self.np_random.integers(len(tasks)))]

    def _out(self, obs: Observation) -> str:
        self._text = obs.text[: self.max_text]
        return self._text

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = self._choose_task(options)
        inner_seed = seed if seed is not None else int(self.np_random.integers(_INT_BOUND))
        result = self.env.reset(task=task, seed=inner_seed, options=(options or {}).get("env_options"))
        if self._codec is not None:
            tools = self.env.tools()
            if tools != self._codec.tools:  # bounds may follow the episode (Toy24: puzzle size)
                self._codec = ToolActionSpace(tools)
                self.action_space = self._codec.space
                self.action_space.seed(int(self.np_random.integers(_INT_BOUND)))
        info = {**result.info, "task": None if task is None else str(task), "data": dict(result.observation.data)}
        return self._out(result.observation), info

    def _decode(self, action: Any) -> Action:
        if isinstance(action, Action):
            return action
        if self._codec is not None and isinstance(action, Mapping) and "tool" in action \
                and not isinstance(action["tool"], str):
            return self._codec.decode(action)
        return _parse_json_action(action)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        try:
            parsed = self._decode(action)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            message = f"Could not read the action: {exc}"
            resp = EnvResponse(observation=Observation(text=f"Error: {message}"),
                               info={"error": {"type": "invalid_action", "message": message}})
        else:
            resp = self.env.step(parsed)
        info = {**resp.info, "data": dict(resp.observation.data)}
        return self._out(resp.observation), float(resp.reward), bool(resp.terminated), bool(resp.truncated), info

    def render(self) -> str | None:
        return self._text if self.render_mode == "ansi" else None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.env.close()


def register_envs(registry: Any = None) -> list[str]:
    """Register every bridge of ``registry`` (default: installed plugins) as
    ``envh/<bridge>``; returns the new ids.

    Opt-in (nothing registers on import). Ids already registered are left alone, so
    calling this twice is harmless. Keyword arguments of ``gymnasium.make`` reach
    ``EnvhGymEnv`` (``task=``, ``split=``, ``action_format=``, ...); each id has a
    ``TimeLimit`` of ``DEFAULT_MAX_EPISODE_STEPS`` (``max_episode_steps=`` overrides it).
    """
    from .plugins.manager import get_registry

    reg = registry or get_registry()
    added = []
    for name in sorted(reg.bridges()):
        env_id = f"envh/{name}"
        if env_id in gymnasium.registry:
            continue
        # gymnasium deep-copies kwargs, so the env resolves the bridge in the process-wide
        # registry when it is made, not in ``registry``
        gymnasium.register(id=env_id, entry_point="envh.gym:EnvhGymEnv", kwargs={"spec": {"bridge": name}},
                           max_episode_steps=DEFAULT_MAX_EPISODE_STEPS)
        added.append(env_id)
    return added
