"""What the secure default costs on real bridges: steps/s of each bridge bare vs under a
code contract (all three hooks, light work, no state read) built by ``envh.make(spec)``
with no trust (the jail: two IPC round trips a step, ``filter_action`` and then the other
two hooks together) and with
``trust="trusted"`` (in-process), over the same fixed actions.

Bridges, each on its real parts with this repository's local data (no network beyond
127.0.0.1); one whose parts are missing is skipped with the reason and ``null`` figures:

* alfworld: the TextWorld engine, games from envh-alfworld's builder, walkthroughs replayed;
* swebench: the mathx test image in Docker, a read-only ``bash`` command repeated;
* spreadsheetbench: envh-office's fixture workbooks, native list/inspect/find/write tools;
* officeqa: envh-office's fixture corpus, glob/grep/read;
* webshop: WebShop text mode over the demo catalogue, the scripted buyer replayed;
* miniwob: Chromium, ``enter-text`` filled and hovered;
* webarena: Chromium on the demo shop, a product link clicked and gone back from.

Variants are interleaved per episode (order rotated each repeat) and each episode's best
time over the repeats counts, so machine load hits all alike; the load average is printed
per bridge. Needs dockerd and the test images for swebench (``source dev/setup.d/docker.sh``),
Chromium for the web bridges (``dev/setup.d/browser.sh``).

Beside each bridge: the floor, a one-byte exchange with a plain Python child blocked on its
pipe, after as much host work as the bridge's bare step (no jail, no JSON, no hook), and
the ceiling it puts near: ``bare / (bare + 2 × median floor)``, about the most of the bare
steps/s a jail that sleeps between calls could keep on that bridge on this machine. (This
jail must sleep: it is stopped between calls, so nothing it left behind runs. A child
spinning on shared memory answers faster, but burns a CPU while the policy thinks.) An
estimate, not a bound: the median exchange against bare's best of repeats.

Last line: JSON with every figure; ``ratio`` = min over measured bridges of jailed ÷ bare
steps/s (the requirement: >= 0.95).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from envh import Action, TaskRef, grant, make

ROOT = Path(__file__).resolve().parents[1]
SUFFIX = " (step "
CODE = '''
def filter_action(action, state, memo):
    memo["n"] = memo.get("n", 0) + 1
    if action.tool == "rm_rf":
        return Block(reason="not on this bench")

def modify_transition(action, response, state, memo):
    if response.terminated:
        memo["ends"] = memo.get("ends", 0) + 1

def filter_observation(observation, state, memo):
    return observation.text + " (step " + str(memo.get("n", 0)) + ")"
'''
ROUND_TRIPS_PER_STEP = 2  # filter_action; then modify_transition and filter_observation together
MAX_REPEATS = 40


class Skip(Exception):
    """This bridge's real parts are missing here."""


class Case(NamedTuple):
    """A bridge spec (no layers) and the episodes to play: (task, seed, actions). With
    ``reset_each`` every timed episode starts with an (untimed) reset; without, each env
    is reset once and the actions repeat on the live episode (a container's reset is
    seconds)."""

    spec: dict[str, Any]
    episodes: Callable[[Any], list[tuple[TaskRef, int, list[Action]]]]  # given the bare env
    reset_each: bool = True


def A(tool: str, **args: Any) -> Action:  # noqa: N802 - reads like the action
    return Action(tool=tool, args=args)


# -- bridges ---------------------------------------------------------------------------------
def alfworld(tmp: Path, quick: bool) -> Case:
    try:
        from envh_alfworld.builder import build_games
        from envh_alfworld.sampling import sample_rooms
    except ImportError as exc:
        raise Skip(f"envh-alfworld not installed ({exc})") from None
    games = build_games(sample_rooms(2024, 2 if quick else 4), tmp / "alfworld")
    if not games:
        raise Skip("the builder made no game")
    eps = [(g.task, 0, [A("do", command=c) for c in g.walkthrough]) for g in games]
    return Case({"bridge": "alfworld", "config": {"data_path": str(tmp / "alfworld"), "max_steps": None}},
                lambda _env: eps)


