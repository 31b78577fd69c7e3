"""MiniWoB++ (``bridge: miniwob``): every task the ``miniwob`` package registers, in Chromium.

The task pages ship inside the ``miniwob`` wheel; a static server on 127.0.0.1 serves them
(one per process). A reset seeds the task's generator (``Math.seedrandom(seed)``, as the
package's own Selenium driver does), lifts the 10 s episode clock (as BrowserGym does: a
policy that thinks slowly must not lose by time) and starts the episode. The goal is the
task's utterance. Reward and success come from the task's own JavaScript: the raw reward
(``WOB_RAW_REWARD_GLOBAL``, 1 for success, -1 or partial for failure) once
``WOB_DONE_GLOBAL`` is set. Success is MiniWoB's binary rule (``miniwob.reward.get_binary_reward``):
raw reward 1 (``success_threshold``, for tasks graded by distance). BrowserGym counts any
raw reward > 0, but several tasks pay partial credit for a wrong answer (click-checkboxes
submitted with no box checked when two of six are wanted: 0.33; find-greatest with the
smallest card: 0.1), which would make doing nothing a success.
"""

from __future__ import annotations

import functools
import secrets
import threading
from typing import Any

from envh import EvaluationResult, TaskRef, errors

from envh_webarena.browser_env import BrowserBridge
from envh_webarena.httpserve import LocalServer, serve_directory

SUITE = "miniwob"
SPLIT = "default"
# Start, wait until the task is ready (the flight tasks load their form in an iframe) and
# read the utterance: one round trip.
_START_JS = """async ([seed, css, nonce, waitMs]) => {
  window.__envhEpisode = nonce;
  const style = document.createElement('style');
  style.textContent = css;
  document.head.appendChild(style);
  if (seed !== null) Math.seedrandom(seed);
  core.EPISODE_MAX_TIME = 2147483647;
  // a form the spare loaded ahead into the frame (_WARM_JS) is kept: the start's own load
  // of the same page into it is skipped, and its readiness carried over
  const wrap = window.__envhWarm === true ? document.getElementById('wrap') : null;
  const loaded = WOB_TASK_READY;
  if (wrap) Object.defineProperty(wrap, 'src', {configurable: true, get: () => wrap.getAttribute('src') || '', set: () => {}});
  try { core.startEpisodeReal(); } finally { if (wrap) delete wrap.src; }
  if (wrap && loaded) WOB_TASK_READY = true;
  const t0 = Date.now();
  while (!WOB_TASK_READY) {
    if (Date.now() - t0 > waitMs) return {ready: false, utterance: null};
    await new Promise(ok => setTimeout(ok, 10));
  }
  const u = core.getUtterance();
  return {ready: true, utterance: String(u !== null && typeof u === 'object' ? (u.utterance || '') : u)};
}"""
# Run in the page made ahead for the next episode (spare.py), once it loaded: the flight tasks'
# start (genProblem in flight-common/wrapper.js) samples the question in this page and loads
# the same form page into the ``wrap`` frame every time; its load draws nothing from the
# episode's seed (the frame's Math.random is not the seeded one) and takes most of a start,
# so it is loaded ahead, untouched until the episode starts. Only where genProblem is that
# code; never after an episode started in the page.
_WARM_JS = """() => {
  const wrap = document.getElementById('wrap');
  if (window.__envhEpisode || !wrap || wrap.tagName !== 'IFRAME' || wrap.getAttribute('src')
      || typeof genProblem !== 'function'
      || !String(genProblem).includes("document.getElementById('wrap').src = 'index.html'")) return false;
  WOB_TASK_READY = false;  // index.html's inject.js sets it once the form is ready
  window.__envhWarm = true;
  window.__envhFrameLoads = 0;  // the form must load once, not again at the start
  wrap.addEventListener('load', () => { window.__envhFrameLoads += 1; });
  wrap.src = 'index.html';
  return true;
}"""
# The nonce is written into the task page at start and checked on every read: a page the
# policy loaded into the task's tab (another task from the same server, a reload for a
# fresh draw) has none, so what it reports is not this episode's result.
_STATUS_JS = """(nonce) => window.__envhEpisode !== nonce ? null : ({done: !!WOB_DONE_GLOBAL, raw: Number(WOB_RAW_REWARD_GLOBAL) || 0,
  reward: Number(WOB_REWARD_GLOBAL) || 0, reason: (typeof WOB_REWARD_REASON === 'undefined' ? null
  : (WOB_REWARD_REASON === null ? null : String(WOB_REWARD_REASON))), ready: !!WOB_TASK_READY})"""
# What a task's frames loaded (the flight tasks load their form in an iframe at start).
_LOADED_JS = """() => [location.href, ...performance.getEntriesByType('resource').map(e => e.name)]"""
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
            # the wheel's pages do not change while served: a context made ahead can fetch a
            # task's frame ahead and the episode's start finds it in the browser's cache
            server = _SERVER[os.getpid()] = serve_directory(html_dir(), cacheable=True)
        return server


def start_task(page: Any, name: str, seed: int | None, nonce: str) -> str:
    """Start the task loaded in ``page`` (style, seed, episode start), wait until it is
    ready and return its utterance: one round trip."""
    started = page.evaluate(_START_JS, [seed, _HIDE_CSS, nonce, 5000])
    if not started["ready"]:
        raise errors.EnvError(f"miniwob task {name} did not become ready within 5 s")
    return str(started["utterance"])


