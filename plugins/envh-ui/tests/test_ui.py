"""``envh ui`` in a real browser: the app served by uvicorn on 127.0.0.1, driven by
Playwright in the system Chromium; each page is loaded, used, and checked on what it
renders. ``ENVH_UI_SCREENSHOTS=DIR`` saves a screenshot of each page (the README's)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from envh.rollout.store import TrajectoryStore
from envh_ui.app import CSP, create_app
from playwright import sync_api
from playwright.sync_api import expect

# The playground starts a jail per stack and plays through the server: on a loaded 2-core
# machine that takes longer than Playwright's 5 s default. A longer wait changes no assertion.
expect.set_options(timeout=30_000)

CHROMIUM = "/usr/bin/chromium"
#: a run id with every character a URL path or query treats specially
BIG_RUN = "sweeps/big run?page=7&id=x#frag%2F/../<b>"
SPEC = """bridge: toy24
layers:
  - kind: contract
    code: |
      def filter_action(action, state, memo):
          if action.tool == "combine" and action.args["op"] == "div":
              return Block(reason="division is disabled in this world")

      def filter_observation(observation, state, memo):
          return observation.text + "\\nHint: you have " + str(len(state["numbers"])) + " numbers left."
  - kind: budget
    max_steps: 12
"""
SCRIPT = {"1,2,6,6": ["combine(0, 1, div)", "combine(0, 1, add)", {"tool": "combine", "args": {"i": 2, "j": 0, "op": "mul"}},
                      "combine(0, 1, add)", "stop()"], "*": ["combine(0, 1, mul)", "stop()"]}


def _envh(*args: str, cwd: Path) -> None:
    subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", *args], cwd=cwd, check=True,
                   capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    base = tmp_path_factory.mktemp("ui")
    script = base / "script.json"
    script.write_text(json.dumps(SCRIPT))
    (base / "spec.yaml").write_text(SPEC)
    small = base / "small"
    _envh("run", str(base / "spec.yaml"), "--split", "medium", "--policy", f"scripted:{script}",
          "--executor", "inline", "--out", str(small), cwd=base)
    (small / "report.md").write_text("# Rig report\n\nround 1: accepted (0.50 in [0.4, 0.6])\n")
    (small / "metrics.jsonl").write_text("\n".join(json.dumps({"step": i, "reward/solved": i / 4, "loss": 1 - i / 8})
                                                   for i in range(4)) + "\n")
    (small / "secret.txt").write_text("not for the app")
    specs, entries = small / "pool" / "specs", small / "pool" / "entries"
    specs.mkdir(parents=True)
    entries.mkdir()
    accepted = {"bridge": "toy24", "layers": [{"kind": "stage", "actions": [
        {"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}]}]}
    (specs / "abc123def4567890.json").write_text(json.dumps(accepted))
    (entries / "abc123def4567890.json").write_text(json.dumps(
        {"task": "toy24/medium/1,2,6,6", "target": "sr:0.4-0.6", "rationale": "replay the first plan step"}))
    _rig_journal(small / "trajectories.sqlite")
    big = base / "big"
    with TrajectoryStore(small) as source:
        (template,) = [t for t in source.query() if t.task and t.task.instance_id == "1,2,6,6"]
        run_id = source.runs()[0]
        manifest = source.manifest(run_id)
    with TrajectoryStore(big) as store:
        store.db.execute("PRAGMA synchronous=OFF")  # a fixture of 10,000 rows, not a durability test
        store.create_run(BIG_RUN, manifest or {})
        import attrs

        for i in range(10_000):
            store.append(attrs.evolve(template, run_id=BIG_RUN, key=f"ep-{i:05d}", seed=i))
    # a plot as a rig directory may hold it, with script inside (opened on its own, an SVG is a document)
    (big / "plot.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'>"
                                  "<script>document.documentElement.setAttribute('data-ran', '1')</script></svg>")
    return [small, big]


RIG_EVENTS = [  # the rig_journal rows `envh rig` writes (envh_rigger.journal), for one task
    ("baseline", {"spec_id": "base", "stats": {"success_rate": 0.0, "interval": [0.0, 0.43], "n": 5},
                  "band": [0.4, 0.6], "direction": "easier",
                  "diagnosis": {"failure_axis": "planning", "summary": "never combines towards 24",
                                "claims": [{"axis": "planning", "claim": "adds everything <script>x</script>"}]}}),
    ("attempt", {"attempt": {"round": 1, "spec_id": "0123456789abcdef", "layers": [{"kind": "budget", "max_steps": 3}],
                             "meta": None, "result": {"success_rate": 0.0, "interval": [0.0, 0.43], "n": 5,
                                                      "decision": "below", "confidence": {"in": 0.01}},
                             "verdict": "rejected", "reason": "success_rate below the band", "rationale": "tighter"}}),
    ("attempt", {"attempt": {"round": 2, "spec_id": "abc123def4567890", "layers": [{"kind": "stage", "actions": []}],
                             "meta": {"template": "replay"}, "result": {"success_rate": 0.5, "interval": [0.24, 0.76],
                                                                        "n": 10, "decision": "in",
                                                                        "confidence": {"in": 0.97, "below": 0.02}},
                             "verdict": "accepted", "reason": "success_rate in the band",
                             "rationale": "replay the first plan step <img src=x>"}}),
    ("accepted", {"spec_id": "abc123def4567890", "spec": {}, "path": "pool/specs/abc123def4567890.json"}),
]


def _rig_journal(store: Path) -> None:
    import sqlite3

    db = sqlite3.connect(store)
    with db:
        db.execute("CREATE TABLE rig_journal (seq INTEGER PRIMARY KEY AUTOINCREMENT, task TEXT NOT NULL, "
                   "kind TEXT NOT NULL, data TEXT NOT NULL, created REAL NOT NULL)")
        db.executemany("INSERT INTO rig_journal (task, kind, data, created) VALUES (?, ?, ?, 0)",
                       [("toy24/medium/1,2,6,6", kind, json.dumps(data)) for kind, data in RIG_EVENTS])
    db.close()


@pytest.fixture(scope="module")
def server(run_dirs: list[Path], serve):
    with serve(create_app(run_dirs, token="t0k3n"), named=True) as url:
        yield url


@pytest.fixture
def page(browser, server, watch):
    context = browser.new_context()
    context.set_default_timeout(30_000)
    p = context.new_page()
    problems = watch(p)
    p.goto(f"{server}/?token=t0k3n")
    yield p
    context.close()
    assert problems == []  # no script error, nothing the Content-Security-Policy had to block


def shot(page, name: str) -> None:
    out = os.environ.get("ENVH_UI_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(out) / f"{name}.png"), full_page=False)


def fetch(page, url: str) -> tuple[int, dict[str, str]]:
    """GET ``url`` from the page (the browser resolves the server's ``*.localhost`` name;
    Playwright's own request client does not): the status and the headers."""
    return page.evaluate("async u => { const r = await fetch(u); "
                         "return [r.status, Object.fromEntries(r.headers.entries())]; }", url)


def test_without_the_token_nothing_is_served(server) -> None:
    server = "http://127.0.0.1:" + server.rsplit(":", 1)[1]  # urllib does not resolve *.localhost
    for path in ("/", "/playground", "/file/0/report.md", "/traj/0/1"):
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(server + path, timeout=10)
        assert info.value.code == 403
        info.value.close()
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(server + "/?token=wrong", timeout=10)
    assert info.value.code == 403  # refused, not any error (a 500 would pass a bare raises)
    info.value.close()


def test_runs_page_summarises_each_run(page) -> None:
    rows = page.locator("tr.run")
    assert rows.count() == 2
    small = rows.nth(0).inner_text()
    assert "scripted" in small and "10" in small and "10.0%" in small  # 1 of 10 medium puzzles solved
    assert "10000" in rows.nth(1).inner_text()
    assert page.locator("a.file", has_text="report.md").count() == 1
    assert page.locator("a.file", has_text="secret.txt").count() == 0
    shot(page, "runs")


def test_episode_list_pages_and_filters(page) -> None:
    assert page.locator("tr.run a").nth(1).inner_text() == BIG_RUN
    page.locator("tr.run a").nth(1).click()
    assert page.locator("h1").inner_text() == f"Run {BIG_RUN}"  # the id survived the link unchanged
    assert page.locator("tr.episode").count() == 50
    assert "10000 episodes · page 1 of 200" in page.locator("#pager").inner_text()
    page.locator("#next").click()
    assert "page 2 of 200" in page.locator("#pager").inner_text()
    assert page.locator("tr.episode").first.inner_text().split()[0] == "ep-00050"
    page.select_option("select[name=outcome]", "success")  # the filter form keeps the run
    page.locator("#filters button").click()
    assert page.locator("h1").inner_text() == f"Run {BIG_RUN}"
    assert "10000 episodes" in page.locator("#pager").inner_text()  # every copy of the template succeeded
    page.goto(page.url.split("/run/")[0] + "/")
    page.locator("tr.run a").first.click()
    page.select_option("select[name=outcome]", "success")
    page.locator("#filters button").click()
    rows = page.locator("tr.episode")
    assert rows.count() == 1 and "1,2,6,6" in rows.first.inner_text()
    shot(page, "episodes")


def test_a_trajectory_shows_what_each_layer_did(page) -> None:
    page.locator("tr.run a").first.click()
    page.select_option("select[name=outcome]", "success")
    page.locator("#filters button").click()
    page.locator("tr.episode a").first.click()
    assert page.locator("#verdict").inner_text().startswith("success")
    steps = page.locator("#steps tr.step")
    assert steps.count() == 5
    first = steps.nth(0)
    assert "blocked" in first.get_attribute("class")
    assert "division is disabled in this world" in first.inner_text()
    assert "Hint: you have" in steps.nth(1).locator("pre.seen").inner_text()  # the contract's f_O
    assert "Hint" not in steps.nth(1).locator("pre.base").inner_text()  # the base observation beside it
    shot(page, "trajectory")


def test_two_trajectories_side_by_side(page) -> None:
    page.locator("tr.run a").first.click()
    tasks = [page.locator("tr.episode").nth(i).locator("td").nth(2).inner_text() for i in (0, 1)]
    assert tasks[0] != tasks[1]
    page.locator("input.pick").nth(0).check()
    page.locator("input.pick").nth(1).check()
    page.locator("#compare").click()
    page.wait_for_url("**/compare/**")
    assert page.locator("#pairs tr.pair[data-step]").count() >= 2  # both episodes' steps, row by row
    # each side is the episode picked for it (the same one twice would pass the line above)
    assert tasks[0] in page.locator("#left table.meta").inner_text()
    assert tasks[1] in page.locator("#right table.meta").inner_text()
    shot(page, "compare")


def test_rig_report_and_training_pages(page, server) -> None:
    page.goto(f"{server}/rig/0")
    assert page.locator("h3.rig-task").inner_text() == "toy24/medium/1,2,6,6"
    assert "never combines towards 24" in page.locator("p.baseline").inner_text()
    assert "<script>x</script>" in page.locator("ul.claims").inner_text()  # shown as text
    rounds = page.locator("table.rounds tr.round")
    assert rounds.count() == 2
    assert rounds.nth(0).locator(".verdict b").inner_text() == "rejected"
    assert rounds.nth(0).locator(".open").count() == 0  # a rejected candidate is not in the pool
    second = rounds.nth(1)
    assert second.locator(".decision").inner_text() == "in"
    assert "in 0.97" in second.inner_text() and "0.50 [0.24, 0.76] n=10" in second.inner_text()
    assert "replay the first plan step <img src=x>" in second.inner_text() and page.locator("main img").count() == 0
    second.locator("summary").click()
    assert '"kind": "stage"' in second.locator("pre").inner_text()
    shot(page, "rig")
    assert "round 1: accepted" in page.locator("#report").inner_text()
    assert "replay the first plan step" in page.locator("#pool tr.accepted").inner_text()
    second.locator("a.open").click()
    page.wait_for_url("**/playground?**")
    assert "kind: stage" in page.input_value("#spec")
    page.locator("#start").click()
    expect(page.locator("#seen")).not_to_be_empty()
    assert "Numbers: [0] 4, [1] 5." in page.locator("#seen").inner_text()  # the stage combined 2 + 3
    for bad in ("/playground?d=0&spec=..%2f..%2fetc", "/playground?d=9&spec=abc123def4567890",
                "/playground?d=0&spec=ffffffffffffffff"):
        assert fetch(page, server + bad)[0] == 404, bad
    page.goto(f"{server}/training/0")
    assert page.locator("#metrics tr.metric").count() == 4
    assert "reward/solved" in page.locator("#metrics").inner_text()
    assert page.locator(".metric-chart svg polyline").count() == 2  # reward/solved and loss over steps


def test_playground_plays_a_stack_with_untrusted_contract_code(page, server) -> None:
    page.goto(f"{server}/playground")
    page.fill("#task", "medium/1,2,6,6")
    page.locator("#start").click()
    expect(page.locator("#seen")).not_to_be_empty()
    assert "Numbers: [0] 1, [1] 2, [2] 6, [3] 6" in page.locator("#seen").inner_text()
    assert page.locator("button.tool").count() == 3
    page.locator("button.tool", has_text="combine").click()
    expect(page.locator("#toolform .pname")).to_have_text(["i *", "j *", "op *"])  # the tool's form
    page.fill("#action", "combine i=0 j=1 op=div")
    page.locator("#step").click()
    page.wait_for_selector("li.logline")
    assert "division is disabled in this world" in page.locator("#seen").inner_text()
    assert "blocked" in page.locator("li.logline").first.inner_text()
    for line in ("combine i=0 j=1 op=add", "combine i=2 j=0 op=mul", "combine i=0 j=1 op=add", "stop"):
        page.fill("#action", line)
        page.locator("#step").click()
    expect(page.locator("#verdict p.ok")).to_contain_text("success")
    shot(page, "playground")
    page.locator("#check").click()
    expect(page.locator("#error.ok")).to_contain_text("spec ok: ")  # the spec id, shown as good news
    page.fill("#spec", "bridge: toy24\nlayers:\n  - kind: contract\n    code: |\n      def oops(:\n")
    page.locator("#check").click()
    expect(page.locator("#error")).not_to_be_empty()
    assert "syntax" in page.locator("#error").inner_text().lower()
    page.fill("#spec", "bridge: toy24\nlayers:\n  - kind: stagee\n")
    page.locator("#check").click()
    expect(page.locator("#error")).to_contain_text("stagee")
    expect(page.locator("#gutter div.marked")).to_have_text(["3"])  # the layer's line
    # the editor as the README shows it: a problem marked on its line, completion open
    page.fill("#spec", "bridge: toy24\nlayers:\n  - kind: budget\n    max_steps: 3\n    max_step: 4\n"
                       "  - kind: chain\n    legs: [{bridge: toy24}]\n    ")
    expect(page.locator("#gutter div.marked")).to_have_text(["5"])
    expect(page.locator("#error")).to_be_empty()  # the check's verdict went with the text it was about
    page.locator("#spec").focus()
    page.keyboard.press("Control+End")
    page.keyboard.press("Control+Space")
    expect(page.locator("#completions li .label")).to_have_text(["id", "mode", "carry", "leg_tasks"])
    shot(page, "editor")
    # saving downloads exactly the editor's text (the app itself writes no file)
    page.fill("#savename", "my/world.yaml")
    with page.expect_download() as download:
        page.locator("#save").click()
    saved = download.value
    assert saved.suggested_filename == "my_world.yaml"
    assert Path(saved.path()).read_text() == page.input_value("#spec")


def test_nothing_outside_the_run_dirs_is_readable_and_runs_stay_unchanged(page, server, run_dirs) -> None:
    before = hashlib.sha256((run_dirs[0] / "trajectories.sqlite").read_bytes()).hexdigest()
    for path in ("/file/0/..%2f..%2fetc%2fpasswd", "/file/0/%2e%2e", "/file/0/secret.txt",
                 "/file/0/trajectories.sqlite", "/file/7/report.md", "/traj/5/1", "/file/0/..%2fbig%2freport.md"):
        assert fetch(page, server + path)[0] == 404, path
    page.goto(f"{server}/run/0?id={'x' * 10}")
    assert page.locator("tr.episode").count() == 0
    assert hashlib.sha256((run_dirs[0] / "trajectories.sqlite").read_bytes()).hexdigest() == before


def test_envh_ui_refuses_a_missing_directory(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", "ui", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    assert shutil.which("chromium") or Path(CHROMIUM).exists()


def test_every_page_sends_the_csp_and_still_works_under_it(page, server) -> None:
    """Each page loads with its scripts and stylesheet from static files: the page fixture
    fails the test on any CSP violation or script error, and the styles are applied."""
    paths = ["/", f"/run/0?id={BIG_RUN.replace('&', '%26').replace('#', '%23').replace('?', '%3F')}",
             "/traj/0/1", "/compare/0/1/2", "/rig/0", "/training/0", "/playground", "/static/envh.css",
             "/static/editor.js", "/file/0/report.md", "/no/such/page", "/traj/0/99999999"]
    for path in paths:
        response = page.goto(server + path)
        assert response is not None and response.headers["content-security-policy"] == CSP, path
    page.goto(server + "/playground")
    expect(page.locator("nav")).to_have_css("background-color", "rgb(36, 52, 71)")  # envh.css is in force
    page.wait_for_selector("#gutter div")  # editor.js ran: the gutter has its line numbers
    for api in ("/api/spec/schema",):
        assert fetch(page, server + api)[1]["content-security-policy"] == CSP


def test_an_injected_inline_script_does_not_run(browser, server) -> None:
    """Markup that slipped into a page (here: added to the served HTML on its way to the
    browser) cannot run script: the header forbids inline script and handlers. The same
    injection without the header runs, so the check can see a failure."""
    payload = ("<script>document.title='pwned'</script>"
               "<img id='inj' src='/static/envh.css' onerror=\"document.title='pwned-handler'\">")

    def inject(keep_csp: bool):
        def handler(route) -> None:
            # Playwright's own client does not resolve *.localhost: the same request, to the address
            name = route.request.url.split("//")[1].split(":")[0]
            response = route.fetch(url=route.request.url.replace(name, "127.0.0.1", 1))
            headers = dict(response.headers)
            if not keep_csp:
                headers.pop("content-security-policy", None)
            route.fulfill(response=response, headers=headers,
                          body=response.text().replace("<main>", "<main>" + payload, 1))
        return handler

    titles = {}
    for keep in (True, False):
        context = browser.new_context()
        p = context.new_page()
        p.goto(f"{server}/?token=t0k3n")
        p.route("**/playground", inject(keep))
        p.goto(f"{server}/playground")
        p.wait_for_selector("#inj")
        p.wait_for_timeout(300)
        titles[keep] = p.title()
        if keep:  # a script element added later with inline code is refused as well
            with contextlib.suppress(sync_api.Error):
                p.add_script_tag(content="document.title = 'pwned-later'")
            p.wait_for_timeout(200)
            assert p.title() == titles[keep]
        context.close()
    assert titles[True] == "Playground · envh"
    assert titles[False].startswith("pwned")


def test_script_inside_a_served_svg_does_not_run(browser, server, watch) -> None:
    context = browser.new_context()
    p = context.new_page()
    problems = watch(p)
    p.goto(f"{server}/?token=t0k3n")
    response = p.goto(f"{server}/file/1/plot.svg")
    assert response is not None and response.headers["content-security-policy"] == CSP
    assert response.headers["content-type"].startswith("image/svg+xml")
    p.wait_for_timeout(200)
    assert p.locator("svg").get_attribute("data-ran") is None
    assert any("Content Security Policy" in m for m in problems)  # refused, not merely absent
    context.close()


def _quiet_page(browser, server, width: int) -> tuple[sync_api.BrowserContext, sync_api.Page, list[str]]:
    """A page ``width`` px wide that collects every console error and failed response."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(30_000)
    p = context.new_page()
    problems: list[str] = []
    p.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    p.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    p.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    p.goto(f"{server}/?token=t0k3n")
    return context, p, problems


def _overflow(page) -> int:
    """How many px the document is wider than the window (0: no horizontal scrolling)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


@pytest.mark.parametrize("width", [1400, 1000])
def test_every_page_fits_the_window_with_no_console_error_or_failed_request(browser, server, width: int) -> None:
    context, p, problems = _quiet_page(browser, server, width)
    small = p.locator("tr.run a").first.get_attribute("href")
    big = p.locator("tr.run a").nth(1).get_attribute("href")
    paths = ["/", small, big, f"{small}&outcome=success", "/traj/0/1", "/traj/0/1?page=3", "/compare/0/1/2",
             "/compare/0/1/1?bd=1", "/rig/0", "/rig/1", "/training/0", "/training/1", "/playground"]
    wide = {}
    for path in paths:
        p.goto(server + path)
        p.wait_for_load_state("load")
        wide[path] = _overflow(p)
    assert {path: px for path, px in wide.items() if px > 0} == {}
    assert problems == []  # a favicon's 404 included
    # the playground in play: a game reset, a tool's form open, a blocked step logged
    p.fill("#task", "medium/1,2,6,6")
    p.locator("#start").click()
    p.locator("button.tool", has_text="combine").click()
    p.locator("#toolform input[name=i]").fill("0")
    p.locator("#toolform input[name=j]").fill("1")
    p.locator("#toolform select[name=op]").select_option(label="div")
    p.locator("#toolform button[type=submit]").click()
    p.wait_for_selector("li.logline .badge")
    wide["/playground (playing)"] = _overflow(p)
    context.close()
    assert {path: px for path, px in wide.items() if px > 0} == {}
    assert problems == []