def swebench(tmp: Path, quick: bool) -> Case:
    instances = ROOT / "plugins/envh-swebench/tests/images/mathx/instances.json"
    try:
        from envh_swebench import runtime
        from envh_swebench.instances import load_instances
        client = runtime.client()
    except Exception as exc:  # noqa: BLE001 - ImportError, InfraError: no daemon answers
        raise Skip(f"Docker unavailable ({exc!r}); source dev/setup.d/docker.sh") from None
    for inst in load_instances(str(instances)).values():
        if not runtime.image_exists(client, inst.image):
            raise Skip(f"image {inst.image} not built; source dev/setup.d/docker.sh")
    task = TaskRef(suite="swebench", split="test", instance_id="envh__mathx-1")
    cmd = A("bash", command="ls -la mathx && git log --oneline -1")
    chunks = [(task, 0, [cmd] * 3)] * (3 if quick else 5)  # short chunks: best-of finds quiet windows
    return Case({"bridge": "swebench", "config": {"instances": str(instances)}}, lambda _env: chunks,
                reset_each=False)


def _office_fixtures() -> Any:
    sys.path.insert(0, str(ROOT / "plugins/envh-office/tests"))
    try:
        import office_fixtures
    except ImportError as exc:
        raise Skip(f"envh-office or its fixtures missing ({exc})") from None
    finally:
        sys.path.pop(0)
    return office_fixtures


def spreadsheetbench(tmp: Path, quick: bool) -> Case:
    try:
        import envh_office.sheet_bridge  # noqa: F401
    except ImportError as exc:
        raise Skip(f"envh-office not installed ({exc})") from None
    data = _office_fixtures().write_sheet_dataset(tmp / "ssb")
    os.environ["ENVH_OFFICE_CACHE"] = str(tmp / "office-cache")
    task = TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-1")
    actions = [A("list_sheets"), A("inspect_range", range="Data!A1:D5"), A("find_cells", pattern="SUM"),
               A("write_range", range="Summary!C1", values="=SUM(Data!D2:D5)", fill_color="FFFF00"),
               A("inspect_range", range="Summary!A1:D5")] * (2 if quick else 3)
    return Case({"bridge": "spreadsheetbench", "config": {"data": str(data)}},
                lambda _env: [(task, 0, actions)])


