"""The compare page in Chromium: two runs' episodes of the same task (one run's stack
blocks division and adds a hint, the other's has no layers) side by side, aligned by step,
the words that differ marked, the layers' effects as badges, no horizontal overflow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from envh.rollout.store import TrajectoryStore
from envh_ui.app import create_app
from envh_ui.compare import badge, word_diff

TOKEN = "c0mp4re-t0k3n"
LAYERED = """bridge: toy24
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
SCRIPT = {"1,2,6,6": ["combine(0, 1, div)", "combine(0, 1, add)", "combine(0, 1, mul)", "stop()"],
          "*": ["combine(0, 1, mul)", "stop()"]}
TASK = "toy24/medium/1,2,6,6"


def _run(base: Path, name: str, spec: str) -> Path:
    (base / f"{name}.yaml").write_text(spec)
    subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", "run", str(base / f"{name}.yaml"),
                    "--split", "medium", "--policy", f"scripted:{base / 'script.json'}", "--executor", "inline",
                    "--out", str(base / name)], cwd=base, check=True, capture_output=True, text=True, timeout=300)
    return base / name


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    base = tmp_path_factory.mktemp("compare")
    (base / "script.json").write_text(json.dumps(SCRIPT))
    return [_run(base, "layered", LAYERED), _run(base, "plain", "bridge: toy24\nlayers: []\n")]


def _seq(run: Path, task: str) -> int:
    with TrajectoryStore(run) as store:
        (seq,) = [s for (s,) in store.db.execute("SELECT seq FROM trajectories WHERE task = ? AND kind = 'episode'",
                                                  (task,))]
        return int(seq)


@pytest.fixture(scope="module")
def server(dirs, serve):
    with serve(create_app(dirs, token=TOKEN), named=True) as url:
        yield url


@pytest.fixture
def page(browser, server, watch):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(30_000)
    p = context.new_page()
    problems = watch(p)
    p.goto(f"{server}/?token={TOKEN}")
    yield p
    context.close()
    assert problems == []


def _open(page, server, dirs) -> None:
    """From the layered run's episode, its task in the plain run, through the page's form."""
    page.goto(f"{server}/traj/0/{_seq(dirs[0], TASK)}")
    form = page.locator("form.compare-with")
    options = form.locator("option").evaluate_all("els => els.map(e => e.value)")
    form.locator("select").select_option(next(v for v in options if v.startswith("1:")))
    form.locator("button").click()
    page.wait_for_url(f"**/compare/0/{_seq(dirs[0], TASK)}/{_seq(dirs[1], TASK)}?bd=1")


def test_two_runs_on_one_task_are_aligned_by_step_and_diffed(page, server, dirs) -> None:
    _open(page, server, dirs)
    assert TASK in page.locator("#left table.meta").inner_text() and TASK in page.locator("#right table.meta").inner_text()
    assert "Same task" in page.locator("main").inner_text()
    rows = page.locator("#pairs tr.pair[data-step]")
    assert rows.locator("td.n").all_inner_texts() == ["0", "1", "2", "3"]
    first = rows.nth(0).locator("td.side")
    # step 0: the same proposal; on the left the contract blocked it, on the right 1 / 2 was made
    assert "combine(" in first.nth(0).locator("code").inner_text()
    assert first.nth(0).locator(".tag.blocked").inner_text() == "blocked: division is disabled in this world"
    assert first.nth(1).locator(".tag.blocked").count() == 0
    left_only = " ".join(first.nth(0).locator("pre.seen mark.del").all_inner_texts())
    right_only = " ".join(first.nth(1).locator("pre.seen mark.ins").all_inner_texts())
    assert "Hint:" in left_only and "Hint" not in right_only and right_only.strip()
    second = rows.nth(1).locator("td.side")  # 6, 6, 3 on the left; 1/2, 12 on the right
    assert second.nth(0).locator("mark.del").all_inner_texts()[0].startswith("6,")
    assert "1/2" in " ".join(second.nth(1).locator("mark.ins").all_inner_texts())
    shared = "".join(second.nth(0).locator("mark").all_inner_texts()) + "".join(
        second.nth(1).locator("mark").all_inner_texts())
    assert "Target" not in shared and "Numbers:" not in shared and "Combine" not in shared  # the same words: unmarked
    badge = first.nth(0).locator(".badge.blocked")
    assert badge.inner_text() == "contract: blocked “division is disabled in this world” · changed the observation"
    assert "{" not in page.locator("#pairs .badges").first.inner_text()  # words, not JSON
    assert first.nth(1).locator(".badge").count() == 0  # no layers on the right
    page.locator("#only-differ").check()  # every step differs here: all rows stay
    assert page.locator("#pairs tr.pair[data-step]:visible").count() == 4


