"""WebArena task configs and site variables.

A task is WebArena's config record: ``task_id, sites, start_url, intent, require_login,
storage_state, eval: {eval_types, reference_answers, reference_url, program_html, ...}``.
Configs come from a list in the bridge config, from per-task JSON files (WebArena's
``config_files/<id>.json``) or from a ``test.raw.json``-style list; the placeholders
``__SHOPPING__`` … ``__HOMEPAGE__`` are replaced by the site URLs, which come from the
``WA_*`` variables (BrowserGym's names) unless the bridge config overrides them.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from envh import errors

SITE_VARS = {
    "shopping": "WA_SHOPPING", "shopping_admin": "WA_SHOPPING_ADMIN", "reddit": "WA_REDDIT",
    "gitlab": "WA_GITLAB", "wikipedia": "WA_WIKIPEDIA", "map": "WA_MAP", "homepage": "WA_HOMEPAGE",
}
PLACEHOLDERS = {f"__{site.upper()}__": site for site in SITE_VARS}
EVAL_TYPES = ("string_match", "url_match", "program_html")
# program_html locators other than "" (the page's HTML), as evaluators._select reads them
LOCATORS = ("document.", "[...document.", "func:")


def _show(value: Any) -> str:
    """A value for an error message: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def site_urls(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Site name → base URL (no trailing slash), from ``WA_*`` and then ``overrides``."""
    urls = {site: os.environ[var].rstrip("/") for site, var in SITE_VARS.items() if os.environ.get(var)}
    if overrides is None:
        return urls
    if not isinstance(overrides, Mapping):
        raise errors.SpecError("webarena config.sites must be an object of site name → base URL "
                               f"(e.g. {{'shopping': 'http://127.0.0.1:7770'}}), got {_show(overrides)}")
    for site, url in overrides.items():
        if site not in SITE_VARS:
            raise errors.UnknownNameError("WebArena site", str(site), list(SITE_VARS))
        if not isinstance(url, str) or not url.strip():
            raise errors.SpecError(f"webarena config.sites.{site} must be the site's base URL (a string), "
                                   f"got {_show(url)}")
        urls[site] = url.rstrip("/")
    return urls


def substitute(value: Any, urls: dict[str, str]) -> Any:
    """Replace ``__SITE__`` placeholders in every string of a config (longest names first,
    so ``__SHOPPING_ADMIN__`` is not read as ``__SHOPPING__``)."""
    if isinstance(value, str):
        for token in sorted(PLACEHOLDERS, key=len, reverse=True):
            if token in value:
                site = PLACEHOLDERS[token]
                if site not in urls:
                    raise errors.SpecError(f"WebArena placeholder {token} needs {SITE_VARS[site]} "
                                           f"(or config.sites.{site}) to be set.")
                value = value.replace(token, urls[site])
        return value
    if isinstance(value, list):
        return [substitute(v, urls) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, urls) for k, v in value.items()}
    return value


def _strings(value: Any) -> bool:
    """A non-empty list of strings none of them blank (a bare string would be matched
    character by character; "" is in every answer and every page), nor any of their
    " |OR| " alternatives."""
    return isinstance(value, list) and bool(value) and all(
        isinstance(v, str) and all(alt.strip() for alt in v.split(" |OR| ")) for v in value)


def _func_problem(field: str, value: str) -> list[str]:
    """A ``func:`` helper call that would fail at grading, found when the task is made."""
    from envh_webarena.webarena import helpers

    try:
        helpers.parse(value.removeprefix("func:"))
    except errors.SpecError as exc:
        return [f"{field}: {exc}"]
    return []


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_reference_answers(answers: Any) -> list[str]:
    """string_match: at least one approach, each of the shape WebArena's evaluator reads."""
    if not isinstance(answers, dict) or not answers:
        return [f"eval.reference_answers: an object with exact_match, must_include and/or fuzzy_match "
                f"for string_match, got {_show(answers)}"]
    problems = []
    for approach, value in answers.items():
        field = f"eval.reference_answers.{approach}"
        if approach == "exact_match":
            if not isinstance(value, str):
                problems.append(f"{field}: a string, got {_show(value)}")
        elif approach == "must_include":
            if not _strings(value):
                problems.append(f"{field}: a non-empty list of non-blank strings, got {_show(value)}")
        elif approach == "fuzzy_match":
            if value != "N/A" and not _strings(value):
                problems.append(f"{field}: a non-empty list of non-blank strings, or \"N/A\" for an unachievable "
                                f"task, got {_show(value)}")
        else:
            problems.append(f"{field}: unknown approach (known: exact_match, must_include, fuzzy_match)")
    return problems


def _check_program_html(targets: Any) -> list[str]:
    """program_html: targets that each name a page, a locator and one required content."""
    if not isinstance(targets, list) or not targets:
        return [f"eval.program_html: a non-empty list of targets for program_html, got {_show(targets)}"]
    problems = []
    for i, target in enumerate(targets):
        field = f"eval.program_html[{i}]"
        if not isinstance(target, dict):
            problems.append(f"{field}: an object with url, locator and required_contents, got {_show(target)}")
            continue
        url, locator = target.get("url"), target.get("locator")
        if not isinstance(url, str) or not url.strip():
            problems.append(f"{field}.url: \"last\", \"func:...\" or a URL, got {_show(url)}")
        elif url.startswith("func:"):
            problems += _func_problem(f"{field}.url", url)
        if not isinstance(locator, str):
            problems.append(f"{field}.locator: a string (\"\" for the page's HTML), got {_show(locator)}")
        elif locator.strip() and not locator.startswith(LOCATORS):
            problems.append(f"{field}.locator: \"\" or one starting with {', '.join(LOCATORS)}, "
                            f"got {_show(locator)}")
        elif locator.startswith("func:"):
            problems += _func_problem(f"{field}.locator", locator)
        prep = target.get("prep_actions", [])
        if not isinstance(prep, list) or not all(isinstance(p, str) for p in prep):
            problems.append(f"{field}.prep_actions: a list of JavaScript strings, got {_show(prep)}")
        required = target.get("required_contents")
        keys = sorted(required) if isinstance(required, dict) else []
        if keys == ["exact_match"]:
            if not isinstance(required["exact_match"], str):
                problems.append(f"{field}.required_contents.exact_match: a string, "
                                f"got {_show(required['exact_match'])}")
        elif keys == ["must_include"]:
            if not _strings(required["must_include"]):
                problems.append(f"{field}.required_contents.must_include: a non-empty list of non-blank strings, "
                                f"got {_show(required['must_include'])}")
        else:
            problems.append(f"{field}.required_contents: an object with exactly one of exact_match "
                            f"(a string) or must_include (a list of strings), got {_show(required)}")
    return problems


def _check_eval(ev: Any) -> list[str]:
    if not isinstance(ev, dict):
        return [f"eval: an object with eval_types and their references, got {_show(ev)}"]
    types = ev.get("eval_types")
    if not isinstance(types, list) or not types:
        return [f"eval.eval_types: a non-empty list of {', '.join(EVAL_TYPES)}, got {_show(types)}"]
    problems = [f"eval.eval_types: unknown {t!r} (known: {', '.join(EVAL_TYPES)})"
                for t in types if t not in EVAL_TYPES]
    if "string_match" in types:
        problems += _check_reference_answers(ev.get("reference_answers"))
    if "url_match" in types:
        ref = ev.get("reference_url")
        if not isinstance(ref, str) or not ref.strip():
            problems.append(f"eval.reference_url: a URL (' |OR| ' between alternatives) for url_match, "
                            f"got {_show(ref)}")
        if ev.get("url_note", "GOLD in PRED") != "GOLD in PRED":
            problems.append(f"eval.url_note: \"GOLD in PRED\" (the one rule WebArena has), got {_show(ev['url_note'])}")
    if "program_html" in types:
        problems += _check_program_html(ev.get("program_html"))
    return problems


def _check_browser_fields(task: dict[str, Any]) -> list[str]:
    """The fields that become Playwright context options: a wrong one must fail here, as the
    task's fault, not in the browser (where it looks like a dead Chromium)."""
    problems = []
    state = task.get("storage_state")
    if state is not None and not isinstance(state, str):
        problems.append(f"storage_state: a path to a Playwright storage-state file or null, got {_show(state)}")
    elif isinstance(state, str) and (os.path.isabs(state) or os.path.normpath(state).split(os.sep)[0] == ".."
                                     or not state.strip() or "\0" in state):
        # the login writes this file: it must stay inside auth_dir, which the spec's grant covers
        problems.append(f"storage_state: a path relative to auth_dir and inside it (WebArena's "
                        f"'./.auth/<site>_state.json'), got {_show(state)}")
    size = task.get("viewport_size")
    if size is not None and not (isinstance(size, dict) and sorted(size) == ["height", "width"]
                                 and all(isinstance(size[k], int) and not isinstance(size[k], bool)
                                         and size[k] > 0 for k in size)):
        problems.append(f"viewport_size: {{\"width\": <pixels>, \"height\": <pixels>}} (positive integers) "
                        f"or null, got {_show(size)}")
    geo = task.get("geolocation")
    if geo is not None:
        ok = isinstance(geo, dict) and {"latitude", "longitude"} <= set(geo) \
            and set(geo) <= {"latitude", "longitude", "accuracy"} and all(_number(v) for v in geo.values())
        if not ok or not (-90 <= geo["latitude"] <= 90 and -180 <= geo["longitude"] <= 180
                          and geo.get("accuracy", 0) >= 0):
            problems.append("geolocation: {\"latitude\": -90..90, \"longitude\": -180..180} (and optionally "
                            f"\"accuracy\" >= 0) or null, got {_show(geo)}")
    return problems


def check_task(task: dict[str, Any], where: str) -> dict[str, Any]:
    """Validate the fields the bridge and the evaluators read; raise ``SpecError`` naming the
    task and each wrong field. A malformed reference must not grade (an empty ``must_include``
    passes any answer, a string one matches by characters), so it is refused here."""
    problems = [f"{key}: missing" for key in ("task_id", "start_url", "intent", "eval") if key not in task]
    tid = task.get("task_id")
    if "task_id" in task and not (isinstance(tid, int | str) and not isinstance(tid, bool) and str(tid).strip()):
        problems.append(f"task_id: an integer or a non-empty string, got {_show(tid)}")
    if "start_url" in task and not (isinstance(task["start_url"], str) and task["start_url"].strip()):
        problems.append(f"start_url: a URL (' |AND| ' between tabs), got {_show(task['start_url'])}")
    if "intent" in task and not isinstance(task["intent"], str):
        problems.append(f"intent: the instruction (a string), got {_show(task['intent'])}")
    sites = task.get("sites")
    if sites is not None and not (isinstance(sites, list)
                                  and all(isinstance(s, str) and s in SITE_VARS for s in sites)):
        problems.append(f"sites: a list of site names ({', '.join(SITE_VARS)}), got {_show(sites)}")
    if not isinstance(task.get("require_login", False), bool | None):
        problems.append(f"require_login: true or false, got {_show(task['require_login'])}")
    problems += _check_browser_fields(task)
    if "eval" in task:
        problems += _check_eval(task["eval"])
    if problems:
        raise errors.SpecError(f"Invalid WebArena task config {where} (task_id {_show(tid)}); "
                               "fix these fields (WebArena's config_files format):", problems)
    return task


def load_tasks(*, tasks: list[dict[str, Any]] | None = None, config_files: str | None = None,
               urls: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Task id (as a string) → config with placeholders substituted."""
    if tasks is not None and not isinstance(tasks, list | tuple):
        raise errors.SpecError(f"webarena config.tasks must be a list of task configs, got {_show(tasks)}")
    if config_files is not None and not isinstance(config_files, str):
        raise errors.SpecError(f"webarena config.config_files must be a glob (a string), got {_show(config_files)}")
    raw: list[tuple[str, dict[str, Any]]] = [(f"tasks[{i}]", t) for i, t in enumerate(tasks or [])]
    if config_files:
        paths = sorted(glob.glob(config_files))
        if not paths:
            raise errors.SpecError(f"webarena config_files {config_files!r} matches no file")
        for path in paths:
            try:
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
            except (OSError, ValueError) as exc:  # IsADirectoryError, JSONDecodeError, UnicodeDecodeError
                raise errors.SpecError(f"webarena config file {path} cannot be read as JSON ({exc}); "
                                       "config_files must match JSON files, each a task config or a list of them") \
                    from exc
            items = data if isinstance(data, list) else [data]
            raw += [(f"{path}[{i}]", t) for i, t in enumerate(items)]
    out: dict[str, dict[str, Any]] = {}
    seen: dict[str, str] = {}
    for where, task in raw:
        if not isinstance(task, dict):
            raise errors.SpecError(f"{where}: a task config must be an object, got {_show(task)}")
        task = check_task(substitute(task, urls), where)
        tid = str(task["task_id"])
        if tid in seen:
            raise errors.SpecError(f"webarena task_id {tid!r} is given twice ({seen[tid]} and {where}); "
                                   "task ids must be unique")
        seen[tid] = where
        out[tid] = task
    return out


def hosts_of(urls: dict[str, str]) -> tuple[str, ...]:
    """``host[:port]`` of each non-loopback site, for the browser's allow-list."""
    out = []
    for url in urls.values():
        netloc = urlsplit(url).netloc
        if netloc and not netloc.startswith(("127.0.0.1", "localhost", "[::1]")):
            out.append(netloc)
    return tuple(out)
