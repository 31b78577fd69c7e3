"""WebArena (``bridge: webarena``): WebArena task configs played in Chromium, graded by
WebArena's evaluators.

A reset optionally resets the sites (``WA_FULL_RESET``: a URL whose GET restores every
site, as BrowserGym uses), logs in when the task requires it (``login``), opens a fresh
context with the task's storage state and its start URL(s) (``|AND|`` opens several tabs).
The episode ends with ``stop(answer)``; the answer graded is that text, as WebArena's
``run.py`` grades its stop action: ``send_msg_to_user`` messages are not graded, a
truncated episode is graded on run.py's ``"Early stop: Reach max steps N"``. ``evaluate()`` runs the task's evaluators on the live page
(cached per step), so the verdict is WebArena's.
"""

from __future__ import annotations

import os
import time
import urllib.request
from typing import Any

from envh import EvaluationResult, TaskRef, errors

from envh_webarena.browser_env import BrowserBridge, page_fault_reason
from envh_webarena.runtime import PageHang
from envh_webarena.session import BrowserSession, PageCrashed
from envh_webarena.webarena import config as waconfig
from envh_webarena.webarena import evaluators, login
from envh_webarena.webarena.judge import JudgeConfig

SUITE = "webarena"
SPLIT = "test"


class WebArenaEnv(BrowserBridge):
    """WebArena tasks.

    :param tasks: task configs (WebArena's format) inline.
    :param config_files: a glob of JSON files, each a task config or a list of them.
    :param sites: site name → base URL, over the ``WA_*`` variables.
    :param auth_dir: where relative ``storage_state`` paths live (default ``$WA_AUTH_DIR``, else ``.``).
    :param logins: site → login recipe, over WebArena's (see ``login.DEFAULT_LOGINS``).
    :param judge: the fuzzy-match judge endpoint (``base_url``, ``model``, ``api_key``, ``timeout``).
    :param full_reset: URL to GET before each episode (default ``$WA_FULL_RESET``); None: no reset.
    :param max_steps: truncate after this many actions (default 30).
    """

    name = "webarena"

    def __init__(self, tasks: list[dict[str, Any]] | None = None, config_files: str | None = None,
                 sites: dict[str, str] | None = None, auth_dir: str | None = None,
                 logins: dict[str, dict[str, Any]] | None = None, judge: dict[str, Any] | None = None,
                 full_reset: str | None = None, max_steps: int | None = 30, max_chars: int = 6000,
                 action_timeout_ms: int = 3000, hang_timeout_s: float = 60.0, screenshot: bool = False) -> None:
        self.urls = waconfig.site_urls(sites)
        self.tasks = waconfig.load_tasks(tasks=tasks, config_files=config_files, urls=self.urls)
        if not self.tasks:
            raise errors.SpecError("webarena needs tasks: config.tasks (inline) or config.config_files (a glob)")
        self.judge = JudgeConfig.from_config(judge)
        self.auth_dir = auth_dir or os.environ.get("WA_AUTH_DIR") or "."
        self.logins = dict(logins or {})
        self.full_reset = full_reset if full_reset is not None else os.environ.get("WA_FULL_RESET")
        super().__init__(max_chars=max_chars, max_steps=max_steps, action_timeout_ms=action_timeout_ms,
                         extra_hosts=waconfig.hosts_of(self.urls), hang_timeout_s=hang_timeout_s,
                         screenshot=screenshot)
        self.config: dict[str, Any] = {}
        self._verdict: tuple[int, EvaluationResult] | None = None

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        if split not in (None, SPLIT):
            return []
        return [TaskRef(suite=SUITE, split=SPLIT, instance_id=tid) for tid in self.tasks]

    def _task_config(self, task: TaskRef) -> dict[str, Any]:
        cfg = self.tasks.get(task.instance_id)
        if task.suite != SUITE or cfg is None:
            raise errors.UnknownNameError("webarena task", task.instance_id, list(self.tasks))
        return cfg

    def _context_options(self, task: TaskRef) -> dict[str, Any]:
        cfg = self._task_config(task)
        self._site_reset()
        options: dict[str, Any] = {"viewport": cfg.get("viewport_size") or {"width": 1280, "height": 720}}
        state = cfg.get("storage_state")
        if cfg.get("require_login") and state:
            path = state if os.path.isabs(state) else os.path.join(self.auth_dir, state)
            from envh_webarena.runtime import shared_runtime

            runtime = shared_runtime(extra_hosts=self.extra_hosts)
            sites = login.sites_of_state(path, list(cfg.get("sites") or []))
            options["storage_state"] = login.ensure_storage_state(runtime, path, sites, self.urls, self.logins)
        if cfg.get("geolocation"):
            options["geolocation"] = cfg["geolocation"]
        return options

    def _site_reset(self) -> None:
        if not self.full_reset:
            return
        last: Exception | None = None
        for attempt in range(3):
            try:
                with urllib.request.urlopen(self.full_reset, timeout=300) as resp:  # noqa: S310 - configured URL
                    if resp.status < 400:
                        return
                    last = errors.InfraError(f"HTTP {resp.status}")
            except OSError as exc:
                last = exc
            time.sleep(0.5 * (attempt + 1))
        raise errors.InfraError(f"WebArena site reset at {self.full_reset} failed: {last}")

    def _open(self, task: TaskRef, seed: int | None, options: dict[str, Any]) -> str:
        from envh_webarena.actions import ActionError, check_url

        self.config = self._task_config(task)
        self._verdict = None
        assert self.session is not None
        urls = [u.strip() for u in str(self.config["start_url"]).split(" |AND| ") if u.strip()]
        for i, url in enumerate(urls):
            try:
                check_url(url)
            except ActionError as exc:
                raise errors.SpecError(f"webarena task {task.instance_id}: start_url {url!r}: {exc}") from exc
            page = self.session.page if i == 0 else self.session.new_tab()
            page.goto(url, wait_until="load")
        if len(urls) > 1:
            self.session.focus(0)
        return str(self.config["intent"])

    def final_answer(self) -> str:
        """The answer WebArena's ``run.py`` grades (web-arena-x/webarena ``run.py`` at
        1382a6c, ``create_stop_action``): the stop action's text, "" before one, and the stop
        action ``early_stop`` makes when the step budget ran out."""
        if self.answer is not None:
            return self.answer
        if self.truncated:
            return f"Early stop: Reach max steps {self.max_steps}"
        return ""

    def evaluate(self) -> EvaluationResult:
        if self.failure is not None and self.config:  # the page the policy reached hung or crashed
            return self._failed_verdict()
        if self.session is None or not self.config:
            return EvaluationResult(success=False, score=0.0, metrics={"evaluated": False})
        if self._verdict is not None and self._verdict[0] == self.steps:
            return self._verdict[1]
        try:
            score, details = self._run_evaluators(self.session)
        except (PageHang, PageCrashed) as exc:
            # the page the episode left (or a target page the site now serves) hung or crashed
            # while the browser lived on: the policy's doing, so the verdict is a failure
            self._close_session()
            self.failure = {"reason": page_fault_reason(exc), "during": "evaluate", "message": str(exc)[:500]}
            return self._failed_verdict()
        verdict = EvaluationResult(success=score >= 1.0, score=float(score), metrics={
            "task_id": str(self.config["task_id"]), "sites": list(self.config.get("sites") or []),
            "eval_types": list(self.config["eval"]["eval_types"]), "answer": self.final_answer()[:500],
            "details": details, "steps": self.steps})
        self._verdict = (self.steps, verdict)
        return verdict

    def _failed_verdict(self) -> EvaluationResult:
        assert self.failure is not None
        return EvaluationResult(success=False, score=0.0, metrics={
            "task_id": str(self.config["task_id"]), "failed_by": dict(self.failure), "steps": self.steps})

    def _run_evaluators(self, session: BrowserSession) -> tuple[float, dict[str, Any]]:
        """The task's evaluators: ``string_match`` (the judge has its own timeout, and a slow
        judge is no page's hang) outside the watchdog, the ones that read pages inside it."""
        session.check_alive()
        types = list(self.config["eval"]["eval_types"])
        score, details = 1.0, dict[str, Any]()
        if "string_match" in types:
            score, details["string_match"] = evaluators.string_match(self.config, self.final_answer(), self.judge)
        on_pages = {**self.config, "eval": {**self.config["eval"],
                                            "eval_types": [t for t in types if t != "string_match"]}}
        if not on_pages["eval"]["eval_types"]:
            return score, details
        # program_html runs the task's JS in pages: bounded like a step
        session.probing = True
        try:
            settle = evaluators.SETTLE_S * len(self.config["eval"].get("program_html") or [])
            with session.watchdog(self.hang_timeout_s + settle, "webarena evaluate"):
                more, more_details = evaluators.evaluate(on_pages, answer=self.final_answer(),
                                                         context=session.context, page=session.page, judge=self.judge)
        finally:
            session.probing = False
        return score * more, {**details, **more_details}

    def _extra_state(self) -> dict[str, Any]:
        return {"sites": list(self.config.get("sites") or []), "start_url": str(self.config.get("start_url", ""))}

    def env_state_schema(self) -> dict[str, Any]:
        schema = super().env_state_schema()
        schema["properties"].update({
            "sites": {"type": "array", "items": {"type": "string"}, "description": "the WebArena sites of the task"},
            "start_url": {"type": "string", "description": "where the episode started (' |AND| ' between tabs)"}})
        return schema
