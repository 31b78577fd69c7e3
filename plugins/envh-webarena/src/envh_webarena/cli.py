"""``envh webarena``: which WebArena sites answer, and whether the browser starts."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import click


def probe(url: str, timeout: float) -> dict[str, object]:
    """GET ``url``; status, time and error (an HTTP error status still means the site answers)."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - the user's own sites
            status: int | None = resp.status
        error = None
    except urllib.error.HTTPError as exc:
        status, error = exc.code, None
    except (OSError, ValueError) as exc:
        status, error = None, str(getattr(exc, "reason", exc))[:200]
    return {"url": url, "status": status, "ok": status is not None, "error": error,
            "seconds": round(time.monotonic() - start, 3)}


@click.group(name="webarena")
def webarena() -> None:
    """WebArena sites and the browser the web bridges drive."""


@webarena.command()
@click.option("--timeout", default=5.0, show_default=True, help="Seconds to wait for each site.")
@click.option("--browser/--no-browser", default=True, show_default=True, help="Also start Chromium once.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def check(timeout: float, browser: bool, as_json: bool) -> None:
    """Report which WA_* sites answer, and whether Chromium starts. Exit 1 when a
    configured site does not answer or the browser does not start."""
    from envh_webarena.webarena.config import SITE_VARS, site_urls

    urls = site_urls()
    sites = {site: probe(urls[site], timeout) if site in urls else {"url": None, "ok": False, "status": None,
                                                                     "error": f"{var} is not set"}
             for site, var in SITE_VARS.items()}
    report: dict[str, object] = {"sites": sites}
    failed = [s for s, r in sites.items() if s in urls and not r["ok"]]
    if browser:
        report["browser"] = _browser_check()
        if not report["browser"]["ok"]:  # type: ignore[index]
            failed.append("browser")
    if as_json:
        click.echo(json.dumps(report))
    else:
        for site, r in sites.items():
            mark = "ok " if r["ok"] else ("-- " if r["url"] is None else "DOWN")
            detail = f"HTTP {r['status']} in {r['seconds']}s" if r["ok"] else r["error"]
            click.echo(f"{mark:4} {site:15} {r['url'] or '':40} {detail}")
        if browser:
            b = report["browser"]
            click.echo(f"{'ok ' if b['ok'] else 'FAIL':4} {'chromium':15} {b['detail']}")  # type: ignore[index]
    if failed:
        raise SystemExit(1)


def _browser_check() -> dict[str, object]:
    from envh import errors

    from envh_webarena.runtime import BrowserRuntime

    try:
        runtime = BrowserRuntime()
    except errors.EnvhError as exc:  # a bad $ENVH_PAGE_HEAP_MB
        return {"ok": False, "detail": str(exc)[:300]}
    start = time.monotonic()
    try:
        context = runtime.new_context()
        context.close()
        return {"ok": True, "detail": f"{runtime.browser().version} started in {time.monotonic() - start:.2f}s"}
    except errors.EnvhError as exc:
        return {"ok": False, "detail": str(exc)[:300]}
    finally:
        runtime.close()
