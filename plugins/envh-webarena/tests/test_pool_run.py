"""The three web bridges through the project's front door: ``envh run`` with its default
executor (the pool) and, under root, its default fence (``user``: workers are ``nobody`` in
their own mount and PID namespaces, with only their declared data bound back).

Each bridge plays a scripted policy whose element ids were read from the same pages in this
process first; the data a worker needs (scripts, WebShop's files, WebArena's config files and
login states) sits in pytest's root-only temporary directory, the realistic case. A worker
killed mid-episode takes its browser and Playwright's driver with it, and the pool's retry
plays the episode to the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from envh import Action, TaskRef, make
from envh.rollout.store import TrajectoryStore
from envh_webarena.axtree import find_bid

ENVH = str(Path(sys.executable).with_name("envh"))
FENCED = os.geteuid() == 0  # the pool's default isolation is `user` only under root
WORKER = b"envh.rollout.executors.worker"


def envh_run(spec: str, out: Path, *args: str, timeout: float = 240,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``envh run SPEC --out OUT ARGS`` with the default executor and isolation."""
    cmd = [ENVH, "run", spec, "--out", str(out), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                          env=None if env is None else {**os.environ, **env})


def played(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def episodes(out: Path) -> list[dict[str, Any]]:
    """The run's episode rows, read back through envh's own store, with their trajectories."""
    with TrajectoryStore(out) as store:
        rows = store.rows()
        trajectories = {t.key: t for t in store.query()}
    for row in rows:
        row["trajectory"] = trajectories[row["key"]]
    return rows


def lost_attempts(out: Path) -> list[Any]:
    """The attempts lost with a worker (their trajectories)."""
    with TrajectoryStore(out) as store:
        return list(store.query(kind="attempt"))


def check_ran_in_pool(out: Path, rows: list[dict[str, Any]]) -> None:
    with TrajectoryStore(out) as store:
        config = store.manifest(store.runs()[0])["config"]
    assert config["executor"] == "pool"
    assert config["isolation"] == ("user" if FENCED else "none")
    pids = {str(row["trajectory"].worker) for row in rows}
    assert all(p.split(":")[-1].isdigit() and int(p.split(":")[-1]) != os.getpid() for p in pids), pids


def write_script(path: Path, script: dict[str, list[str]]) -> str:
    path.write_text(json.dumps(script), encoding="utf-8")
    return str(path)


def private_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    d = tmp_path_factory.mktemp(name)
    os.chmod(d, 0o700)  # only root may read it: a fenced worker gets it only by declaration
    return d


def click_call(bid: str) -> str:
    return f"click({json.dumps(bid)})"


# -- MiniWoB -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def miniwob_bids() -> dict[str, str]:
    """The button ids of click-test and click-test-2 for seeds 0 and 1, read in this process."""
    found: dict[str, set[str]] = {"click-test": set(), "click-test-2 right": set(), "click-test-2 wrong": set()}
    with make({"bridge": "miniwob", "config": {"tasks": ["click-test", "click-test-2"]}}) as env:
        for seed in (0, 1):
            obs = env.reset(task=TaskRef(suite="miniwob", split="default", instance_id="click-test"), seed=seed).observation
            found["click-test"].add(find_bid(obs.text, "button", "Click Me!"))
            obs = env.reset(task=TaskRef(suite="miniwob", split="default", instance_id="click-test-2"),
                            seed=seed).observation
            right = obs.data["goal"].removeprefix("Click button ").rstrip(".")
            wrong = {"ONE": "TWO", "TWO": "ONE"}[right]
            found["click-test-2 right"].add(find_bid(obs.text, "button", right))
            found["click-test-2 wrong"].add(find_bid(obs.text, "button", wrong))
    assert all(len(v) == 1 for v in found.values()), found  # one script serves both seeds
    return {k: v.pop() for k, v in found.items()}


@pytest.fixture(scope="module")
def miniwob_run(tmp_path_factory, miniwob_bids) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """click-test solved and click-test-2 answered wrong, k=2 each, two workers."""
    private = private_dir(tmp_path_factory, "miniwob-pool")
    script = write_script(private / "script.json", {
        "miniwob/default/click-test": [click_call(miniwob_bids["click-test"])],
        "miniwob/default/click-test-2": [click_call(miniwob_bids["click-test-2 wrong"])]})
    out = private / "run"
    proc = envh_run("miniwob", out, "--task", "click-test", "--task", "click-test-2", "-k", "2",
                    "--workers", "2", "--policy", f"scripted:{script}")
    return out, proc


def test_miniwob_scripted_policy_solves_through_the_pool(miniwob_run) -> None:
    out, proc = miniwob_run
    assert proc.returncode == 0, played(proc)
    rows = episodes(out)
    check_ran_in_pool(out, rows)
    solved = [r for r in rows if r["instance_id"] == "click-test"]
    assert sorted(r["seed"] for r in solved) == [0, 1]
    for row in solved:
        assert row["error_class"] is None, row["trajectory"].error
        assert row["success"] == 1 and row["score"] == 1.0 and row["steps"] == 1
        assert row["trajectory"].verdict.metrics["done"] is True
    assert not lost_attempts(out)


def test_miniwob_wrong_action_fails_through_the_pool(miniwob_run) -> None:
    out, _ = miniwob_run
    wrong = [r for r in episodes(out) if r["instance_id"] == "click-test-2"]
    assert len(wrong) == 2
    for row in wrong:
        assert row["error_class"] is None, row["trajectory"].error  # played: the task said no
        verdict = row["trajectory"].verdict
        assert row["success"] == 0 and verdict.metrics["done"] is True and verdict.metrics["raw_reward"] < 0


def test_envh_show_reads_the_run(miniwob_run) -> None:
    out, _ = miniwob_run
    shown = subprocess.run([ENVH, "show", "--json", str(out)], capture_output=True, text=True, timeout=60, check=True)
    summary = json.loads(shown.stdout)[0]
    assert (summary["episodes"], summary["successes"]) == (4, 2)
    assert summary["errors"] == {"policy_error": 0, "env_error": 0, "infra_error": 0, "timeout": 0}


# -- WebShop -------------------------------------------------------------------------------
def act_call(action: str) -> str:
    return f"act({json.dumps(action)})"


@pytest.fixture(scope="module")
def webshop(tmp_path_factory) -> dict[str, Any]:
    """The demo catalogue in a root-only folder, and the scripts: in text mode a buyer of the
    T-shirt's goal and a near miss on the bottle's; in browser mode the T-shirt's buyer, its
    element ids read by playing it in this process."""
    from envh_webarena.demo.webshop_catalogue import write_catalogue
    from envh_webarena.webshop import reward
    from envh_webarena.webshop.bridge import make_webshop

    private = private_dir(tmp_path_factory, "webshop-pool")
    data = str(write_catalogue(private / "data"))
    reward.noun_extractor.cache_clear()
    text = make_webshop(mode="text", data=data)
    # the shop paid the reward's imports (spaCy: 1-3 s) when it loaded: the first Buy Now
    # in a worker timed out waiting for its done page
    assert reward.noun_extractor.cache_info().currsize == 1
    goals = text.site.catalogue.goals
    text.close()
    index = {g["asin"]: i for i, g in enumerate(goals)}
    shirt, bottle = goals[index["B0TSHIRT01"]], goals[index["B0BOTTLE04"]]
    assert bottle["goal_options"] == ["green", "32 oz"]
    near_miss = ["black", "32 oz"]

    def plan(goal: dict[str, Any], options: list[str]) -> list[str]:
        return [act_call(a) for a in [f"search[{goal['query']}]", f"click[{goal['asin'].lower()}]",
                                      *[f"click[{o}]" for o in options], "click[buy now]"]]

    steps: list[Action] = []
    browser = make_webshop(mode="browser", data=data)
    try:
        def step(action: Action) -> Any:
            steps.append(action)
            return browser.step(action)

        obs = browser.reset(task=TaskRef(suite="webshop", split="test", instance_id=str(index["B0TSHIRT01"]))).observation
        step(Action(tool="fill", args={"bid": find_bid(obs.text, "textbox", "Search"), "value": shirt["query"]}))
        obs = step(Action(tool="click", args={"bid": find_bid(obs.text, "button", "Search")})).observation
        obs = step(Action(tool="click", args={"bid": find_bid(obs.text, "link", shirt["asin"])})).observation
        for option in shirt["goal_options"]:
            obs = step(Action(tool="click", args={"bid": find_bid(obs.text, "radio", option)})).observation
        assert step(Action(tool="click", args={"bid": find_bid(obs.text, "button", "Buy Now")})).terminated
        assert browser.evaluate().success
    finally:
        browser.close()
    return {"data": data, "private": private, "shirt": str(index["B0TSHIRT01"]),
            "bottle": str(index["B0BOTTLE04"]), "text": {
                f"webshop/test/{index['B0TSHIRT01']}": plan(shirt, shirt["goal_options"]),
                f"webshop/test/{index['B0BOTTLE04']}": plan(bottle, near_miss)},
            "browser": {f"webshop/test/{index['B0TSHIRT01']}": [{"tool": a.tool, "args": dict(a.args)} for a in steps]}}


@pytest.fixture(scope="module")
def webshop_text_run(webshop) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Text mode, the data named in the spec's config (``{data}``)."""
    script = write_script(webshop["private"] / "text.json", webshop["text"])
    spec = json.dumps({"bridge": "webshop", "config": {"mode": "text", "data": webshop["data"]}})
    out = webshop["private"] / "text-run"
    return out, envh_run(spec, out, "--task", f"test/{webshop['shirt']}", "--task", f"test/{webshop['bottle']}",
                         "--workers", "2", "--policy", f"scripted:{script}", "--data", webshop["data"])


@pytest.fixture(scope="module")
def webshop_browser_run(webshop) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Browser mode, the data named by ``WEBSHOP_DATA`` only (the spec has no data key)."""
    script = write_script(webshop["private"] / "browser.json", webshop["browser"])
    spec = json.dumps({"bridge": "webshop", "config": {"mode": "browser"}})
    out = webshop["private"] / "browser-run"
    return out, envh_run(spec, out, "--task", f"test/{webshop['shirt']}", "--workers", "1",
                         "--policy", f"scripted:{script}", env={"WEBSHOP_DATA": webshop["data"]})


def test_webshop_text_buyer_scores_one_through_the_pool(webshop, webshop_text_run) -> None:
    out, proc = webshop_text_run
    assert proc.returncode == 0, played(proc)
    rows = {r["instance_id"]: r for r in episodes(out)}
    check_ran_in_pool(out, list(rows.values()))
    bought = rows[webshop["shirt"]]
    assert bought["error_class"] is None, bought["trajectory"].error
    assert bought["success"] == 1 and bought["score"] == 1.0
    assert bought["trajectory"].verdict.metrics["asin"] == "B0TSHIRT01"
    missed = rows[webshop["bottle"]]
    assert missed["error_class"] is None, missed["trajectory"].error
    assert missed["success"] == 0 and 0 < missed["score"] < 1  # the right bottle, a wrong colour


def test_webshop_browser_buyer_scores_one_through_the_pool(webshop, webshop_browser_run) -> None:
    out, proc = webshop_browser_run
    assert proc.returncode == 0, played(proc)
    [row] = episodes(out)
    check_ran_in_pool(out, [row])
    assert row["error_class"] is None, row["trajectory"].error
    assert row["success"] == 1 and row["score"] == 1.0
    assert row["trajectory"].verdict.metrics["asin"] == "B0TSHIRT01"
    # every action worked: the first Buy Now of a worker does not wait on the reward's imports
    assert [s.error for s in row["trajectory"].steps] == [None] * len(webshop["browser"][f"webshop/test/{webshop['shirt']}"])


# -- WebArena ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def webarena(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """Two copies of the demo sites: one to read the order task's element ids on in this
    process, one the pool's workers play on; the task configs (WebArena's files) and the
    login states in root-only folders."""
    from envh_webarena.demo.sites import Forum, Shop
    from envh_webarena.demo.tasks import TASKS
    from envh_webarena.webarena.bridge import WebArenaEnv

    private = private_dir(tmp_path_factory, "webarena-pool")
    sites = [Shop(), Forum(), Shop(), Forum()]
    try:
        seen = WebArenaEnv(tasks=TASKS, sites={"shopping": sites[0].url, "reddit": sites[1].url},
                           auth_dir=str(private / "seen-auth"))
        try:
            obs = seen.reset(task=TaskRef(suite="webarena", split="test", instance_id="7")).observation
            add = find_bid(obs.text, "button", "Add to Cart")
            obs = seen.step(Action(tool="click", args={"bid": add})).observation
            order = find_bid(obs.text, "button", "Place Order")
            seen.step(Action(tool="click", args={"bid": order}))
            assert seen.evaluate().success
        finally:
            seen.close()
        (private / "config").mkdir()
        for task in TASKS:
            if task["task_id"] in (1, 7):
                (private / "config" / f"{task['task_id']}.json").write_text(json.dumps(task), encoding="utf-8")
        (private / "auth").mkdir(mode=0o700)
        yield {"private": private, "shop": sites[2], "urls": {"shopping": sites[2].url, "reddit": sites[3].url},
               "script": {"webarena/test/7": [click_call(add), click_call(order), "stop()"],
                          "webarena/test/1": ['stop("24.00")']}}  # the kettle costs 25.00
    finally:
        for site in sites:
            site.close()


@pytest.fixture(scope="module")
def webarena_run(webarena) -> tuple[Path, subprocess.CompletedProcess[str]]:
    private = webarena["private"]
    script = write_script(private / "script.json", webarena["script"])
    # the sites by WebArena's variables, as with the real containers: they reach the workers
    spec = json.dumps({"bridge": "webarena", "config": {
        "config_files": str(private / "config" / "*.json"), "auth_dir": str(private / "auth")}})
    out = private / "run"
    # k=2: the order task's two episodes log in at once, each in its worker, to one state file
    return out, envh_run(spec, out, "--task", "test/7", "--task", "test/1", "-k", "2", "--workers", "2",
                         "--policy", f"scripted:{script}", "--data", str(private / "config"), "--data",
                         str(private / "auth"),
                         env={"WA_SHOPPING": webarena["urls"]["shopping"], "WA_REDDIT": webarena["urls"]["reddit"]})


def test_webarena_order_task_solved_through_the_pool(webarena, webarena_run) -> None:
    out, proc = webarena_run
    assert proc.returncode == 0, played(proc)
    rows = episodes(out)
    check_ran_in_pool(out, rows)
    orders = [r for r in rows if r["instance_id"] == "7"]
    assert len(orders) == 2
    for order in orders:
        assert order["error_class"] is None, order["trajectory"].error
        assert order["success"] == 1 and order["score"] == 1.0
    # the workers reached this process's shop on 127.0.0.1, logged in and ordered there. Both
    # episodes are one customer, whose cart the shop keeps (as Magento does): when the two adds
    # come before either Place Order, the first order holds both mugs and the second finds the
    # cart empty; either way both mugs were ordered, by that customer
    shop = webarena["shop"]
    assert sorted(sku for o in shop.orders for sku in o["items"]) == ["red-mug", "red-mug"]
    assert {o["user"] for o in shop.orders} == {"emma.lopez@gmail.com"} and 1 <= len(shop.orders) <= 2
    # ... and wrote the login state into the root-only auth_dir they were given (rw), whole
    state = webarena["private"] / "auth" / ".auth"
    assert sorted(p.name for p in state.iterdir()) == ["shopping_state.json"]
    assert any(c.get("value") for c in json.loads((state / "shopping_state.json").read_text(encoding="utf-8"))["cookies"])
    for wrong in (r for r in rows if r["instance_id"] == "1"):
        assert wrong["error_class"] is None, wrong["trajectory"].error
        assert wrong["success"] == 0


# -- a worker killed mid-episode -------------------------------------------------------------
def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first), None when gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _argv(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def descendants(root: int) -> set[int]:
    """Every process below ``root``, whichever of its threads started it (Playwright's
    driver is started by the event loop's thread, which ``task/PID/children`` misses)."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        fields = _stat(int(name)) if name.isdigit() else None
        if fields:
            parent[int(name)] = int(fields[1])
    out, todo = set(), [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in out]
        out.update(kids)
        todo += kids
    return out


def running(pid: int, start: str) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (a zombie does not)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X") and fields[19] == start


def uid(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return int(next(line for line in f if line.startswith("Uid:")).split()[1])


def _cwd(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def find_playing_worker(run: subprocess.Popen[str], deadline: float) -> tuple[int, set[int]]:
    """The pool worker whose browser is up with a page open (the episode has begun): its
    pid, and its browser's main process. (Chromium's helpers rewrite their command line
    into one string: ``--type=`` is looked for inside it.)"""
    while time.monotonic() < deadline and run.poll() is None:
        for pid in descendants(run.pid):
            if WORKER not in _argv(pid)[1:3]:
                continue
            below = {p: b" ".join(_argv(p)) for p in descendants(pid)}
            browsers = {p for p, a in below.items() if b"--envh-runtime=" in a and b"--type=" not in a}
            if browsers and any(b"--type=renderer" in a for a in below.values()):
                return pid, browsers
        time.sleep(0.05)
    raise AssertionError(f"no worker with a browser appeared (run exit status {run.poll()})")


def family_of(worker: int) -> dict[int, str]:
    """What the worker started, as pid → start time: every process below it (Playwright's
    driver, the browser and its helpers) and those that left the tree but kept its working
    directory (Chromium's crash handlers daemonize)."""
    cwd = _cwd(worker)
    pids = descendants(worker) | {int(n) for n in os.listdir("/proc")
                                  if n.isdigit() and int(n) != worker and cwd and _cwd(int(n)) == cwd}
    return {p: f[19] for p in pids if (f := _stat(p)) is not None and f[0] not in ("Z", "X")}


@pytest.mark.slow
@pytest.mark.parametrize(("isolation", "orphaned"), [("default", False), ("none", False), ("none", True)],
                         ids=["fenced", "unfenced", "unfenced-pool-gone"])
def test_killed_worker_takes_its_browser_and_the_episode_is_replayed(tmp_path_factory, miniwob_bids,
                                                                      isolation, orphaned) -> None:
    """Fenced, the worker's PID namespace ends with it; unfenced, Chromium exits when its
    pipe to Playwright's driver closes, and the driver when the worker's pipe to it closes
    (or the pool kills the worker's process group). ``orphaned``: the pool itself was
    killed first, so nothing but those pipes is left to end them."""
    private = private_dir(tmp_path_factory, "miniwob-kill")
    # about 3 s of waiting before the click: time to find the worker and kill it mid-episode
    script = write_script(private / "script.json", {"miniwob/default/click-test": [
        "noop(1000)", "noop(1000)", "noop(1000)", click_call(miniwob_bids["click-test"])]})
    out = private / "run"
    cmd = [ENVH, "run", "miniwob", "--out", str(out), "--task", "click-test", "--workers", "1",
           "--policy", f"scripted:{script}", *(["--isolation", isolation] if isolation != "default" else [])]
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        worker, browsers = find_playing_worker(run, time.monotonic() + 60)
        if FENCED and isolation == "default":
            assert uid(worker) == 65534  # nobody, in the `user` fence
        started = family_of(worker)
        kinds = {p: b" ".join(_argv(p)) for p in started}
        assert browsers <= set(started) and any(b"run-driver" in a for a in kinds.values()), kinds
        if orphaned:
            run.kill()
            run.communicate()
        os.kill(worker, signal.SIGKILL)
        deadline = time.monotonic() + 10  # 0.03-0.6 s idle; slack for a loaded machine
        while time.monotonic() < deadline and any(running(p, s) for p, s in started.items()):
            time.sleep(0.05)
        left = {p: kinds[p][:150] for p, s in started.items() if running(p, s)}
        assert not left, f"still running 10 s after the worker was killed: {left}"
        if orphaned:
            return
        stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, f"{stdout[-2000:]}\n{stderr[-2000:]}"
    [row] = episodes(out)  # the pool's retry played it to the end
    assert row["error_class"] is None, row["trajectory"].error
    assert row["success"] == 1 and row["steps"] == 4 and row["retry"] == 0
    [lost] = lost_attempts(out)
    assert lost.error_class == "infra_error" and "SIGKILL" in str(lost.error), lost.error


def test_a_memory_cap_too_small_for_the_browser_says_so(tmp_path_factory) -> None:
    """Under ``--memory-mb 512`` Playwright's driver (node) dies at start: an infra_error
    naming the cap, not an env_error with Playwright's bare 'Connection closed'."""
    out = private_dir(tmp_path_factory, "miniwob-memory") / "run"
    proc = envh_run("miniwob", out, "--task", "click-test", "--policy", "random", "--memory-mb", "512")
    assert proc.returncode != 0, played(proc)  # every episode failed
    [row] = episodes(out)
    assert row["error_class"] == "infra_error", row["trajectory"].error
    assert "capped at 512 MiB" in str(row["trajectory"].error) and "--memory-mb" in str(row["trajectory"].error)
