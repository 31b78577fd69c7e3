"""MiniWoB++ (``bridge: miniwob``): every task the ``miniwob`` package registers, in Chromium.

The task pages ship inside the ``miniwob`` wheel; a static server on 127.0.0.1 serves them
(one per process). A reset seeds the task's generator (``Math.seedrandom(seed)``, as the
package's own Selenium driver does), lifts the 10 s episode clock (as BrowserGym does: a
policy that thinks slowly must not lose by time) and starts the episode. The goal is the
task's utterance. Reward and success come from the task's own JavaScript: the raw reward
(``WOB_RAW_REWARD_GLOBAL``, 1 for success, -1 or partial for failure) once
``WOB_DONE_GLOBAL`` is set; success means raw reward > 0.
"""

from __future__ import annotations

import functools
import secrets
import threading
import time
from typing import Any

from envh import EvaluationResult, TaskRef, errors

from envh_webarena.browser_env import BrowserBridge
from envh_webarena.httpserve import LocalServer, serve_directory

SUITE = "miniwob"
SPLIT = "default"
_START_JS = """([seed, css, nonce]) => {
  window.__envhEpisode = nonce;
  const style = document.createElement('style');
  style.textContent = css;
  document.head.appendChild(style);
  if (seed !== null) Math.seedrandom(seed);
  core.EPISODE_MAX_TIME = 2147483647;
  core.startEpisodeReal();
  return !!WOB_TASK_READY;
}"""
# The nonce is written into the task page at start and checked on every read: a page the
# policy loaded into the task's tab (another task from the same server, a reload for a
# fresh draw) has none, so what it reports is not this episode's result.
_STATUS_JS = """(nonce) => window.__envhEpisode !== nonce ? null : ({done: !!WOB_DONE_GLOBAL, raw: Number(WOB_RAW_REWARD_GLOBAL) || 0,
  reward: Number(WOB_REWARD_GLOBAL) || 0, reason: (typeof WOB_REWARD_REASON === 'undefined' ? null
  : (WOB_REWARD_REASON === null ? null : String(WOB_REWARD_REASON))), ready: !!WOB_TASK_READY})"""
# The score board (last reward, time left) is the harness's, not the task's: its clock would
# make observations differ between identical episodes.
_HIDE_CSS = "#reward-display { display: none !important; }"


@functools.cache
def registered_tasks() -> dict[str, str]:
    """Task name → page path (relative to the wheel's ``html/`` folder), for every
    ``miniwob/*`` environment the package registers with Gymnasium."""
    import importlib

    import gymnasium
    import miniwob  # noqa: F401 - registers the environments

    out: dict[str, str] = {}
    for env_id, spec in sorted(gymnasium.registry.items()):
        if not env_id.startswith("miniwob/") or not isinstance(spec.entry_point, str):
            continue
        module, _, cls = spec.entry_point.partition(":")
        subdomain = getattr(importlib.import_module(module), cls).subdomain
        name = env_id.removeprefix("miniwob/").removesuffix("-v1")
        if subdomain.startswith("flight."):
            out[name] = subdomain.replace(".", "/") + "/wrapper.html"
        else:
            out[name] = f"miniwob/{subdomain}.html"
    return out


def html_dir() -> str:
    from miniwob.selenium_instance import HTML_DIR

    return str(HTML_DIR)


_SERVER: dict[int, LocalServer] = {}
_SERVER_LOCK = threading.Lock()


def task_server() -> LocalServer:
    """This process's static server of the wheel's task pages (127.0.0.1, a free port)."""
    import os

    with _SERVER_LOCK:
        server = _SERVER.get(os.getpid())
        if server is None:
            server = _SERVER[os.getpid()] = serve_directory(html_dir())
        return server


def start_task(page: Any, name: str, seed: int | None, nonce: str) -> str:
    """Start the task loaded in ``page`` (style, seed, episode start in one round trip),
    wait until it is ready, and return its utterance."""
    ready = page.evaluate(_START_JS, [seed, _HIDE_CSS, nonce])
    deadline = time.monotonic() + 5
    while not ready and not page.evaluate("() => !!WOB_TASK_READY"):
        if time.monotonic() > deadline:
            raise errors.EnvError(f"miniwob task {name} did not become ready within 5 s")
        page.wait_for_timeout(20)
    utterance = page.evaluate("() => core.getUtterance()")
    if isinstance(utterance, dict):
        utterance = utterance.get("utterance", "")
    return str(utterance)