def officeqa(tmp: Path, quick: bool) -> Case:
    import csv

    try:
        import envh_office.qa_bridge  # noqa: F401
    except ImportError as exc:
        raise Skip(f"envh-office not installed ({exc})") from None
    fx = _office_fixtures()
    root = tmp / "officeqa"
    fx.write_corpus(root / "corpus", fx.MONTHS)
    with open(root / "officeqa.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["uid", "question", "answer", "source_docs", "source_files", "difficulty"])
        w.writeheader()
        w.writerows(fx.QUESTIONS)
    (root / "splits.json").write_text(json.dumps({"train": ["UID0001"], "test": ["UID0002", "UID0003"]}))
    task = TaskRef(suite="officeqa", split="test", instance_id="UID0002")
    actions = [A("glob", pattern="transformed/treasury_bulletin_1977_*.txt"),
               A("grep", pattern="public debt limit", ignore_case=True),
               A("read", path="transformed/treasury_bulletin_1977_05.txt", limit=60)] * (3 if quick else 5)
    return Case({"bridge": "officeqa", "config": {"data": str(root), "corpus": str(root / "corpus"),
                                                  "split_manifest": str(root / "splits.json")}},
                lambda _env: [(task, 0, actions)])


def _web_parts() -> None:
    import importlib.util

    if not all(importlib.util.find_spec(m) for m in ("envh_webarena", "playwright", "miniwob", "bm25s", "rapidfuzz")):
        raise Skip("envh-webarena, playwright, miniwob, bm25s or rapidfuzz not installed: dev/setup.d/browser.sh")


def _chromium() -> None:
    _web_parts()
    path = os.environ.get("ENVH_CHROMIUM") or "/usr/bin/chromium"
    if not os.access(path, os.X_OK):
        raise Skip(f"Chromium not installed at {path}: dev/setup.d/browser.sh")


def webshop(tmp: Path, quick: bool) -> Case:
    _web_parts()
    from envh_webarena.demo.webshop_catalogue import write_catalogue

    data = write_catalogue(tmp / "webshop")

    def episodes(env: Any) -> list[tuple[TaskRef, int, list[Action]]]:
        goals = env.unwrapped.site.catalogue.goals
        out = []
        for i in range(2 if quick else 3):  # the test split: the first three goals
            g = goals[i]
            plan = [f"search[{g['query']}]", f"click[{g['asin'].lower()}]",
                    *[f"click[{o}]" for o in g["goal_options"]], "click[buy now]"]
            out.append((TaskRef(suite="webshop", split="test", instance_id=str(i)), 0,
                        [A("act", action=a) for a in plan]))
        return out

    return Case({"bridge": "webshop", "config": {"mode": "text", "data": str(data),
                                                 "split_ranges": {"test": [0, 3], "train": [3, None]}}}, episodes)


def miniwob(tmp: Path, quick: bool) -> Case:
    _chromium()
    from envh_webarena.axtree import find_bid

    def episodes(env: Any) -> list[tuple[TaskRef, int, list[Action]]]:
        task = TaskRef(suite="miniwob", instance_id="enter-text")
        obs = env.reset(task=task, seed=3).observation
        box, button = find_bid(obs.text, "textbox"), find_bid(obs.text, "button", "Submit")
        acts = [A("fill", bid=box, value="envh"), A("hover", bid=button), A("hover", bid=box)] * (2 if quick else 4)
        return [(task, 3, acts)]

    return Case({"bridge": "miniwob", "config": {"tasks": ["enter-text"], "max_steps": None}}, episodes)


_sites: list[Any] = []


def webarena(tmp: Path, quick: bool) -> Case:
    _chromium()
    from envh_webarena.axtree import find_bid
    from envh_webarena.demo.sites import Forum, Shop
    from envh_webarena.demo.tasks import TASKS

    shop, forum = Shop(), Forum()
    _sites.extend((shop, forum))
    task = TaskRef(suite="webarena", split="test", instance_id="1")

    def episodes(env: Any) -> list[tuple[TaskRef, int, list[Action]]]:
        obs = env.reset(task=task, seed=0).observation
        link = find_bid(obs.text, "link", "Blue Kettle")
        acts = [A("click", bid=link), A("go_back")] * (2 if quick else 4) + [A("stop", answer="25.00")]
        return [(task, 0, acts)]

    (tmp / "wa-auth").mkdir()
    return Case({"bridge": "webarena", "config": {
        "tasks": TASKS, "sites": {"shopping": shop.url, "reddit": forum.url},
        "auth_dir": str(tmp / "wa-auth"), "max_steps": None}}, episodes)


BRIDGES: dict[str, Callable[[Path, bool], Case]] = {
    "alfworld": alfworld, "swebench": swebench, "spreadsheetbench": spreadsheetbench, "officeqa": officeqa,
    "webshop": webshop, "miniwob": miniwob, "webarena": webarena}


# -- measuring -------------------------------------------------------------------------------
def _contract(env: Any) -> Any:
    while env is not None:
        if getattr(env, "kind", None) == "contract":
            return env
        env = getattr(env, "inner", None)
    raise AssertionError("no contract layer in the stack")


def _play(env: Any, task: TaskRef, seed: int, actions: list[Action], reset: bool, check: str | None = None) -> float:
    """Seconds spent in step() over ``actions``; ``check`` says what to assert per step."""
    if reset:
        env.reset(task=task, seed=seed)
    total = 0.0
    for action in actions:
        t0 = time.perf_counter()
        resp = env.step(action)
        total += time.perf_counter() - t0
        if check == "ok":
            assert not resp.info.get("error"), f"{action}: {resp.observation.text[:300]}"
        elif check == "contract":
            assert SUFFIX in resp.observation.text[-20:], "the contract's filter_observation did not run"
    return total


@contextlib.contextmanager
def _envs(case: Case) -> Iterator[dict[str, Any]]:
    stacked = {**case.spec, "layers": [{"kind": "contract", "code": CODE}]}
    envs: dict[str, Any] = {}
    try:
        envs["bare"] = make(case.spec)
        envs["jailed"] = make(stacked)  # the secure default: no trust given
        envs["trusted"] = make(stacked, trust="trusted")
        jailed, trusted = _contract(envs["jailed"]), _contract(envs["trusted"])
        assert jailed.trust == "untrusted" and jailed._jail is not None, "the default did not jail the contract"
        assert trusted.trust == "trusted" and trusted.sandbox is not None
        yield envs
    finally:
        for env in envs.values():
            env.close()


def measure(case: Case, repeats: int, budget_s: float) -> dict[str, Any]:
    """Best-of-repeats ms/step per variant; at least ``repeats`` rounds, more while a round
    is cheap enough to fit ``budget_s`` (sub-millisecond steps need many to beat noise)."""
    with _envs(case) as envs:
        episodes = case.episodes(envs["bare"])
        steps = sum(len(acts) for _, _, acts in episodes)
        round_s = 0.0
        for name, env in envs.items():  # warm every path, and check the actions are valid
            for i, (task, seed, acts) in enumerate(episodes):
                t0 = time.perf_counter()
                s = _play(env, task, seed, acts, case.reset_each or i == 0, "ok" if name == "bare" else "contract")
                round_s += time.perf_counter() - t0 if case.reset_each else s
        repeats = max(repeats, min(MAX_REPEATS, int(budget_s / max(round_s, 1e-3))))
        times: dict[str, list[list[float]]] = {name: [[] for _ in episodes] for name in envs}
        order = list(envs)
        for r in range(repeats):
            for i, (task, seed, acts) in enumerate(episodes):
                for name in order[r % 3:] + order[:r % 3]:  # rotated: no variant always runs first
                    times[name][i].append(_play(envs[name], task, seed, acts, case.reset_each))
    # best of repeats per episode (the headline), and the median as a check on it
    ms = {name: sum(min(t) for t in ts) / steps * 1e3 for name, ts in times.items()}
    med = {name: sum(statistics.median(t) for t in ts) / steps * 1e3 for name, ts in times.items()}
    return {"steps": steps, "repeats": repeats, "ms_per_step": ms, "median_ms_per_step": med,
            "ratio_jailed": ms["bare"] / ms["jailed"], "ratio_trusted": ms["bare"] / ms["trusted"],
            "median_ratio_jailed": med["bare"] / med["jailed"],
            "trip_us": (ms["jailed"] - ms["trusted"]) * 1e3 / ROUND_TRIPS_PER_STEP}


def round_trip_us(calls: int) -> dict[str, float]:
    """One jail hook call on its own: filter_action with a small action, no state."""
    from envh.jail import Jail, wire

    jail = Jail()
    try:
        program = jail.load(CODE, ("filter_action", "modify_transition", "filter_observation"),
                            time_limit=0.25, max_ops=200_000)
        arg = [wire.encode(A("do", command="look"))]
        memo: dict[str, Any] = {}
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            _, memo = jail.call(program, "filter_action", arg, None, memo, 0.25)
            times.append(time.perf_counter() - t0)
        jail.unload(program)
    finally:
        jail.close()
    return {"median_us": statistics.median(times) * 1e6, "min_us": min(times) * 1e6}


FLOOR_CHILD = """
import os
while True:
    b = os.read(0, 1)
    if not b:
        break
    os.write(1, b)
"""


def _host_work(us: float) -> None:
    """About ``us`` µs of host work that allocates, as a bridge's step does (it leaves the
    caches as a step leaves them)."""
    end = time.perf_counter() + us / 1e6
    junk = []
    while time.perf_counter() < end:
        junk.append(bytearray(1024))


def pipe_floor_us(calls: int, gap_us: float = 0.0) -> dict[str, float]:
    """What a process boundary with a sleeping child costs at least: one byte to a plain
    Python child blocked on its pipe and one byte back (no bubblewrap, no limits, no JSON,
    no SIGSTOP, no hook), the host spinning for the answer as the jail's host does
    (``SPIN_S``), each exchange after ``gap_us`` µs of host work (a bridge's step: the
    child has slept that long). Two of these a step put near what a jail that sleeps between
    calls can keep of a bridge's steps/s: ``bare / (bare + 2 × floor)``."""
    import subprocess

    from envh.jail.process import SPIN_S
    from envh.jail.wire import _spin  # the jail host's own wait for an answer

    proc = subprocess.Popen([sys.executable, "-S", "-c", FLOOR_CHILD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    wfd, rfd = proc.stdin.fileno(), proc.stdout.fileno()
    times = []
    try:
        for _ in range(calls):
            if gap_us:
                _host_work(gap_us)
            t0 = time.perf_counter()
            os.write(wfd, b"x")
            _spin(rfd, SPIN_S)
            if os.read(rfd, 1) != b"x":
                raise AssertionError("the floor child did not echo")
            times.append(time.perf_counter() - t0)
    finally:
        proc.stdin.close()
        proc.wait(5)
    return {"median_us": statistics.median(times) * 1e6, "min_us": min(times) * 1e6}


def _load() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer steps and repeats (about a minute)")
    p.add_argument("--repeats", type=int, default=None,
                   help="least repeats per episode and variant (default 5; quick 2); cheap bridges get more")
    p.add_argument("--bridges", default=",".join(BRIDGES), help="comma-separated subset of: " + ", ".join(BRIDGES))
    args = p.parse_args()
    repeats = args.repeats or (2 if args.quick else 5)
    names = [n.strip() for n in args.bridges.split(",") if n.strip()]
    unknown = [n for n in names if n not in BRIDGES]
    if unknown:
        p.error(f"unknown bridge(s) {', '.join(unknown)}; choose from {', '.join(BRIDGES)}")
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    print(f"load average at start: {_load()} ({os.cpu_count()} CPUs)", flush=True)
    rt = round_trip_us(200 if args.quick else 1000)
    print(f"jail round trip, one hook call alone: median {rt['median_us']:.0f} µs (min {rt['min_us']:.0f} µs)",
          flush=True)
    results: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    tmp = Path(tempfile.mkdtemp(prefix="envh-jail-cost-"))
    grant(tmp)  # the fixtures the specs name: this process wrote them
    try:
        for name in names:
            t0 = time.perf_counter()
            try:
                case = BRIDGES[name](tmp, args.quick)
                results[name] = res = measure(case, repeats, 4.0 if args.quick else 30.0)
                bare_ms = res["ms_per_step"]["bare"]
                res["floor"] = floor = pipe_floor_us(max(20, min(400, int(2000 / max(bare_ms, 0.1)))), bare_ms * 1e3)
                res["ceiling"] = bare_ms / (bare_ms + ROUND_TRIPS_PER_STEP * floor["median_us"] / 1e3)
            except Skip as exc:
                skipped[name] = str(exc)
                print(f"{name:>16}: skipped: {exc}", flush=True)
                continue
            ms = res["ms_per_step"]
            print(f"{name:>16}: bare {ms['bare']:8.2f}  jailed {ms['jailed']:8.2f}  trusted {ms['trusted']:8.2f} "
                  f"ms/step   jailed÷bare steps/s {res['ratio_jailed']:.3f} (median {res['median_ratio_jailed']:.3f})  "
                  f"trusted÷bare {res['ratio_trusted']:.3f}"
                  f"   per round trip {res['trip_us']:+.0f} µs   ({res['steps']} steps × best of {res['repeats']}; "
                  f"{time.perf_counter() - t0:.0f} s; load {_load()})", flush=True)
            print(f"{'':>16}  floor: a 1-byte exchange with a sleeping child after a step's work "
                  f"{res['floor']['median_us']:.0f} µs (min {res['floor']['min_us']:.0f}): a jail that sleeps "
                  f"between calls keeps about {res['ceiling']:.3f} of bare steps/s at most", flush=True)
    finally:
        with contextlib.suppress(Exception):
            from envh_webarena.runtime import close_shared_runtimes

            close_shared_runtimes()
        for site in _sites:
            site.close()
        with contextlib.suppress(Exception):
            from envh_office import recalc

            recalc._stop_warm()
        shutil.rmtree(tmp, ignore_errors=True)
    ratio = min((r["ratio_jailed"] for r in results.values()), default=None)
    print(f"load average at end: {_load()}; {time.perf_counter() - t_start:.0f} s in all")
    if ratio is not None:
        worst = min(results, key=lambda n: results[n]["ratio_jailed"])
        print(f"worst jailed÷bare steps/s: {ratio:.3f} ({worst}); target >= 0.95")

    def r(v: float) -> float:
        return round(v, 3)

    def figures(res: dict[str, Any]) -> dict[str, Any]:
        ms = res["ms_per_step"]
        return {"bare_ms_per_step": r(ms["bare"]), "jailed_ms_per_step": r(ms["jailed"]),
                "trusted_ms_per_step": r(ms["trusted"]), "ratio_jailed": r(res["ratio_jailed"]),
                "median_ratio_jailed": r(res["median_ratio_jailed"]), "ratio_trusted": r(res["ratio_trusted"]),
                "round_trip_us": round(res["trip_us"], 1),
                "floor_round_trip_us": round(res["floor"]["median_us"], 1), "ceiling": r(res["ceiling"]),
                "steps": res["steps"], "repeats": res["repeats"]}

    per = {name: figures(results[name]) if name in results else None for name in names}
    print(json.dumps({"bench": "jail_cost", "ratio": None if ratio is None else r(ratio), "bridges": per,
                      "skipped": skipped, "jail_round_trip_us": round(rt["median_us"], 1),
                      "jail_round_trip_us_min": round(rt["min_us"], 1), "quick": args.quick,
                      "loadavg_start": [round(x, 2) for x in load_start],
                      "loadavg_end": [round(x, 2) for x in os.getloadavg()]}))


if __name__ == "__main__":
    main()
