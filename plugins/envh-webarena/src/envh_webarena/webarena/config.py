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
from typing import Any
from urllib.parse import urlsplit

from envh import errors

SITE_VARS = {
    "shopping": "WA_SHOPPING", "shopping_admin": "WA_SHOPPING_ADMIN", "reddit": "WA_REDDIT",
    "gitlab": "WA_GITLAB", "wikipedia": "WA_WIKIPEDIA", "map": "WA_MAP", "homepage": "WA_HOMEPAGE",
}
PLACEHOLDERS = {f"__{site.upper()}__": site for site in SITE_VARS}
EVAL_TYPES = ("string_match", "url_match", "program_html")


def site_urls(overrides: dict[str, str] | None = None) -> dict[str, str]:
    """Site name → base URL (no trailing slash), from ``WA_*`` and then ``overrides``."""
    urls = {site: os.environ[var].rstrip("/") for site, var in SITE_VARS.items() if os.environ.get(var)}
    for site, url in (overrides or {}).items():
        if site not in SITE_VARS:
            raise errors.UnknownNameError("WebArena site", site, list(SITE_VARS))
        urls[site] = str(url).rstrip("/")
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


def check_task(task: dict[str, Any], where: str) -> dict[str, Any]:
    """Validate the fields the bridge and the evaluators read; raise ``SpecError`` naming them."""
    problems = []
    for key in ("task_id", "start_url", "intent", "eval"):
        if key not in task:
            problems.append(f"{where}: missing {key!r}")
    ev = task.get("eval") or {}
    types = ev.get("eval_types") if isinstance(ev, dict) else None
    if not isinstance(types, list) or not types:
        problems.append(f"{where}.eval.eval_types: a non-empty list of {', '.join(EVAL_TYPES)}")
    else:
        problems += [f"{where}.eval.eval_types: unknown {t!r} (known: {', '.join(EVAL_TYPES)})"
                     for t in types if t not in EVAL_TYPES]
        if "string_match" in types and not isinstance(ev.get("reference_answers"), dict):
            problems.append(f"{where}.eval.reference_answers: an object for string_match")
        if "url_match" in types and not isinstance(ev.get("reference_url"), str):
            problems.append(f"{where}.eval.reference_url: a string for url_match")
        if "program_html" in types and not isinstance(ev.get("program_html"), list):
            problems.append(f"{where}.eval.program_html: a list for program_html")
    if problems:
        raise errors.SpecError("Invalid WebArena task config", problems)
    return task


def load_tasks(*, tasks: list[dict[str, Any]] | None = None, config_files: str | None = None,
               urls: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Task id (as a string) → config with placeholders substituted."""
    raw: list[tuple[str, dict[str, Any]]] = [(f"tasks[{i}]", t) for i, t in enumerate(tasks or [])]
    if config_files:
        paths = sorted(glob.glob(config_files))
        if not paths:
            raise errors.SpecError(f"webarena config_files {config_files!r} matches no file")
        for path in paths:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            items = data if isinstance(data, list) else [data]
            raw += [(f"{path}[{i}]", t) for i, t in enumerate(items)]
    out: dict[str, dict[str, Any]] = {}
    for where, task in raw:
        if not isinstance(task, dict):
            raise errors.SpecError(f"{where}: a task config must be an object")
        task = check_task(substitute(task, urls), where)
        out[str(task["task_id"])] = task
    return out


def hosts_of(urls: dict[str, str]) -> tuple[str, ...]:
    """``host[:port]`` of each non-loopback site, for the browser's allow-list."""
    out = []
    for url in urls.values():
        netloc = urlsplit(url).netloc
        if netloc and not netloc.startswith(("127.0.0.1", "localhost", "[::1]")):
            out.append(netloc)
    return tuple(out)
