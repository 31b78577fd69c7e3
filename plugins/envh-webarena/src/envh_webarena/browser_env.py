"""BrowserBridge: what the three web bridges share on top of ``envh.Bridge``.

A reset opens a fresh context on the worker's shared browser (``runtime.shared_runtime``)
and lets the subclass load its task; a step runs one BrowserGym action and answers with the
page as it is afterwards. A policy mistake is an observation whose ``info["error"]`` says
what was wrong (and the page is unchanged); a dead browser raises
``envh.errors.InfraError`` and the next reset relaunches the browser. A step that hangs
(the page spins in JavaScript, loops on dialogs, or is too big to read within
``hang_timeout_s``) while the browser itself still answers, or whose page's renderer
crashes (a script allocating until it runs out of memory) while the browser lives on,
ends the episode as the policy's failure (``page_hang``, ``page_crashed``): the policy
brought that page about, so replaying the episode would only replay the fault. A step
that outlasts the watchdog while the browser does not answer either (a stalled host) is
an ``InfraError``.
"""

from __future__ import annotations

from typing import Any

import attrs
from envh import (
    Action,
    Bridge,
    EnvResponse,
    Observation,
    ResetResult,
    TaskRef,
    ToolSpec,
    errors,
)

from envh_webarena import actions
from envh_webarena.runtime import PageHang, shared_runtime
from envh_webarena.session import BrowserSession, PageCrashed

STATE_PROPERTIES: dict[str, Any] = {
    "task": {"type": ["object", "null"], "description": "the TaskRef being played (suite, split, instance_id)"},
    "goal": {"type": "string", "description": "the task's instruction, as the policy sees it"},
    "url": {"type": "string", "description": "URL of the active tab"},
    "title": {"type": "string", "description": "title of the active tab"},
    "tabs": {"type": "array", "description": "open tabs: index, url, title, active (a background tab whose page "
             "did not answer within 2 s, busy in JavaScript, has the title '(not answering)'; a crashed one '')"},
    "steps": {"type": "integer", "description": "actions taken since reset (or since a stage replay ended)"},
    "max_steps": {"type": ["integer", "null"], "description": "step budget; null: none"},
    "last_action": {"type": ["object", "null"], "description": "the last action (tool, args)"},
    "last_error": {"type": "string", "description": "error of the last action, '' when it worked"},
    "messages": {"type": "array", "items": {"type": "string"}, "description": "texts sent with send_msg_to_user"},
    "answer": {"type": ["string", "null"], "description": "the answer given with stop, null before stop"},
    "done": {"type": "boolean", "description": "whether the episode has ended"},
}


def page_fault_reason(exc: PageHang | PageCrashed) -> str:
    """``page_crashed`` or ``page_hang``: how the policy's page ended its episode."""
    return "page_crashed" if isinstance(exc, PageCrashed) else "page_hang"


