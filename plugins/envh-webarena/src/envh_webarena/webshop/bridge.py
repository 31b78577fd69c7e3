"""WebShop (``bridge: webshop``) in two modes over one shop.

* ``mode: text`` — WebShop's text environment: the page as its visible texts joined by
  `` [SEP] `` (WebShop's "simple" observation), the available actions listed, and one tool
  ``act(action)`` taking WebShop's own action strings ``search[query]`` / ``click[button]``
  (what verl-agent and the RL papers use). No browser.
* ``mode: browser`` — the same shop served on 127.0.0.1 and played in Chromium with the
  BrowserGym action set.

Both read the verdict from the same reward (``reward.score``) of the purchase: success is a
score of 1. Tasks are goal indices (``TaskRef(suite="webshop", split, instance_id="<i>")``)
in WebShop's split ranges.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
from html.parser import HTMLParser
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

from envh_webarena.browser_env import STATE_PROPERTIES, BrowserBridge
from envh_webarena.httpserve import LocalServer
from envh_webarena.webshop import data as wsdata
from envh_webarena.webshop import reward
from envh_webarena.webshop.site import (
    EPISODE_COOKIE,
    PRODUCT_WINDOW,
    Route,
    WebshopSite,
    handler_for,
    route_url,
    sub_pages,
)

SUITE = "webshop"
ACT = ToolSpec(name="act", description=(
    "One WebShop action: 'search[<query>]' on the search page, or 'click[<button>]' with a button from "
    "the available actions (a product id, an option value, 'description', 'buy now', 'back to search', "
    "'< prev', 'next >')."), parameters={"type": "object", "properties": {"action": {
        "type": "string", "maxLength": 500, "description": "search[...] or click[...]"}},
        "required": ["action"], "additionalProperties": False})
_ACTION = re.compile(r"^\s*(search|click)\[(.*)\]\s*$", re.S)
_SITES: dict[tuple[Any, ...], tuple[WebshopSite, list[LocalServer]]] = {}
_LOCK = threading.Lock()


def shared_site(data: str, human_goals: bool, num_products: int | None) -> tuple[WebshopSite, list[LocalServer]]:
    """One shop per data folder and process (loading and indexing happen once)."""
    key = (os.getpid(), os.path.realpath(data), human_goals, num_products)
    with _LOCK:
        if key not in _SITES:
            site = WebshopSite(wsdata.load(data, human_goals=human_goals, num_products=num_products))
            # the reward's noun extractor imports spaCy (1-2 s): paid here, not by the first
            # Buy Now, whose click would time out waiting for the done page
            reward.noun_extractor()
            _SITES[key] = (site, [])
        return _SITES[key]


def grading_info() -> dict[str, str]:
    """What the reward is graded as (in every episode's reset info): the WebShop release
    and commit whose ``goal.py`` it follows, and where the type score's nouns come from
    (a fallback, not WebShop's own type score, when spaCy's model is not installed)."""
    return {"release": reward.UPSTREAM, "type_score": reward.type_score_source()}


def make_webshop(mode: str = "text", **config: Any) -> Bridge:
    """The bridge factory: ``mode`` text (default) or browser; other keys go to the mode's class."""
    if mode == "text":
        return WebshopTextEnv(**config)
    if mode == "browser":
        return WebshopBrowserEnv(**config)
    raise errors.SpecError(f"webshop mode must be 'text' or 'browser', got {mode!r}")


class _Goals:
    """Goal lookup shared by both modes."""

    site: WebshopSite
    split: str
    split_ranges: dict[str, Any] | None

    def _init_goals(self, data: str | None, split: str, split_ranges: dict[str, Any] | None,
                    human_goals: bool, num_products: int | None) -> None:
        folder = data or os.environ.get("WEBSHOP_DATA")
        if not folder:
            raise errors.SpecError("webshop needs its data: set config.data (or WEBSHOP_DATA) to a folder with "
                                   "WebShop's items_shuffle*.json, items_ins_v2*.json and items_human_ins.json")
        self.data, self.split, self.split_ranges = folder, split, split_ranges
        self.site, self._servers = shared_site(folder, human_goals, num_products)
        wsdata.split_indices(len(self.site.catalogue.goals), split, split_ranges)  # validates the split

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        n = len(self.site.catalogue.goals)
        splits = [split] if split else list(self.split_ranges or wsdata.DEFAULT_SPLITS)
        return [TaskRef(suite=SUITE, split=s, instance_id=str(i))
                for s in splits for i in wsdata.split_indices(n, s, self.split_ranges)]

    def tunable_parameters(self) -> dict[str, dict[str, Any]]:
        from envh_webarena.tunable import WEBSHOP_PARAMETERS  # the goal's attribute count

        return {name: dict(spec) for name, spec in WEBSHOP_PARAMETERS.items()}

    def task_for(self, params: Any, rng: Any) -> TaskRef:
        from envh_webarena.tunable import webshop_task_for

        return webshop_task_for(self, params, rng)

    def _goal_index(self, task: TaskRef | None) -> tuple[TaskRef, int]:
        if task is None:
            tasks = self.list_tasks(self.split)
            if not tasks:
                raise errors.EnvError(f"webshop: split {self.split!r} has no goals in {self.data}")
            task = tasks[0]
        if task.suite != SUITE or not task.instance_id.isdigit() or \
                int(task.instance_id) >= len(self.site.catalogue.goals):
            raise errors.UnknownNameError("webshop goal", str(task), [str(t) for t in self.list_tasks()[:20]])
        return task, int(task.instance_id)

    def _verdict(self, route: Route | None, steps: int) -> EvaluationResult:
        if route is None or route.kind != "done":
            return EvaluationResult(success=False, score=0.0, metrics={"purchased": False, "steps": steps})
        s = self.site.score(route)
        return EvaluationResult(success=s["reward"] >= 1.0 - 1e-9, score=float(s["reward"]), metrics={
            "purchased": True, "asin": route.asin, "options": route.chosen, "steps": steps,
            **{k: v for k, v in s.items() if k != "reward"}})


class _VisibleText(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "title", "head"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "title", "head") and self._skip:
            self._skip -= 1

    def handle_data(self, text: str) -> None:
        if not self._skip and text.strip():
            self.parts.append(" ".join(text.split()))


def simple_text(page_html: str) -> str:
    """WebShop's simple observation: the visible texts joined by ' [SEP] '."""
    parser = _VisibleText()
    parser.feed(page_html)
    return " [SEP] ".join(parser.parts)


class WebshopTextEnv(_Goals, Bridge):
    """WebShop's text mode.

    :param data: folder of WebShop's data files (default ``$WEBSHOP_DATA``).
    :param split: the split ``reset`` uses without a task (test, eval, train).
    :param split_ranges: goal index ranges per split (default WebShop's 0-500/500-1500/1500-).
    :param human_goals: human instructions (True, WebShop's default) or synthetic ones.
    :param num_products: only the first N products (as WebShop's 1k/100k setups).
    :param max_steps: truncate after this many actions (default 15, as verl-agent).
    :param show_attrs: show the item page's Attributes tab (default hidden, as WebShop's
        ``show_attrs=False``: it lists what the reward's attribute part matches).
    """

    name = "webshop"

    def __init__(self, data: str | None = None, split: str = "test", split_ranges: dict[str, Any] | None = None,
                 human_goals: bool = True, num_products: int | None = None, max_steps: int | None = 15,
                 show_attrs: bool = False) -> None:
        self._init_goals(data, split, split_ranges, human_goals, num_products)
        self.max_steps, self.show_attrs = max_steps, show_attrs
        self.task: TaskRef | None = None
        self.route: Route | None = None
        self.steps, self.last_error, self.truncated = 0, "", False
        self._obs = Observation(text="", data={})

    def tools(self) -> list[ToolSpec]:
        return [ACT]

    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        self.task, index = self._goal_index(task)
        self.route = Route(kind="start", session=f"fixed_{index}")
        self.steps, self.last_error, self.truncated = 0, "", False
        self._obs = self._observation()
        return ResetResult(observation=self._obs, info={"task": str(self.task), "grading": grading_info()})

    def _step(self, action: Action) -> EnvResponse:
        assert self.route is not None
        if self.route.kind == "done" or self.truncated:
            return self.error_response("The episode is over; reset() to play again.", kind="episode_over")
        self.steps += 1
        info: dict[str, Any] = {}
        try:
            self.route = self._transition(self.route, str(action.args["action"]))
            self.last_error = ""
        except ValueError as exc:
            self.last_error = str(exc)
            info["error"] = {"type": "invalid_action", "message": self.last_error}
        done = self.route.kind == "done"
        if not done and self.max_steps is not None and self.steps >= self.max_steps:
            self.truncated, info["truncated_by"] = True, f"step budget of {self.max_steps} used"
        self._obs = self._observation()
        score = self._verdict(self.route, self.steps).score if done else 0.0
        return EnvResponse(observation=self._obs, reward=score, terminated=done, truncated=self.truncated, info=info)

    def _transition(self, r: Route, text: str) -> Route:
        m = _ACTION.match(text)
        if not m:
            raise ValueError(f"{text[:100]!r} is not a WebShop action: use search[<query>] or click[<button>].")
        verb, arg = m.group(1), " ".join(m.group(2).split())
        if verb == "search":
            if r.kind != "start":
                raise ValueError("There is no search box on this page: click[back to search] first.")
            if not arg:
                raise ValueError("search[] needs a query.")
            return Route(kind="results", session=r.session, keywords=arg.lower()[:500], page=1)
        button = arg.lower()
        available = self.site.clickables(r, self.show_attrs)
        if button not in available or button == "search":
            raise ValueError(f"No button {arg[:100]!r} here. Available: {', '.join(available[:30])}.")
        if button == "back to search":
            return Route(kind="start", session=r.session)
        if r.kind == "results":
            if button in ("next >", "< prev"):
                return attrs.evolve(r, page=r.page + (1 if button == "next >" else -1))
            asin = next(a for a in self.site.asins if a.lower() == button)
            return Route(kind="item", session=r.session, asin=asin, keywords=r.keywords, page=r.page)
        if r.kind == "sub":
            return attrs.evolve(r, kind="item", sub="")
        if button == "< prev":
            return Route(kind="results", session=r.session, keywords=r.keywords, page=r.page)
        if button == "buy now":
            return Route(kind="done", session=r.session, asin=r.asin, options=r.options)
        sub = next((s for s in sub_pages(self.show_attrs) if s.lower() == button), None)
        if sub:
            return attrs.evolve(r, kind="sub", sub=sub)
        product = self.site.catalogue.products[r.asin]
        # WebShop's text_to_clickable maps a value to the last radio button offering it (page
        # order), so a value offered under two names sets the last name
        name = [n for n, values in product["options"].items() if button in values][-1]
        return attrs.evolve(r, options=tuple(sorted({**r.chosen, name: button}.items())))

    def available_actions(self) -> list[str]:
        assert self.route is not None
        clicks = self.site.clickables(self.route, self.show_attrs)
        searches = ["search[<your query>]"] if self.route.kind == "start" else []
        return searches + [f"click[{c}]" for c in clicks if c != "search"]

    def _observation(self) -> Observation:
        assert self.route is not None
        _, page = self.site.render(self.route, self.show_attrs)
        text = simple_text(page)
        actions = self.available_actions()
        lines = [text]
        if self.last_error:
            lines.append(f"Invalid action: {self.last_error}")
        lines.append("Available actions: " + ", ".join(actions) if actions else "The episode is over.")
        return Observation(text="\n".join(lines)[:8000], data={
            "goal": self.site.goal_of(self.route.session)["instruction_text"],  # type: ignore[index]
            "page": self.route.kind, "url": route_url(self.route), "available_actions": actions})

    def observe(self) -> Observation:
        return attrs.evolve(self._obs, data=dict(self._obs.data))

    def evaluate(self) -> EvaluationResult:
        return self._verdict(self.route, self.steps)

    def reference_actions(self) -> list[Action] | None:
        """The goal's own product bought from here: back to search (unless on the start
        page), a search that lists it, ``next >`` to its page, its id, the options that
        match the goal, ``buy now`` — or a shorter path when already on its page. Each
        candidate plan is played on the shop's routes first (no state changes) and
        returned only when it ends in a score of 1 within the step budget; ``None`` when
        none does (a goal its product cannot fully satisfy, the episode over)."""
        r = self.route
        if r is None or r.kind == "done" or self.truncated:
            return None
        goal = self.site.goal_of(r.session)
        product = self.site.catalogue.products.get(str((goal or {}).get("asin", "")))
        if goal is None or product is None:
            return None
        budget = None if self.max_steps is None else self.max_steps - self.steps
        tail = [f"click[{v}]" for v in _goal_option_clicks(product, goal)] + ["click[buy now]"]
        plans = [tail] if r.kind == "item" and r.asin == product["asin"] else []
        back = [] if r.kind == "start" else ["click[back to search]"]
        plans += [[*back, *way, *tail] for way in _ways_to(self.site, product, goal)]
        for plan in plans:
            if (budget is None or len(plan) <= budget) and self._wins(r, plan):
                return [Action(tool="act", args={"action": a}) for a in plan]
        return None

    def _wins(self, route: Route, plan: list[str]) -> bool:
        """Whether ``plan`` played from ``route`` buys with a score of 1 (no step taken)."""
        try:
            for text in plan:
                route = self._transition(route, text)
        except (ValueError, StopIteration, KeyError):
            return False
        return route.kind == "done" and self._verdict(route, 0).success

    def notify_replay_complete(self) -> None:
        super().notify_replay_complete()
        self.steps, self.truncated = 0, False

    def get_env_state(self) -> dict[str, Any]:
        r, t = self.route, self.task
        return {
            "task": None if t is None else {"suite": t.suite, "split": t.split, "instance_id": t.instance_id},
            "goal": self._obs.data.get("goal", ""), "page": r.kind if r else "", "url": route_url(r) if r else "",
            "keywords": r.keywords if r else "", "asin": r.asin if r else "", "options": dict(r.options) if r else {},
            "available_actions": list(self._obs.data.get("available_actions", [])), "steps": self.steps,
            "max_steps": self.max_steps, "last_error": self.last_error,
            "done": bool(r and r.kind == "done") or self.truncated}

    def env_state_schema(self) -> dict[str, Any]:
        return {"type": "object", "description": "webshop (text mode): where the shopper is", "properties": {
            "task": STATE_PROPERTIES["task"], "goal": STATE_PROPERTIES["goal"],
            "page": {"type": "string", "description": "start, results, item, sub or done"},
            "url": {"type": "string", "description": "the page's path on the shop"},
            "keywords": {"type": "string", "description": "the current search"},
            "asin": {"type": "string", "description": "the product being viewed or bought"},
            "options": {"type": "object", "description": "options chosen on the item page"},
            "available_actions": {"type": "array", "items": {"type": "string"}, "description": "valid actions now"},
            "steps": STATE_PROPERTIES["steps"], "max_steps": STATE_PROPERTIES["max_steps"],
            "last_error": STATE_PROPERTIES["last_error"], "done": STATE_PROPERTIES["done"]}}


def _ways_to(site: WebshopSite, product: dict[str, Any], goal: dict[str, Any]) -> list[list[str]]:
    """From the start page to the product's page: for each query that lists it (its title,
    the goal's query, the instruction), the search, ``next >`` to its results page, its id."""
    ways: list[list[str]] = []
    seen: set[str] = set()
    for query in (product["Title"], goal.get("query", ""), goal.get("instruction_text", "")):
        query = " ".join(str(query).split()).lower()[:480]  # the act schema caps an action at 500
        if not query or query in seen:
            continue
        seen.add(query)
        hits = site.search(query)
        if product["asin"] in hits:
            page = hits.index(product["asin"]) // PRODUCT_WINDOW
            ways.append([f"search[{query}]", *["click[next >]"] * page, f"click[{product['asin'].lower()}]"])
    return ways


def _goal_option_clicks(product: dict[str, Any], goal: dict[str, Any]) -> list[str]:
    """The option values to click for ``goal``: per option name of the product, the value
    the goal names (a synthetic goal's name → value; a human goal's list matched as the
    reward matches it), else the value that scores best (ties: the first offered)."""
    from envh_webarena.webshop import reward

    wanted = goal.get("goal_options") or []
    named = {str(k).lower(): str(v).lower() for k, v in wanted.items()} if isinstance(wanted, dict) else {}
    listed = [str(w).lower() for w in (wanted.values() if isinstance(wanted, dict) else wanted)]
    goal_wanted = reward.goal_option_values(goal)
    chosen: dict[str, str] = {}
    for name, values in product["options"].items():
        if named.get(name) in values:
            chosen[name] = named[name]
            continue
        exact = next((v for v in values if v in listed), None)
        gains = [(reward.option_matches(goal_wanted, {name: v}), -k) for k, v in enumerate(values)]
        best = max(gains, default=(0, 0))
        if exact is not None or best[0] > 0:
            chosen[name] = exact if exact is not None else values[-best[1]]
    return list(chosen.values())


class WebshopBrowserEnv(_Goals, BrowserBridge):
    """WebShop's site in Chromium (same data and options as the text mode, ``show_attrs``
    included, plus the browser bridge's ``max_chars`` and ``action_timeout_ms``)."""

    name = "webshop"

    def __init__(self, data: str | None = None, split: str = "test", split_ranges: dict[str, Any] | None = None,
                 human_goals: bool = True, num_products: int | None = None, max_steps: int | None = 30,
                 max_chars: int = 6000, action_timeout_ms: int = 3000, hang_timeout_s: float = 60.0,
                 screenshot: bool = False, show_attrs: bool = False) -> None:
        self._init_goals(data, split, split_ranges, human_goals, num_products)
        self.show_attrs = show_attrs
        super().__init__(max_chars=max_chars, max_steps=max_steps, action_timeout_ms=action_timeout_ms,
                         hang_timeout_s=hang_timeout_s, screenshot=screenshot)
        self.route: Route | None = None
        self._purchase_key: tuple[str, str] | None = None  # (session, the episode's cookie)

    def _server(self) -> LocalServer:
        with _LOCK:
            if not self._servers:
                self._servers.append(LocalServer(handler_for(self.site)))
            return self._servers[0]

    def _open(self, task: TaskRef, seed: int | None, options: dict[str, Any]) -> str:
        task, index = self._goal_index(task)
        assert self.session is not None
        self.route = None
        self._forget_purchases()  # the last episode's records are read
        self._purchase_key = (f"fixed_{index}", secrets.token_hex(8))
        url = self._server().url
        self.site.open_episode(self._purchase_key[1], self._purchase_key[0], self.show_attrs)
        self.session.context.add_cookies([{"name": EPISODE_COOKIE, "value": self._purchase_key[1], "url": url}])
        self.session.page.goto(f"{url}/fixed_{index}", wait_until="load")
        return str(self.site.catalogue.goals[index]["instruction_text"])

    def _default_task(self) -> TaskRef:
        return self._goal_index(None)[0]

    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        result = super()._reset(task, seed, options)
        return attrs.evolve(result, info={**result.info, "grading": grading_info()})

    def _forget_purchases(self) -> None:
        """End this episode's cookie: its done pages are no longer scored, its purchase record dropped."""
        if self._purchase_key is None:
            return
        cookie = self._purchase_key[1]
        self.site.close_episode(cookie)
        for key in [k for k in list(self.site.purchases) if k[1] == cookie]:
            self.site.purchases.pop(key, None)

    def close(self) -> None:
        if self.route is None:
            self.route = self._purchase()  # evaluate() after close() still has the verdict
        self._forget_purchases()
        super().close()

    def _purchase(self) -> Route | None:
        """This episode's purchase: the first done page of its session the server was asked
        for (a Buy Now counts when the request arrives, also when its page comes after the
        action's timeout or the last observation)."""
        return None if self._purchase_key is None else self.site.purchases.get(self._purchase_key)

    def _after_action(self, tool: str, outcome: dict[str, Any]) -> tuple[float, bool]:
        route = self._purchase()
        if route is not None:
            self.route = route
            return self._verdict(route, self.steps).score, True
        return 0.0, "stop" in outcome

    def evaluate(self) -> EvaluationResult:
        if self.route is None:
            self.route = self._purchase()
        return self._verdict(self.route, self.steps)

    def _extra_state(self) -> dict[str, Any]:
        r = self.route
        return {"purchased": None if r is None else {"asin": r.asin, "options": dict(r.options)}}

    def env_state_schema(self) -> dict[str, Any]:
        schema = super().env_state_schema()
        schema["properties"]["purchased"] = {"type": ["object", "null"],
                                             "description": "the product and options bought, null before Buy Now"}
        return schema