def _frame_files(page: Any, origin: str) -> list[str]:
    """The task server's files the page's frames (not the page itself) loaded."""
    from playwright.sync_api import Error

    out: list[str] = []
    for frame in page.frames[1:20]:
        try:
            out += [u for u in frame.evaluate(_LOADED_JS) if isinstance(u, str) and u.startswith(origin + "/")]
        except Error:
            continue
    return sorted(set(out))[:200]


class MiniwobEnv(BrowserBridge):
    """MiniWoB++ tasks with BrowserGym's action set.

    :param tasks: only these task names (default: every registered task).
    :param max_steps: truncate after this many actions (default 10).
    :param max_chars: bound on the accessibility-tree text.
    :param hang_timeout_s: a reset or step taking longer kills the browser (``InfraError``).
    :param success_threshold: success is a raw reward at least this (MiniWoB's binary rule: 1).
    :param reward: the step reward when the task ends: ``"raw"`` (the task's raw reward,
        partial credit included) or ``"binary"`` (MiniWoB's: 1 on success, else -1).
    """

    name = "miniwob"

    def __init__(self, tasks: list[str] | None = None, max_steps: int | None = 10, max_chars: int = 6000,
                 action_timeout_ms: int = 2000, hang_timeout_s: float = 60.0, screenshot: bool = False,
                 success_threshold: float = 1.0, reward: str = "raw") -> None:
        super().__init__(max_chars=max_chars, max_steps=max_steps, action_timeout_ms=action_timeout_ms,
                         hang_timeout_s=hang_timeout_s, screenshot=screenshot)
        if reward not in ("raw", "binary"):
            raise errors.SpecError(f"miniwob reward must be 'raw' or 'binary', not {reward!r}")
        if not isinstance(success_threshold, (int, float)) or not 0 < success_threshold <= 1:
            raise errors.SpecError(f"miniwob success_threshold must be in (0, 1], not {success_threshold!r}")
        self.success_threshold = float(success_threshold)
        self.reward_mode = reward
        known = registered_tasks()
        if tasks:
            unknown = [t for t in tasks if t not in known]
            if unknown:
                raise errors.UnknownNameError("miniwob task", unknown[0], list(known))
        self.task_names = list(tasks) if tasks else list(known)
        self.status: dict[str, Any] = {"done": False, "raw": 0.0, "reward": 0.0, "reason": None}
        self._task_page: Any = None
        self._nonce = ""
        self._frame_files: dict[str, list[str]] = {}  # task -> what its start loaded in frames

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

    def _preload_url(self, task: TaskRef) -> str | None:
        # a task page's load only shows the START cover: the episode (its random draw,
        # its clock) starts with the reset's seed in start_task
        path = registered_tasks().get(task.instance_id)
        return None if task.suite != SUITE or path is None else f"{task_server().url}/{path}"

    def _warm_js(self, task: TaskRef) -> str | None:
        return _WARM_JS if task.instance_id.startswith("flight.") else None

    def _prefetch_urls(self, task: TaskRef) -> list[str]:
        # what starting the task loaded into frames: fetched into the next context's cache
        # (files only: nothing runs), so the next start does not wait for the task server
        return self._frame_files.get(task.instance_id, [])

    def _open(self, task: TaskRef, seed: int | None, options: dict[str, Any]) -> str:
        path = registered_tasks().get(task.instance_id)
        if task.suite != SUITE or path is None:
            raise errors.UnknownNameError("miniwob task", task.instance_id, list(registered_tasks()))
        assert self.session is not None
        page = self.session.page
        self._task_page = page
        if not self.session.preloaded:
            page.goto(f"{task_server().url}/{path}", wait_until="load")
        self._nonce = secrets.token_hex(16)
        utterance = start_task(page, task.instance_id, seed, self._nonce)
        if task.instance_id not in self._frame_files:
            self._frame_files[task.instance_id] = _frame_files(page, task_server().url)
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
            raw = float(self.status["raw"])
            if self.reward_mode == "binary":
                return (1.0 if raw >= self.success_threshold else -1.0), True
            return raw, True
        return 0.0, "stop" in outcome

    def evaluate(self) -> EvaluationResult:
        raw = float(self.status["raw"]) if self.status["done"] else 0.0
        success = bool(self.status["done"]) and raw >= self.success_threshold
        metrics: dict[str, Any] = {"task": self.task.instance_id if self.task else None,
                                   "done": bool(self.status["done"]), "raw_reward": raw, "steps": self.steps}
        if self.failure is not None:  # the page the policy reached hung: MiniWoB's failure
            metrics["failed_by"] = dict(self.failure)
        return EvaluationResult(success=success, score=max(0.0, raw), metrics=metrics)

    def _failure_reward(self) -> float:
        return -1.0  # what MiniWoB gives an episode that fails (its time-out included)

    def _extra_state(self) -> dict[str, Any]:
        return {"task_done": bool(self.status["done"]), "raw_reward": float(self.status["raw"])}

    def env_state_schema(self) -> dict[str, Any]:
        schema = super().env_state_schema()
        schema["properties"].update({
            "task_done": {"type": "boolean", "description": "the task's JS declared the episode over"},
            "raw_reward": {"type": "number", "description": "the task's raw reward (1 success, <= 0 failure)"}})
        return schema
