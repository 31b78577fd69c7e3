"""The playground's server side: live env stacks played step by step, and spec checks
whose problems carry the editor line they belong to.

Every spec is built with ``trust="untrusted"`` (contract code runs in the jail). Whatever
a bridge or component raises becomes a typed answer for the page: envh errors as they
are, anything else as an ``EnvError`` naming the original exception, never a 500.
"""

from __future__ import annotations

import json
import logging
import math
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from envh import errors
from envh.hostpaths import declared_keys

from . import editor
from .compare import badge_parts

if TYPE_CHECKING:
    from envh.plugins.manager import Registry

DEFAULT_SPEC = """bridge: toy24
layers:
  - kind: contract
    code: |
      def filter_action(action, state, memo):
          if action.tool == "combine" and action.args["op"] == "div":
              return Block(reason="division is disabled in this world")
  - kind: budget
    max_steps: 12
"""
MAX_SESSIONS = 6  # x 4 jails per spec: leaves a quarter of the 32 for check() and others
log = logging.getLogger(__name__)


#: the largest spec the playground builds (PyYAML needs about a second per 50,000 characters)
MAX_SPEC = 100_000


def spec_text(text: str) -> str:
    """Editor text as spec text, never a file name (``load_spec_data`` reads a one-line
    string naming an existing file, and no file may be read through the app); refused
    when too long or nested too deep for PyYAML to read in reasonable time."""
    if len(text) > MAX_SPEC:
        raise errors.SpecError(f"The spec is {len(text)} characters long; the playground takes at most {MAX_SPEC}.")
    if editor.too_deep(text):
        raise errors.SpecError(f"The spec nests '[' or '{{' more than {editor.MAX_DEPTH} levels deep.")
    return text if "\n" in text else text + "\n"


def names_a_place(value: str) -> bool:
    """``value`` reads as a path or a URL (a bridge's data file, a Docker daemon, a reset
    URL that ``urlopen`` would also follow to ``file://``), or names something on disk."""
    text = value.strip()
    if text.startswith(("/", "~", ".", "\\")) or "://" in text or re.match(r"(?i)^(file|unix|npipe):|^[a-z]:[\\/]", text):
        return True
    if not ("/" in text or "\\" in text or "." in text):
        return False  # 'test', '2g': a split or a size, even where the server's directory has such a file
    try:
        return Path(text).exists()
    except (OSError, ValueError):  # too long a name, a NUL: not a file it could open either
        return False


