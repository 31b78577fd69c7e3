"""Logging into WebArena's sites and keeping the session as a Playwright storage state.

A task with ``require_login`` names a ``storage_state`` file (WebArena writes them as
``./.auth/<site>[.<site>]_state.json``). When that file is missing the bridge logs in as
WebArena's ``auto_login.py`` does — one recipe per site, with WebArena's accounts — in a
throw-away context and saves the cookies there; every episode then starts from a fresh
context loaded with that state. Recipes and accounts can be replaced in the bridge config
(``logins``).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any

from envh import errors

# WebArena's accounts and login forms (browser_env/auto_login.py).
DEFAULT_LOGINS: dict[str, dict[str, Any]] = {
    "shopping": {"path": "/customer/account/login/", "submit": {"role": "button", "name": "Sign In"},
                 "fields": [{"label": "Email", "value": "emma.lopez@gmail.com"},
                            {"label": "Password", "value": "Password.123"}]},
    "reddit": {"path": "/login", "submit": {"role": "button", "name": "Log in"},
               "fields": [{"label": "Username", "value": "MarvelsGrantMan136"},
                          {"label": "Password", "value": "test1234"}]},
    "shopping_admin": {"path": "", "submit": {"role": "button", "name": "Sign in"},
                       "fields": [{"placeholder": "user name", "value": "admin"},
                                  {"placeholder": "password", "value": "admin1234"}]},
    "gitlab": {"path": "/users/sign_in", "submit": {"test_id": "sign-in-button"},
               "fields": [{"test_id": "username-field", "value": "byteblaze"},
                          {"test_id": "password-field", "value": "hello1234"}]},
}


def sites_of_state(path: str, task_sites: list[str]) -> list[str]:
    """Which sites a storage-state file covers: from its name (``gitlab.reddit_state.json``)
    or, failing that, the task's ``sites``."""
    stem = os.path.basename(path).removesuffix(".json").removesuffix("_state")
    named = [s for s in stem.split(".") if s in DEFAULT_LOGINS]
    return named or [s for s in task_sites if s in DEFAULT_LOGINS]


def _find(page: Any, spec: dict[str, Any]) -> Any:
    if "label" in spec:
        return page.get_by_label(spec["label"], exact=True)
    if "placeholder" in spec:
        return page.get_by_placeholder(spec["placeholder"])
    if "test_id" in spec:
        return page.get_by_test_id(spec["test_id"])
    if "role" in spec:
        return page.get_by_role(spec["role"], name=spec.get("name"))
    raise errors.SpecError(f"A login step needs label, placeholder, test_id or role: {spec}")


def login(context: Any, site: str, base_url: str, recipe: dict[str, Any]) -> None:
    """Log into one site in ``context`` (its cookies then hold the session)."""
    from playwright.sync_api import Error

    page = context.new_page()
    try:
        page.goto(base_url + recipe.get("path", ""), wait_until="load")
        for field in recipe["fields"]:
            _find(page, field).fill(str(field["value"]))
        _find(page, recipe["submit"]).click()
        page.wait_for_load_state("load")
    except Error as exc:
        raise errors.InfraError(f"Could not log into {site} at {base_url}: {str(exc).splitlines()[0]}") from exc
    finally:
        page.close()


def ensure_storage_state(runtime: Any, path: str, sites: list[str], urls: dict[str, str],
                         logins: dict[str, dict[str, Any]]) -> str:
    """The storage-state file for ``sites``, logging in and writing it when missing."""
    if os.path.isfile(path):
        return path
    missing = [s for s in sites if s not in urls]
    if missing:
        raise errors.SpecError(f"Logging into {', '.join(missing)} needs their URLs "
                               f"({', '.join('WA_' + s.upper() for s in missing)}).")
    context = runtime.new_context()
    try:
        for site in sites:
            recipe = logins.get(site) or DEFAULT_LOGINS.get(site)
            if recipe is None:
                raise errors.SpecError(f"No login recipe for site {site!r}; add one under config.logins.")
            login(context, site, urls[site], recipe)
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        # whole or not at all: another worker may be reading it (a task's k episodes log
        # in at once in a pool), and a file written in place is empty for a moment
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".state-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(context.storage_state(), f)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    finally:
        context.close()
    return path
