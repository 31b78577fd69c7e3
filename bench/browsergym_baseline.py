"""BrowserGym's reset, timed: the baseline of bench/browser_reset.py.

Runs inside its own virtualenv (``browsergym-core==0.14.3``, ``browsergym-miniwob==0.14.3``:
they pin playwright 1.44, which cannot sit beside envh's stack), so it never imports envh;
``bench/browser_reset.py`` makes that venv and starts this script. Per task and class, each
episode is ``gym.make`` + ``reset(seed)`` timed, then ``close`` untimed; one warm-up episode
per task and class is discarded; the classes alternate episode by episode so that both see
the same machine load. Classes:

- ``browsergym``: BrowserGym as it ships (MiniWoB tasks set Playwright's ``slow_mo`` to 100 ms);
- ``browsergym_slow_mo_0``: ``gym.make(..., slow_mo=0)``, its reset without the pauses.

Tasks BrowserGym registers run under their own ids (``browsergym/miniwob.<name>``); a task it
does not register (the flight tasks) runs as a subclass of its ``AbstractMiniwobTask`` whose
URL is the task's page, registered the same way, so it goes through the same ``setup``.

Loopback only, enforced by the kernel rather than by browser flags (BrowserGym's chat browser
takes none from its caller): the script refuses to run unless its network namespace has no
interface but ``lo`` (``browser_reset.py`` starts it under ``unshare --net``), brings ``lo``
up and serves the task pages (the same ``miniwob`` wheel's ``html/`` folder envh serves) from
an ``http.server`` on 127.0.0.1 inside that namespace. Chromium there reaches nothing else.

    python browsergym_baseline.py --html-dir DIR --chromium PATH \
        --task click-button=miniwob/click-button.html [--task ...] [--episodes 6] [--live 4]

The last line is one JSON object: per task and class, the reset times (seconds) and how many
of those resets include BrowserGym's 1000 ms frame-marking timeout (its observation waits for
an IntersectionObserver to visit every element: part of its reset as it ships); PSS of the
process tree (Playwright's driver and the browsers) with ``--live`` envs open.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

# this script's directory is on sys.path when it runs; browser_reset imports only the
# standard library at module level, so this venv (without envh) can use it
from browser_reset import children_rss_mb as tree_pss_mb

CLASSES = {"browsergym": {}, "browsergym_slow_mo_0": {"slow_mo": 0}}


def interfaces() -> list[str]:
    with open("/proc/net/dev", encoding="ascii") as f:
        return [line.split(":", 1)[0].strip() for line in f.readlines()[2:] if ":" in line]


def loopback_only() -> None:
    """Refuse to run with any network interface but ``lo``; bring ``lo`` up."""
    names = interfaces()
    if names != ["lo"]:
        sys.exit(f"browsergym_baseline: refusing to run with network interfaces {names}: start it in a "
                 "network namespace of its own (`unshare --net`), as bench/browser_reset.py does")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def serve(html_dir: str) -> str:
    handler = functools.partial(Quiet, directory=html_dir)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/"


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


def browsers_dir(chromium: str) -> str:
    """A ``PLAYWRIGHT_BROWSERS_PATH`` whose Chromium revision (the one this Playwright
    expects) is a link to ``chromium``: the system's Chromium, no browser download."""
    import playwright

    with open(os.path.join(os.path.dirname(playwright.__file__), "driver/package/browsers.json"),
              encoding="utf-8") as f:
        browsers = {b["name"]: b["revision"] for b in json.load(f)["browsers"]}
    root = os.path.join(os.path.dirname(os.path.dirname(sys.executable)), "playwright-browsers")
    links = {f"chromium-{browsers['chromium']}/chrome-linux/chrome": chromium}
    if "chromium-headless-shell" in browsers:
        links[f"chromium_headless_shell-{browsers['chromium-headless-shell']}/chrome-linux/headless_shell"] = chromium
    for rel, target in links.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.realpath(path) != os.path.realpath(target):
            tmp = tempfile.mktemp(dir=os.path.dirname(path))
            os.symlink(target, tmp)
            os.replace(tmp, path)
    return root


def register(tasks: dict[str, str], base: str) -> dict[str, str]:
    """Task name → gym id; tasks BrowserGym does not register get a subclass whose URL is
    the task's page on ``base``."""
    import browsergym.miniwob  # noqa: F401 - registers its tasks
    import gymnasium as gym
    from browsergym.core.registration import register_task
    from browsergym.miniwob.base import AbstractMiniwobTask

    os.environ["MINIWOB_URL"] = base + "miniwob/"
    ids = {}
    for name, rel in tasks.items():
        gid = f"browsergym/miniwob.{name}"
        if gid not in gym.registry:
            page_url = base + rel

            class Task(AbstractMiniwobTask):
                subdomain = name

                def __init__(self, *args: Any, url: str = page_url, **kwargs: Any) -> None:
                    super().__init__(*args, **kwargs)
                    self.url = url

            register_task(f"miniwob.{name}", Task)
        ids[name] = gid
    return ids


class Waits(logging.Handler):
    """Counts BrowserGym's frame-marking timeouts: its observation waits up to 1000 ms for
    an IntersectionObserver to visit every element, and says so when it gave up."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "intersection_observer after" in record.getMessage()


def timed_reset(gid: str, seed: int, kwargs: dict[str, Any]) -> float:
    import gymnasium as gym

    start = time.perf_counter()
    env = gym.make(gid, **kwargs)
    obs, _ = env.reset(seed=seed)
    elapsed = time.perf_counter() - start
    if not obs.get("goal_object"):
        raise RuntimeError(f"{gid}: reset returned no goal")
    env.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html-dir", required=True, help="the miniwob wheel's html/ folder")
    parser.add_argument("--chromium", required=True)
    parser.add_argument("--task", action="append", required=True, help="name=page path under --html-dir")
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--live", type=int, default=4, help="envs open for the memory figure (0: none)")
    args = parser.parse_args()
    loopback_only()
    os.environ["PLAYWRIGHT_BROWSERS_PATH"] = browsers_dir(args.chromium)
    tasks = dict(t.split("=", 1) for t in args.task)
    ids = register(tasks, serve(args.html_dir))
    times: dict[str, dict[str, list[float]]] = {t: {c: [] for c in CLASSES} for t in tasks}
    waits: dict[str, dict[str, int]] = {t: dict.fromkeys(CLASSES, 0) for t in tasks}
    counter = Waits()
    logging.getLogger("browsergym").addHandler(counter)
    for task, gid in ids.items():
        for seed in range(args.episodes + 1):
            for cls, kwargs in CLASSES.items():
                before = counter.count
                elapsed = timed_reset(gid, seed, kwargs)
                if seed:  # the first episode warms the disk cache and starts Playwright's driver
                    times[task][cls].append(elapsed)
                    waits[task][cls] += counter.count > before

    import gymnasium as gym

    idle = tree_pss_mb()  # Playwright's driver, shared by every env of this process
    envs = [gym.make(ids[next(iter(tasks))], slow_mo=0) for _ in range(args.live)]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
    live = tree_pss_mb()
    for env in envs:
        env.close()
    from importlib.metadata import version

    print(json.dumps({"times": times, "frame_marking_timeouts": waits, "pss_driver_mb": idle, "pss_live_mb": live, "live": args.live,
                      "pss_per_env_mb": (live - idle) / args.live if args.live else None,
                      "versions": {p: version(p) for p in ("browsergym-core", "playwright")}}))


if __name__ == "__main__":
    main()