def refuse_files(data: Any, path: str = "$", registry: Registry | None = None) -> None:
    """Raise a ``SpecError`` at each value of ``data`` (chain legs included) that names a
    file: every layer option and bridge config key that the kind or bridge declares as a
    data path (``data_paths``: a bare ``questions`` too), and every other bridge config
    value that reads as a path or URL. Nothing outside the run directories is read or
    written through the app."""
    from envh.plugins import get_registry

    reg = registry or get_registry()
    problems: list[str] = []

    def declared(lookup: Any, name: Any) -> tuple[str, ...]:
        if not isinstance(name, str):
            return ()
        try:
            return declared_keys(lookup(name))
        except errors.EnvhError:  # an unknown name: the build reports it
            return ()

    def places(node: Any, at: str) -> None:
        if isinstance(node, str) and names_a_place(node):
            problems.append(f"the playground opens no file or URL a bridge config names @ {at}")
        elif isinstance(node, Mapping):
            for key, value in node.items():
                places(value, f"{at}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                places(value, f"{at}[{i}]")

    def walk(node: Any, at: str) -> None:
        if isinstance(node, Mapping):
            for key in declared(reg.component_kind, node.get("kind")):
                if node.get(key) is not None:
                    problems.append(f"the playground opens no file: remove {key!r} @ {at}.{key}")
            if "bridge" in node:
                config = node.get("config")
                if isinstance(config, Mapping):
                    keys = declared(reg.bridge, node.get("bridge"))
                    for key in keys:
                        if config.get(key) not in (None, ""):
                            problems.append(f"the playground opens no file a bridge config names: remove "
                                            f"{key!r} @ {at}.config.{key}")
                    config = {k: v for k, v in config.items() if k not in keys}
                places(config, f"{at}.config")
            for key, value in node.items():
                walk(value, f"{at}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{at}[{i}]")

    walk(data, path)
    if problems:
        raise errors.SpecError("The spec names a file on this machine", problems)


def error_answer(exc: BaseException, doing: str) -> dict[str, Any]:
    """The page's view of ``exc``: its type and message. An exception that is not an envh
    error (a bridge's bug: ``RuntimeError``, ``KeyError``...) is reported as the
    ``EnvError`` it is for the user: the environment failed while ``doing``."""
    if not isinstance(exc, errors.EnvhError):
        exc = errors.EnvError(f"The environment failed while {doing}: {type(exc).__name__}: {exc}")
    return {"error": f"{type(exc).__name__}: {exc}", "error_type": type(exc).__name__}


def _close(env: Any) -> None:
    """Close an env whose bridge may fail at that too: a playground answer never depends on it."""
    try:
        env.close()
    except Exception:  # noqa: BLE001 - the env is being dropped; its failure has no one to go to
        log.warning("closing a playground env failed", exc_info=True)


def _json(value: Any) -> Any:
    """``value`` as plain JSON: what a bridge put in its info or verdict (NaN, sets,
    objects) becomes text rather than a response that cannot be written."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):  # records' read-only mappings (an effect's observation_before) too
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


class Playground:
    """Live envs of the playground, at most ``MAX_SESSIONS`` (the oldest is closed)."""

    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry
        self.envs: OrderedDict[str, Any] = OrderedDict()
        self.lock = threading.Lock()

    def _make(self, spec: str) -> Any:
        from envh.spec import load_spec_data, make

        data = load_spec_data(spec_text(spec))
        refuse_files(data, registry=self.registry)
        return make(data, trust="untrusted", registry=self.registry)

    def new(self, spec: str, task: str) -> dict[str, Any]:
        from envh.play import resolve_task

        with self.lock:  # room first: the sessions' jails must leave one for the new spec
            while len(self.envs) >= MAX_SESSIONS:
                _, old = self.envs.popitem(last=False)
                _close(old)
        try:
            env = self._make(spec)
        except Exception as exc:  # noqa: BLE001 - shown to the user, typed
            return {**error_answer(exc, "building the spec"), "markers": editor.markers(spec, exc)}
        try:
            result = env.reset(task=resolve_task(env, task.strip() or None), seed=0)
            view = self._view(env, result.observation)
            tools = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in env.tools()]
        except Exception as exc:  # noqa: BLE001
            _close(env)
            return error_answer(exc, "resetting")
        sid = secrets.token_hex(8)
        with self.lock:
            self.envs[sid] = env
            while len(self.envs) > MAX_SESSIONS:
                _, old = self.envs.popitem(last=False)
                _close(old)
        return _json({"session": sid, **view, "tools": tools})  # type: ignore[no-any-return]

    def step(self, sid: str, line: str) -> dict[str, Any]:
        from envh.play import parse_action

        try:
            action = parse_action(line)
        except (ValueError, json.JSONDecodeError) as exc:
            return {"error": f"Could not read the action: {exc}", "error_type": "ActionError"}
        with self.lock:  # looked up under the lock: an eviction cannot close it mid-step
            env = self.envs.get(sid)
            if env is None:
                return {"error": "This playground session is gone (closed or evicted); press Reset.",
                        "error_type": "SessionGone"}
            try:
                resp = env.step(action)
                out = self._view(env, resp.observation)
                effects = resp.info.get("envh", [])
                out.update(action=f"{action.tool} {json.dumps(dict(action.args))}", reward=resp.reward,
                           terminated=bool(resp.terminated), truncated=bool(resp.truncated),
                           done=bool(resp.terminated or resp.truncated), effects=effects,
                           badges=[attrs.asdict(badge_parts(dict(e))) for e in effects if isinstance(e, Mapping)])
                if out["done"]:
                    verdict = env.evaluate()
                    out["verdict"] = {"success": verdict.success, "score": verdict.score,
                                      "metrics": dict(verdict.metrics)}
            except Exception as exc:  # noqa: BLE001
                return error_answer(exc, f"stepping {action.tool!r}")
        return _json(out)  # type: ignore[no-any-return]

    @staticmethod
    def _view(env: Any, seen: Any) -> dict[str, Any]:
        base = env.unwrapped.observe()
        return {"observation": seen.text, "base_observation": None if base.text == seen.text else base.text}

    def check(self, text: str, *, build: bool = True) -> dict[str, Any]:
        """Validate a spec: its structure, then each contract's code (statically, or run
        in the jail when ``build``), then, when ``build``, every layer built. Problems
        come back with their editor lines."""
        from envh.components.contract import analyse, check_contract_code
        from envh.spec import load_spec_data, parse_spec, spec_id

        try:
            text = spec_text(text)
            parsed = parse_spec(text, self.registry)
            data = load_spec_data(text)
            refuse_files(data, registry=self.registry)
            for path, code, limit in editor.contract_codes(data):
                try:
                    if build:
                        check_contract_code(code, trust="untrusted", time_limit=float(limit) / 1000)
                    else:
                        analyse(code)
                except errors.ContractCodeError as exc:
                    return {"ok": False, "error": str(exc), "markers": editor.markers(text, exc, path)}
            if build:
                _close(self._make(text))
            else:  # while typing: the bridge is named by the registry, not built
                self._bridge_known(data)
            return {"ok": True, "spec_id": spec_id(parsed, self.registry), "markers": []}
        except Exception as exc:  # noqa: BLE001 - every problem is an answer with its lines
            answer = error_answer(exc, "building the spec")
            return {"ok": False, "error": answer["error"], "error_type": answer["error_type"],
                    "markers": editor.markers(text, exc)}

    def _bridge_known(self, data: Any) -> None:
        """Raise ``UnknownNameError`` when ``data`` names a bridge no plugin provides."""
        from envh.plugins import get_registry

        name = data.get("bridge") if isinstance(data, Mapping) else None
        if isinstance(name, str):
            (self.registry or get_registry()).bridge(name)

    def close(self) -> None:
        with self.lock:
            for env in self.envs.values():
                _close(env)
            self.envs.clear()