class MiniwobEnv(BrowserBridge):
    """MiniWoB++ tasks with BrowserGym's action set.

    :param tasks: only these task names (default: every registered task).
    :param max_steps: truncate after this many actions (default 10).
    :param max_chars: bound on the accessibility-tree text.
    :param hang_timeout_s: a reset or step taking longer kills the browser (``InfraError``).
    """

    name = "miniwob"

    def __init__(self, tasks: list[str] | None = None, max_steps: int | None = 10, max_chars: int = 6000,
                 action_timeout_ms: int = 2000, hang_timeout_s: float = 60.0, screenshot: bool = False) -> None:
        super().__init__(max_chars=max_chars, max_steps=max_steps, action_timeout_ms=action_timeout_ms,
                         hang_timeout_s=hang_timeout_s, screenshot=screenshot)
        known = registered_tasks()
        if tasks:
            unknown = [t for t in tasks if t not in known]
            if unknown:
                raise errors.UnknownNameError("miniwob task", unknown[0], list(known))
        self.task_names = list(tasks) if tasks else list(known)
        self.status: dict[str, Any] = {"done": False, "raw": 0.0, "reward": 0.0, "reason": None}
        self._task_page: Any = None
        self._nonce = ""

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        if split not in (None, SPLIT):
            return []
        return [TaskRef(suite=SUITE, split=SPLIT, instance_id=name) for name in self.task_names]

    def tunable_parameters(self) -> dict[str, dict[str, Any]]:
        from envh_webarena.tunable import MINIWOB_PARAMETERS  # a ladder of tasks and their variants

        return {name: dict(spec) for name, spec in MINIWOB_PARAMETERS.items()}

    def task_for(self, params: Any, rng: Any) -> TaskRef:
        from envh_webarena.tunable import miniwob_task_for

        return miniwob_task_for(self, params, rng)

    def _open(self, task: TaskRef, seed: int | None, options: dict[str, Any]) -> str:
        path = registered_tasks().get(task.instance_id)
        if task.suite != SUITE or path is None:
            raise errors.UnknownNameError("miniwob task", task.instance_id, list(registered_tasks()))
        assert self.session is not None
        page = self.session.page
        self._task_page = page
        page.goto(f"{task_server().url}/{path}", wait_until="load")
        self._nonce = secrets.token_hex(16)
        utterance = start_task(page, task.instance_id, seed, self._nonce)
        self.status = {"done": False, "raw": 0.0, "reward": 0.0, "reason": None}
        return utterance

    def _read_status(self) -> dict[str, Any]:
        """The task's own status, read from the task's tab (the policy may be on another)."""
        from playwright.sync_api import Error

        page = self._task_page
        if page is None or page.is_closed():
            return self.status  # the task's tab is gone: nothing can complete it any more
        try:
            status = page.evaluate(_STATUS_JS, self._nonce)
        except Error:
            if self.session is not None:
                self.session.check_alive()
            return self.status  # the task page navigated away: its globals are gone
        # another page in the task's tab: the episode's task is gone and cannot complete
        return self.status if status is None else dict(status)

    def _after_action(self, tool: str, outcome: dict[str, Any]) -> tuple[float, bool]:
        if self.status["done"]:
            return 0.0, True
        self.status = self._read_status()
        if self.status["done"]:
            return float(self.status["raw"]), True
        return 0.0, "stop" in outcome

    def evaluate(self) -> EvaluationResult:
        raw = float(self.status["raw"]) if self.status["done"] else 0.0
        return EvaluationResult(success=raw > 0, score=max(0.0, raw), metrics={
            "task": self.task.instance_id if self.task else None, "done": bool(self.status["done"]),
            "raw_reward": raw, "steps": self.steps})

    def _extra_state(self) -> dict[str, Any]:
        return {"task_done": bool(self.status["done"]), "raw_reward": float(self.status["raw"])}

    def env_state_schema(self) -> dict[str, Any]:
        schema = super().env_state_schema()
        schema["properties"].update({
            "task_done": {"type": "boolean", "description": "the task's JS declared the episode over"},
            "raw_reward": {"type": "number", "description": "the task's raw reward (1 success, <= 0 failure)"}})
        return schema