def test_rows_that_are_the_same_can_be_hidden(page, server, dirs) -> None:
    seq = _seq(dirs[1], TASK)  # an episode beside itself: every row is the same
    page.goto(f"{server}/compare/1/{seq}/{seq}")
    rows = page.locator("#pairs tr.pair")
    assert rows.count() == 5 and page.locator("#pairs tr.pair.same").count() == 5
    assert page.locator("#pairs mark").count() == 0
    page.locator("#only-differ").check()
    assert page.locator("#pairs tr.pair:visible").count() == 0


def test_word_diff_marks_only_the_words_one_side_lacks() -> None:
    left, right = word_diff("Numbers: [0] 6, [1] 3 <b>", "Numbers: [0] 6, [1] 4 <b>")
    assert left == "Numbers: [0] 6, [1] <mark class='del'>3</mark> &lt;b&gt;"
    assert right == "Numbers: [0] 6, [1] <mark class='ins'>4</mark> &lt;b&gt;"
    long = "x " * 5000  # past the token bound: shown, unmarked
    assert word_diff(long, long + "y") == (long, long + "y")


def test_a_layer_effect_reads_as_words() -> None:
    rewrite = badge({"layer": "1:budget", "kind": "budget", "action": "rewritten", "transition": True,
                     "observation": False, "sent": {"tool": "stop", "args": {}}})
    assert ">budget: rewritten · → stop() · changed the transition</span>" in rewrite and "class='badge rewritten'" in rewrite
    quiet = badge({"layer": "0:contract", "kind": "contract", "action": "passed", "transition": False,
                   "observation": False})
    assert ">contract: passed</span>" in quiet and "class='badge quiet'" in quiet
    named = badge({"layer": "hints", "kind": "contract", "action": "passed", "observation": True, "note": "<i>"})
    assert ">contract (hints): changed the observation · note: &lt;i&gt;</span>" in named


def test_the_compare_page_does_not_overflow(page, server, dirs) -> None:
    with TrajectoryStore(dirs[0]) as store:  # two episodes of one run, then two runs' on one task
        first, second = [s for (s,) in store.db.execute("SELECT seq FROM trajectories WHERE kind = 'episode' LIMIT 2")]
    for path in (f"/compare/0/{first}/{second}", f"/compare/0/{_seq(dirs[0], TASK)}/{_seq(dirs[1], TASK)}?bd=1"):
        for width in (1400, 1000):
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(server + path)
            assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, (path, width)
        assert page.locator("#pairs").count() == 1


def test_the_same_task_in_another_run_or_a_clear_404(page, server, dirs) -> None:
    with TrajectoryStore(dirs[1]) as store:
        run_id = store.runs()[0]
    ask = "async u => { const r = await fetch(u); return [r.status, new URL(r.url).pathname + new URL(r.url).search]; }"
    where = f"{server}/compare-task/0/{_seq(dirs[0], TASK)}?with=1:"
    assert page.evaluate(ask, where + run_id) == [200, f"/compare/0/{_seq(dirs[0], TASK)}/{_seq(dirs[1], TASK)}?bd=1"]
    assert page.evaluate(ask, where + run_id + "-not-here")[0] == 404