class BrowserBridge(Bridge):
    """Base of the web bridges (not registered itself).

    :param max_chars: bound on the accessibility-tree text of an observation.
    :param max_steps: truncate after this many actions; None: no limit.
    :param action_timeout_ms: how long an action waits for its element.
    :param extra_hosts: hosts besides loopback the browser may reach (``host[:port]``).
    :param hang_timeout_s: a reset or step taking longer kills the browser (``InfraError``).
    :param screenshot: add a PNG of the active tab (base64) to ``observation.data``.
    """

    name = "browser"
    _replaying = False

    def __init__(self, *, max_chars: int = 6000, max_steps: int | None = 30, action_timeout_ms: int = 3000,
                 extra_hosts: tuple[str, ...] | list[str] = (), hang_timeout_s: float = 60.0,
                 screenshot: bool = False) -> None:
        if max_chars < 200:
            raise errors.SpecError(f"{self.name} max_chars must be >= 200, got {max_chars}")
        if max_steps is not None and max_steps < 1:
            raise errors.SpecError(f"{self.name} max_steps must be >= 1 or null, got {max_steps}")
        self.max_chars, self.max_steps, self.action_timeout_ms = max_chars, max_steps, action_timeout_ms
        self.extra_hosts = tuple(extra_hosts)
        self.hang_timeout_s = float(hang_timeout_s)
        self.screenshot = bool(screenshot)
        self.session: BrowserSession | None = None
        self.task: TaskRef | None = None
        self.goal = ""
        self._clear()

    def _clear(self) -> None:
        self.steps = 0
        self.last_action: dict[str, Any] | None = None
        self.last_error = ""
        self.messages: list[str] = []
        self.answer: str | None = None
        self.done = self.truncated = False
        self._page: dict[str, Any] = {"url": "", "title": "", "tabs": [], "axtree": "", "bids": []}
        self._obs = Observation(text="", data={})
        self.failure: dict[str, str] | None = None  # why the page ended the episode (a hang)

    # -- subclass hooks ----------------------------------------------------------------
    def tools(self) -> list[ToolSpec]:
        return list(actions.BROWSER_TOOLS)

    def _default_task(self) -> TaskRef:
        tasks = self.list_tasks()
        if not tasks:
            raise errors.EnvError(f"{self.name}: no tasks to play.")
        return tasks[0]

    def _context_options(self, task: TaskRef) -> dict[str, Any]:
        """Extra ``new_context`` options for this task (storage state, viewport)."""
        return {}

    def _preload_url(self, task: TaskRef) -> str | None:
        """The page an episode of ``task`` starts on, when loading it starts nothing (no
        episode code runs on load): the context made ahead for the next episode has it
        loaded already when the next episode plays the same task (``spare.py``)."""
        return None

    def _warm_js(self, task: TaskRef) -> str | None:
        """JavaScript run in the preloaded page once it loaded: start-up work that draws
        nothing (``spare.py``); ``_open`` must then start the episode on it either way."""
        return None

    def _prefetch_urls(self, task: TaskRef) -> list[str]:
        """Files the start of ``task`` loads beyond its page (frames): the context made ahead
        fetches them into its cache after preloading the page."""
        return []

    def _open(self, task: TaskRef, seed: int | None, options: dict[str, Any]) -> str:
        """Load the task in ``self.session`` (``session.preloaded``: it is loaded already);
        return the goal text."""
        raise NotImplementedError

    def _after_action(self, tool: str, outcome: dict[str, Any]) -> tuple[float, bool]:
        """Reward and termination after an action, also one that reported an error: a click
        whose navigation outlasted the action timeout may still have ended the task (a
        purchase, a submitted form), and the page is what counts."""
        return 0.0, "stop" in outcome

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _failure_reward(self) -> float:
        """The step reward of an episode the page ended (a hang): the benchmark's failure."""
        return 0.0

    # -- episode -----------------------------------------------------------------------
    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        task = task or self._default_task()
        self._close_session()
        self._clear()
        self.task, self._replaying = task, False
        runtime = shared_runtime(extra_hosts=self.extra_hosts)
        context_options = self._context_options(task)
        runtime.browser()  # (re)launched before the watchdog starts, so it watches this browser
        try:
            with runtime.watchdog(self.hang_timeout_s, f"{self.name}: loading {task}"):
                preload = self._preload_url(task)
                self.session = BrowserSession(runtime, action_timeout_ms=self.action_timeout_ms,
                                              preload=preload, **context_options)
                self.goal = self._open(task, seed, options)
                self._obs = self._observe_now()
                runtime.make_spare(preload, prefetch=self._prefetch_urls(task), warm=self._warm_js(task))
        except errors.EnvhError:
            self._close_session()
            raise
        except Exception as exc:
            self._close_session()
            if not runtime.alive():
                raise errors.InfraError(f"{self.name}: the browser died while loading {task}: {exc}") from exc
            raise errors.EnvError(f"{self.name}: could not load task {task}: {exc}") from exc
        return ResetResult(observation=self._obs, info={"task": str(task)})

    def _step(self, action: Action) -> EnvResponse:
        if self.done or self.truncated or self.session is None:
            return self.error_response("The episode is over; reset() to play again.", kind="episode_over")
        self.steps += 1
        self.last_action = {"tool": action.tool, "args": dict(action.args)}
        info: dict[str, Any] = {}
        try:
            with self.session.watchdog(self.hang_timeout_s, f"{self.name}: {action.tool}"):
                try:
                    outcome = actions.run(self.session, action.tool, dict(action.args))
                    self.last_error = ""
                except actions.ActionError as exc:
                    outcome, self.last_error = {}, str(exc)
                    info["error"] = {"type": "action_failed", "message": self.last_error}
                if "message" in outcome:
                    self.messages.append(str(outcome["message"]))
                if "stop" in outcome:
                    self.answer = str(outcome["stop"])
                # observed first: reading the page waits for a navigation the action started
                # and outlasted its timeout, so the verdict below sees the page it led to
                self._obs = self._observe_now()
                refused = self.session.take_refused_downloads()
                if refused and not self.last_error:
                    self.last_error = (f"The page started a download ({', '.join(refused)[:300]}); downloads "
                                       "are refused here: read what you need on the page instead.")
                    info["error"] = {"type": "download_refused", "message": self.last_error}
                    self._obs = self._render(self._page)
                reward, terminated = self._after_action(action.tool, outcome)
                self.done = terminated
                if not terminated and not self._replaying and self.max_steps is not None \
                        and self.steps >= self.max_steps:
                    self.truncated, info["truncated_by"] = True, f"step budget of {self.max_steps} used"
        except (PageHang, PageCrashed) as exc:
            self._close_session()
            return self._end_by_page(action.tool, exc)
        except errors.InfraError:
            self._close_session()
            raise
        except Exception as exc:
            if self.session is not None and not self.session.browser_alive():
                self._close_session()
                raise errors.InfraError(f"{self.name}: the browser died during {action.tool}: {exc}") from exc
            raise
        return EnvResponse(observation=self._obs, reward=reward, terminated=terminated,
                           truncated=self.truncated, info=info)

    def _end_by_page(self, tool: str, exc: PageHang | PageCrashed) -> EnvResponse:
        """The page hung or crashed during the policy's action: the episode ends as a failure."""
        self.done = True
        reason = page_fault_reason(exc)
        if reason == "page_crashed":
            self.last_error = f"The page crashed during {tool} (its renderer is gone); the episode ends as a failure."
        else:
            self.last_error = (f"The page stopped responding during {tool} (nothing answered within "
                               f"{self.hang_timeout_s:g} s); the episode ends as a failure.")
        self.failure = {"reason": reason, "message": str(exc)[:500]}
        text = "\n".join([f"Goal: {self.goal[:2000]}", f"URL: {self._page['url']}",
                          f"Last action error: {self.last_error}"])
        self._obs = Observation(text=text, data={"goal": self.goal, "url": self._page["url"], "title": "",
                                                 "tabs": [], "axtree": "", "bids": [], "last_error": self.last_error})
        return EnvResponse(observation=self._obs, reward=self._failure_reward(), terminated=True, truncated=False,
                           info={"error": {"type": reason, "message": self.last_error},
                                 "terminated_by": reason})

    def _observe_now(self) -> Observation:
        assert self.session is not None
        self._page = self.session.snapshot(max_chars=self.max_chars)
        return self._render(self._page)

    def _render(self, p: dict[str, Any]) -> Observation:
        assert self.session is not None
        lines = [f"Goal: {self.goal[:2000]}", f"URL: {p['url']}", f"Title: {p['title']}"]
        if len(p["tabs"]) > 1:  # at most 10 listed: a page may open windows in a loop
            shown = p["tabs"][:10]
            lines.append("Tabs: " + "; ".join(
                f"[{t['index']}]{'*' if t['active'] else ''} {t['title'][:60]} ({t['url'][:120]})" for t in shown)
                + (f"; … {len(p['tabs']) - 10} more" if len(p["tabs"]) > 10 else ""))
        if self.last_error:
            lines.append(f"Last action error: {self.last_error}")
        lines += ["Accessibility tree:", p["axtree"]]
        data = {"goal": self.goal, "url": p["url"], "title": p["title"], "tabs": p["tabs"], "axtree": p["axtree"],
                "bids": p["bids"], "last_error": self.last_error}
        if self.screenshot:
            import base64

            data["screenshot_png_base64"] = base64.b64encode(self.session.page.screenshot(type="png")).decode()
        return Observation(text="\n".join(lines), data=data)

    def observe(self) -> Observation:
        return attrs.evolve(self._obs, data=dict(self._obs.data))

    def notify_replay_start(self) -> None:
        self._replaying = True

    def notify_replay_complete(self) -> None:
        super().notify_replay_complete()
        self.steps, self.truncated, self._replaying = 0, False, False

    # -- state -------------------------------------------------------------------------
    def get_env_state(self) -> dict[str, Any]:
        task = self.task
        return {
            "task": None if task is None else {"suite": task.suite, "split": task.split,
                                               "instance_id": task.instance_id},
            "goal": self.goal, "url": self._page["url"], "title": self._page["title"],
            "tabs": [dict(t) for t in self._page["tabs"]], "steps": self.steps, "max_steps": self.max_steps,
            "last_action": None if self.last_action is None else {
                "tool": self.last_action["tool"], "args": dict(self.last_action["args"])},
            "last_error": self.last_error, "messages": list(self.messages), "answer": self.answer,
            "done": self.done or self.truncated, **self._extra_state(),
        }

    def env_state_schema(self) -> dict[str, Any]:
        return {"type": "object", "description": f"{self.name}: the browser episode as plain data",
                "properties": dict(STATE_PROPERTIES)}

    def _close_session(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            session.close()

    def close(self) -> None:
        self._close_session()
