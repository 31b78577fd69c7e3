"""Shared fixtures: the real Chromium (one per test process, shared by every bridge), the
demo sites and a WebShop catalogue in WebShop's format. Without Chromium or Playwright
the tests skip locally and fail in CI (``CI=true``)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if str(Path(__file__).parent) not in sys.path:  # the tests' helper modules (procgroup)
    sys.path.insert(0, str(Path(__file__).parent))


def _missing() -> str | None:
    if not all(importlib.util.find_spec(m) for m in ("playwright", "miniwob", "bm25s", "rapidfuzz")):
        return "playwright, miniwob, bm25s or rapidfuzz is not installed: dev/setup.d/browser.sh"
    path = os.environ.get("ENVH_CHROMIUM") or "/usr/bin/chromium"
    if not os.access(path, os.X_OK):
        return f"Chromium is not installed at {path}: dev/setup.d/browser.sh (apt-get install chromium)"
    return None


@pytest.fixture(scope="session", autouse=True)
def _browser_installed() -> Iterator[None]:
    problem = _missing()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    yield
    from envh_webarena.runtime import close_shared_runtimes

    close_shared_runtimes()


@pytest.fixture(scope="session")
def demo_sites() -> Iterator[dict[str, Any]]:
    """The demo shop and forum on 127.0.0.1, as WebArena site URLs."""
    from envh_webarena.demo.sites import Forum, Shop

    shop, forum = Shop(), Forum()
    yield {"shop": shop, "forum": forum, "urls": {"shopping": shop.url, "reddit": forum.url}}
    shop.close()
    forum.close()


@pytest.fixture(scope="session")
def webshop_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo catalogue, granted to the specs the tests build (``--data``)."""
    from envh.hostpaths import granted
    from envh_webarena.demo.webshop_catalogue import write_catalogue

    path = str(write_catalogue(tmp_path_factory.mktemp("webshop-data")))
    with granted(path):
        yield path

