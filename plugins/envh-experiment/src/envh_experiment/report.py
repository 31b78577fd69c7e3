"""The report of an experiment folder: ``root/report.md``, its PNG plots (``PLOTS``), and the numbers behind them.

``summary(root)`` computes every number the report shows as plain JSON-able data (the CLI prints
it, the README table is made from it); ``build_report(root)`` writes the markdown and the plots
from that summary. It reads whatever exists: a run still going or killed is reported as it
stands and named as incomplete, and a missing file is an absence, never a crash.

"Final" is the largest eval step a run has whose file covers every held-out task. A compare
pair (a, b) pairs outcomes by (seed, task) at the largest eval step past 0 both seeds' runs
have, and gives the mean difference with Newcombe's 95 % interval for a difference of paired
proportions (hybrid score, built on Wilson intervals; it stays honest where every pair
agrees, where a t interval collapses to a point).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import yaml
from envh.rollout import wilson
from scipy import stats

TARGET = 0.10  # a compare pair meets the target at a difference >= this with the interval's low end above 0
RIG_ARM = "rigged"  # the arm whose cost includes the rig's (rig/summary.json)
PLOTS = {"heldout": ("heldout_success.png", "held-out success (greedy)"),
         "train_reward": ("train_reward.png", "training reward"),
         "train_success": ("train_success.png", "training success (the worlds trained on)"),
         "nonzero_adv": ("nonzero_adv.png", "groups with non-zero advantage"),
         "success_signal": ("success_signal.png", "groups with mixed verdicts")}
METHOD = ("mean of paired differences a - b of held-out success over (seed, task) pairs, each seed at the "
          "largest eval step past 0 that both its runs have; Newcombe's 95 % hybrid score interval for a difference "
          "of paired proportions (method 10, built on Wilson intervals; it does not collapse to a point when every "
          "pair agrees, as a t interval does). It treats the pairs as independent, so seed-to-seed spread is only "
          "partly in it: "
          "the per-seed means are shown beside it.")
COST_KEYS = ("steps", "episodes", "gen_tokens", "policy_tokens", "step_s", "wall_s")


@attrs.frozen(kw_only=True)
class _Run:
    """What one (arm, seed) folder holds: the last training row per step and complete held-out evals."""

    status: str  # "done" | "incomplete" | "missing"
    train: dict[int, dict[str, Any]]
    outcomes: dict[int, dict[str, bool]]  # eval step -> held-out task -> success
    partial: tuple[int, ...]  # eval steps whose file lacks some held-out task (left out)
    done: dict[str, Any] | None
    shared: tuple[int, ...] = ()  # eval steps read from the shared baseline (the same episodes in every run)


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    rows = [_json_line(line) for line in lines]
    return [r for r in rows if isinstance(r, dict)]


def _json_line(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:  # a killed writer can leave half a line
        return None


def _read_run(root: Path, arm: str, seed: int, tasks: dict[str, str]) -> _Run:
    folder = root / "arms" / arm / f"seed-{seed}"
    if not folder.is_dir():
        return _Run(status="missing", train={}, outcomes={}, partial=(), done=None)
    shared = ()
    # a resumed run may log a step twice: the last row wins
    train = {r["step"]: r for r in _jsonl(folder / "metrics.jsonl") if isinstance(r.get("step"), int) and "reward" in r}
    files = {int(p.stem[5:]): p for p in folder.glob("eval/step-*.jsonl") if p.stem[5:].isdigit()}
    if 0 not in files and (root / "baseline/eval/step-0.jsonl").is_file():
        files[0] = root / "baseline/eval/step-0.jsonl"  # the untrained model, greedy: the same for every run
        shared = (0,)
    outcomes, partial = {}, []
    for step, path in sorted(files.items()):
        got = {str(r["task"]): bool(r.get("success")) for r in _jsonl(path) if "task" in r}
        if tasks:
            got = {t: ok for t, ok in got.items() if t in tasks}
        if got and len(got) >= len(tasks):
            outcomes[step] = got
        else:
            partial.append(step)
    done = _json(folder / "done.json")
    return _Run(status="incomplete" if done is None else "done", train=train, outcomes=outcomes,
                partial=tuple(partial), done=done, shared=shared)


def _rate_over_tasks(per_seed: list[dict[str, bool]], tasks: dict[str, str], cls: str | None) -> dict[str, Any]:
    """An arm's success over its seeds: the counts pooled, the interval over the distinct
    tasks (each task's mean over the seeds, Wilson with n = tasks): seeds replay the same
    tasks, so the tasks are the population, not tasks x seeds."""
    picked = [{t: ok for t, ok in o.items() if cls is None or tasks.get(t, "?") == cls} for o in per_seed]
    pooled = _rate([ok for o in picked for ok in o.values()])
    by_task: dict[str, list[bool]] = {}
    for o in picked:
        for t, ok in o.items():
            by_task.setdefault(t, []).append(ok)
    n = len(by_task)
    if not n:
        return {**pooled, "tasks": 0}
    rate = sum(sum(v) / len(v) for v in by_task.values()) / n
    low, high = wilson(rate * n, n)  # type: ignore[arg-type] - the score interval of a mean of task rates
    return {**pooled, "rate": rate, "low": low, "high": high, "tasks": n}


def _rate(outcomes: list[bool]) -> dict[str, Any]:
    k, n = sum(outcomes), len(outcomes)
    low, high = wilson(k, n)
    return {"successes": k, "n": n, "rate": k / n if n else None, "low": low if n else None, "high": high if n else None}


def _mean_interval(values: list[float]) -> dict[str, Any]:
    """Mean with a 95 % t interval (none under two values)."""
    n = len(values)
    mean = sum(values) / n if n else None
    if n < 2:
        return {"n": n, "mean": mean, "low": None, "high": None}
    half = float(stats.t.ppf(0.975, n - 1) * stats.sem(values))
    return {"n": n, "mean": mean, "low": mean - half, "high": mean + half}


def _pick(outcomes: dict[str, bool], tasks: dict[str, str], cls: str | None) -> list[bool]:
    return [ok for t, ok in outcomes.items() if cls is None or tasks.get(t, "?") == cls]


def _paired(a: dict[int, _Run], b: dict[int, _Run], tasks: dict[str, str], cls: str | None) -> dict[str, Any]:
    both: list[tuple[bool, bool]] = []
    steps, seed_means, seed_lows = {}, {}, {}
    for seed in sorted(a.keys() & b.keys()):
        common = [s for s in set(a[seed].outcomes) & set(b[seed].outcomes) if s > 0]
        if not common:
            continue
        step = max(common)
        oa, ob = a[seed].outcomes[step], b[seed].outcomes[step]
        d = [(oa[t], ob[t]) for t in oa if t in ob and (cls is None or tasks.get(t, "?") == cls)]
        if d:
            steps[str(seed)], seed_means[str(seed)] = step, sum(int(x) - int(y) for x, y in d) / len(d)
            seed_lows[str(seed)] = newcombe_paired(d)["low"]
            both += d
    out = newcombe_paired(both)
    return {"pairs": out.pop("n"), **out, "steps": steps, "seed_means": seed_means, "seed_lows": seed_lows}


def meets_target(p: dict[str, Any], seeds: int) -> bool:
    """The decision rule (its error rates: ``bench/experiment_rule.py``): the pooled
    difference is at least ``TARGET``, the pooled interval is above 0, and so is each
    seed's own interval, every seed paired. Each seed is a separate training run, and the
    pooled interval treats all pairs as independent: alone it calls a same-method comparison
    a win 27 % of the time at a run-to-run spread of 1 logit (96 tasks, 2 seeds); the rule
    does 10 % of the time there, 3 % at 0.5 logit, 0 % at 0 (the bench prints each class
    and the power: more seeds are what lowers the first figure)."""
    lows = list(p["seed_lows"].values())
    return (p["low"] is not None and p["mean"] >= TARGET - 1e-12 and p["low"] > 0 and len(lows) == seeds
            and all(x is not None and x > 0 for x in lows))


def newcombe_paired(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """Difference of two paired proportions with Newcombe's hybrid score interval (95 %,
    method 10 of Newcombe 1998): the Wilson intervals of both margins, combined with the
    pairs' correlation. ``pairs`` are (a succeeded, b succeeded)."""
    n = len(pairs)
    if n == 0:
        return {"n": 0, "mean": None, "low": None, "high": None}
    both = sum(1 for x, y in pairs if x and y)
    only_a = sum(1 for x, y in pairs if x and not y)
    only_b = sum(1 for x, y in pairs if y and not x)
    neither = n - both - only_a - only_b
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    l1, u1 = wilson(both + only_a, n)
    l2, u2 = wilson(both + only_b, n)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / margins ** 0.5 if margins else 0.0
    delta = max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0) ** 0.5
    eps = max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0) ** 0.5
    theta = p1 - p2
    return {"n": n, "mean": theta, "low": max(theta - delta, -1.0), "high": min(theta + eps, 1.0)}


def _curve(runs: dict[int, _Run], key: str) -> list[dict[str, Any]]:
    """A training metric per step: the seeds' values, their mean and a t interval over them."""
    values = {str(seed): {s: row[key] for s, row in r.train.items() if row.get(key) is not None}
              for seed, r in runs.items()}
    points = []
    for step in sorted({s for v in values.values() for s in v}):
        per_seed = {seed: v[step] for seed, v in values.items() if step in v}
        points.append({"step": step, **_mean_interval(list(per_seed.values())), "seeds": per_seed})
    return points


def _heldout_curve(runs: dict[int, _Run]) -> list[dict[str, Any]]:
    """Held-out success per eval step: pooled over the seeds that have the step, and each seed's rate."""
    steps = sorted({s for r in runs.values() for s in r.outcomes})
    points = []
    for step in steps:
        own = [r for r in runs.values() if step in r.outcomes and step not in r.shared]
        once = [r for r in runs.values() if step in r.shared][:1]  # the shared baseline counts once
        pooled = [ok for r in own + once for ok in r.outcomes[step].values()]
        seeds = {str(seed): _rate(list(r.outcomes[step].values()))["rate"] for seed, r in runs.items()
                 if step in r.outcomes}
        rate = _rate(pooled)  # Wilson on successes pooled over seeds x tasks
        points.append({"step": step, "mean": rate.pop("rate"), **rate, "seeds": seeds})
    return points


def _distinct_tasks(root: Path, arm: str, seed: int, exp: dict[str, Any]) -> int | None:
    """Distinct tasks a run trained on: the curriculum's draws from its audit log, else the
    training tasks (the rigged arm plays them in its harnesses)."""
    audit = root / "arms" / arm / f"seed-{seed}" / "curriculum.jsonl"
    if audit.exists():
        return len({r.get("task") for r in _jsonl(audit) if r.get("type") == "group"})
    ids = ((exp.get("config") or {}).get("train_tasks") or {}).get("ids")
    return len(ids) if isinstance(ids, list) else None


def _cost(run: _Run) -> dict[str, Any]:
    def total(key: str) -> Any:
        return sum(r.get(key) or 0 for r in run.train.values())

    return {"steps": len(run.train), "episodes": total("episodes"), "gen_tokens": total("gen_tokens"),
            "policy_tokens": total("policy_tokens"), "step_s": float(total("time/step_s")),
            "wall_s": float(run.done["wall_s"]) if run.done and "wall_s" in run.done else None}


def _add(costs: list[dict[str, Any]]) -> dict[str, Any]:
    """Summed cost; the wall time only when every run has one (a partial sum would read as the arm's)."""
    walls = [c["wall_s"] for c in costs]
    tasks = [c.get("distinct_tasks") for c in costs]
    return {**{k: sum(c[k] for c in costs) for k in COST_KEYS[:-1]},
            "wall_s": sum(walls) if walls and None not in walls else None,
            "distinct_tasks": max((t for t in tasks if t is not None), default=None)}


def summary(root: Path) -> dict[str, Any]:
    """Every number the report shows, as JSON-able data (seed keys are strings)."""
    root = Path(root)
    exp = _json(root / "experiment.json") or {}
    held = (_json(root / "heldout.json") or {}).get("tasks") or []
    tasks = {str(t["id"]): str(t.get("class", "?")) for t in held if isinstance(t, dict) and "id" in t}
    arms = list(exp.get("arms") or sorted(p.name for p in (root / "arms").glob("*") if p.is_dir()))
    seeds = [int(s) for s in exp.get("seeds") or sorted({int(p.name[5:]) for p in (root / "arms").glob("*/seed-*")
                                                         if p.name[5:].isdigit()})]
    runs = {arm: {seed: _read_run(root, arm, seed, tasks) for seed in seeds} for arm in arms}
    seen = {t for rs in runs.values() for r in rs.values() for o in r.outcomes.values() for t in o}
    classes = sorted(set(tasks.values()) | {tasks.get(t, "?") for t in seen})
    baseline = exp.get("baseline_arm") or (arms[0] if arms else None)
    compare = [list(p) for p in exp.get("compare") or [[a, baseline] for a in arms if a != baseline]]

    out: dict[str, Any] = {
        "name": exp.get("name") or root.name, "config_hash": exp.get("config_hash"), "fixed_at": exp.get("fixed_at"),
        "machine": exp.get("machine") or {}, "arms": arms, "seeds": seeds, "baseline_arm": baseline,
        "heldout": {"tasks": len(tasks), "classes": {c: sum(v == c for v in tasks.values()) for c in classes}},
        "runs": {}, "final": {}, "compare": [], "curves": {}, "cost": {}, "incomplete": []}
    for arm, rs in runs.items():
        out["runs"][arm], finals = {}, {}
        for seed, r in rs.items():
            step = max(r.outcomes, default=None)
            final = r.outcomes.get(step, {}) if step is not None else {}
            out["runs"][arm][str(seed)] = {
                "status": r.status, "train_steps": max(r.train, default=0), "eval_steps": sorted(r.outcomes),
                "partial_eval_steps": list(r.partial), "final_step": step, **_rate(list(final.values())),
                "by_class": {c: _rate(_pick(final, tasks, c)) for c in classes}}
            if step is not None:
                finals[seed] = final
            if r.status != "done":
                why = ("no folder" if r.status == "missing" else
                       f"no done.json; last training step {max(r.train, default=0)}, last eval step {step}")
                out["incomplete"].append(f"{arm}/seed-{seed}: {r.status} ({why})")
            for s in r.partial:
                out["incomplete"].append(f"{arm}/seed-{seed}: eval step {s} lacks some held-out tasks (left out)")
        out["final"][arm] = {**_rate_over_tasks(list(finals.values()), tasks, None),
                             "final_steps": {str(s): max(rs[s].outcomes) for s in finals},
                             "by_class": {c: _rate_over_tasks(list(finals.values()), tasks, c) for c in classes}}
        if len(set(out["final"][arm]["final_steps"].values())) > 1:
            out["incomplete"].append(f"{arm}: runs ended at different eval steps ("
                                     + _steps(out["final"][arm]["final_steps"]) + ")")
        out["curves"][arm] = {
            "heldout": _heldout_curve(rs),
            "train_reward": _curve(rs, "reward"), "train_success": _curve(rs, "success"),
            "nonzero_adv": _curve(rs, "groups/nonzero_adv"), "success_signal": _curve(rs, "groups/success_signal")}
        costs = {str(seed): {**_cost(r), "distinct_tasks": _distinct_tasks(root, arm, seed, exp)}
                 for seed, r in rs.items()}
        out["cost"][arm] = {"seeds": costs, "total": _add(list(costs.values()))}
    rig = _json(root / "rig/summary.json")
    out["rig"] = {k: rig.get(k) for k in ("seconds", "rollouts", "tokens", "accepted", "tasks")} if rig else None
    out["rig_included"] = None
    if rig and RIG_ARM in out["cost"]:  # rig rollouts count as episodes, its tokens as generated, its time as time
        total, extra = out["cost"][RIG_ARM]["total"], {"episodes": "rollouts", "step_s": "seconds", "wall_s": "seconds"}
        out["rig_included"] = {**total, "arm": RIG_ARM, **{k: None if total[k] is None else total[k] + (rig.get(v) or 0)
                                                           for k, v in extra.items()}}
    train_cfg = (exp.get("config") or {}).get("train") or {}
    last_step = train_cfg.get("steps") if isinstance(train_cfg.get("steps"), int) else None
    out["rig_dropped"] = list((rig or {}).get("dropped") or [])
    for a, b in compare:  # an arm not in "arms" has no runs, hence no pairs
        p = _paired(runs.get(a, {}), runs.get(b, {}), tasks, None)
        finished = all(r.status == "done" for arm in (a, b) for r in runs.get(arm, {}).values())
        # decided: every run finished, every seed paired at the schedule's last step (whole files),
        # and at least two seeds (the rule's per-seed condition means nothing with one)
        p["decided"] = bool(finished and p["pairs"] and len(seeds) >= 2 and len(p["steps"]) == len(seeds)
                            and set(p["steps"].values()) == {last_step if last_step else max(p["steps"].values())})
        p["meets_target"] = p["decided"] and meets_target(p, len(seeds))
        p["by_class"] = {c: _paired(runs.get(a, {}), runs.get(b, {}), tasks, c) for c in classes}
        out["compare"].append({"a": a, "b": b, **p})
    out["verdict"] = _verdict(out)
    return out


def _verdict(s: dict[str, Any]) -> str:
    parts = []
    for c in s["compare"]:
        name = f"{c['a']} − {c['b']}"
        if c["pairs"] == 0 or c["low"] is None:
            parts.append(f"{name}: no (seed, task) pairs evaluated past step 0 in both arms yet: undecided.")
            continue
        lows = ", ".join(f"seed {k} {_f(v, '+.3f')}" for k, v in c["seed_lows"].items())
        said = (("meets" if c["meets_target"] else "does not meet") if c["decided"] else
                "cannot yet be judged against")
        parts.append(f"{name}: final held-out success differs by {c['mean']:+.3f} (95 % interval "
                     f"{c['low']:+.3f} to {c['high']:+.3f} over {c['pairs']} (seed, task) pairs; each seed's "
                     f"interval starts at {lows}), so it {said} the target (a difference ≥ {TARGET:.2f} with the "
                     f"pooled interval and every seed's interval above 0"
                     + ("" if c["decided"] else ": some runs are unfinished or unpaired at the final step") + ").")
        if len(set(c["steps"].values())) > 1:
            parts.append(f"Its seeds are paired at different eval steps ({_steps(c['steps'])}).")
    if not parts:
        parts.append("No arms to compare.")
    runs = [r for arm in s["runs"].values() for r in arm.values()]
    if any(r["status"] != "done" for r in runs):
        parts.append(f"{sum(r['status'] != 'done' for r in runs)} of {len(runs)} runs are incomplete or missing, "
                     f"so these numbers are provisional.")
    return " ".join(parts)


def _steps(by_seed: dict[str, int]) -> str:
    return ", ".join(f"seed {seed} at step {step}" for seed, step in by_seed.items())


def _f(x: float | None, spec: str = ".2f") -> str:
    return "–" if x is None else format(x, spec)


def _cell(r: dict[str, Any]) -> str:
    return "–" if not r["n"] else f"{r['rate']:.2f} [{r['low']:.2f}, {r['high']:.2f}] ({r['successes']}/{r['n']})"


def markdown_table(summary: dict[str, Any]) -> str:
    """The final held-out success table: each seed, the arm pooled (95 % Wilson), and per class."""
    seeds, classes = summary["seeds"], list(summary["heldout"]["classes"])
    lines = ["| arm | final step | " + " | ".join(f"seed {s}" for s in seeds) + " | pooled [95 % Wilson] | "
             + " | ".join(classes) + " |", "|---" * (3 + len(seeds) + len(classes)) + "|"]
    for arm, fin in summary["final"].items():
        runs = summary["runs"][arm]
        per_seed = [f"{runs[str(s)]['rate']:.2f} ({runs[str(s)]['successes']}/{runs[str(s)]['n']})"
                    if runs[str(s)]["n"] else "–" for s in seeds]
        steps = ", ".join(str(v) for v in sorted(set(fin["final_steps"].values()))) or "–"
        lines.append(f"| {arm} | {steps} | " + " | ".join(per_seed) + f" | {_cell(fin)} | "
                     + " | ".join(_cell(fin["by_class"][c]) for c in classes) + " |")
    return "\n".join(lines)


def _plots(root: Path, s: dict[str, Any]) -> None:
    from matplotlib.figure import Figure  # no pyplot: no global state, PNGs are drawn with Agg
    from matplotlib.ticker import MaxNLocator

    for key, (file, label) in PLOTS.items():
        fig = Figure(figsize=(7, 4.2), layout="constrained")
        ax = fig.add_subplot()
        drawn = False
        for i, arm in enumerate(s["arms"]):
            points = [p for p in s["curves"][arm][key] if p["mean"] is not None]
            if not points:
                continue
            color, steps = f"C{i % 10}", [p["step"] for p in points]
            for seed in s["seeds"]:
                mine = [(p["step"], p["seeds"][str(seed)]) for p in points if p["seeds"].get(str(seed)) is not None]
                ax.plot([x for x, _ in mine], [y for _, y in mine], color=color, lw=0.8, alpha=0.5)
            ax.plot(steps, [p["mean"] for p in points], color=color, lw=2, marker="o", ms=3, label=arm)
            band = [p for p in points if p["low"] is not None]
            lo, hi = (float("-inf"), float("inf")) if key == "train_reward" else (0.0, 1.0)  # shares stay in [0, 1]
            if band:
                ax.fill_between([p["step"] for p in band], [max(lo, p["low"]) for p in band],
                                [min(hi, p["high"]) for p in band], color=color, alpha=0.18, lw=0)
            drawn = True
        if drawn:
            ax.legend()
        else:
            ax.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=ax.transAxes)
        if key != "train_reward":  # rates and shares
            ax.set_ylim(-0.03, 1.03)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(label)
        ax.set_title(f"{label}: mean over seeds with a 95 % band; thin lines, one per seed", fontsize=9)
        fig.savefig(root / file, dpi=90)


def _cost_row(label: str, c: dict[str, Any]) -> str:
    tasks = c.get("distinct_tasks")
    return (f"| {label} | {c['steps']} | {c['episodes']} | {'–' if tasks is None else tasks} | {c['gen_tokens']} | "
            f"{c['policy_tokens']} | {c['step_s']:.0f} | {_f(c['wall_s'], '.0f')} |")


def _first_eval(root: Path) -> str:
    """When the first held-out outcome was written (files' times): settings fixed before it
    were not chosen by looking at held-out results."""
    import datetime

    files = list(root.glob("baseline/eval/step-*.jsonl")) + list(root.glob("arms/*/seed-*/eval/step-*.jsonl"))
    if not files:
        return "– (none yet)"
    first = min(f.stat().st_mtime for f in files)
    return datetime.datetime.fromtimestamp(first, datetime.UTC).isoformat(timespec="seconds")


def build_report(root: Path) -> Path:
    """Write ``root/report.md`` and its plots beside it; returns the report's path."""
    root = Path(root)
    s = summary(root)
    _plots(root, s)
    m = s["machine"]
    load = ", ".join(_f(x) if isinstance(x, int | float) else str(x) for x in m.get("load_start") or []) or "?"
    per_class = ", ".join(f"{n} {c}" for c, n in s["heldout"]["classes"].items()) or "none"
    lines = [f"# Experiment report: {s['name']}", "",
             f"Config hash `{s['config_hash']}`, settings fixed at {s['fixed_at']}, first held-out evaluation "
             f"written at {_first_eval(root)}. Machine: {m.get('cpus', '?')} "
             f"CPUs, {m.get('platform', '?')}, load at start {load}. Arms: {', '.join(s['arms']) or 'none'}; "
             f"seeds: {', '.join(map(str, s['seeds'])) or 'none'}; held-out tasks: {s['heldout']['tasks']} "
             f"({per_class}).", "", f"**Verdict.** {s['verdict']}", ""]
    lines += ["## Incomplete runs", ""] + ([f"- {x}" for x in s["incomplete"]] or ["All runs finished."]) + [""]
    reused = (_json(root / "experiment.json") or {}).get("reused") or {}
    if reused:
        lines += ["## Reused results", "", "Copied by `--reuse` from an earlier experiment whose settings for them "
                  "were the same (equal run keys in experiment.json); their cost rows are that run's.", ""]
        lines += [f"- {name}: from `{r.get('from')}` (config hash `{r.get('config_hash')}`, settings fixed at "
                  f"{r.get('fixed_at', '?')}, machine: {(r.get('machine') or {}).get('cpus', '?')} CPUs, "
                  f"{(r.get('machine') or {}).get('platform', '?')}, load at start "
                  f"{', '.join(map(str, (r.get('machine') or {}).get('load_start') or [])) or '?'})"
                  for name, r in sorted(reused.items())] + [""]
    lines += ["## Final held-out success", "",
              "Each run at its largest eval step; the arm's rate is the mean over its distinct tasks of each "
              "task's mean over the seeds, with a 95 % Wilson interval over the tasks (the seeds replay the same "
              "tasks: the tasks are the population); counts pooled over seeds × tasks; per held-out class on "
              "the right.", "", markdown_table(s), ""]
    lines += ["## Paired differences", "", f"Method: {METHOD}", "",
              "| a − b | class | pairs | step per seed | difference | 95 % interval | per-seed means | "
              "meets target |", "|---|---|---|---|---|---|---|---|"]
    for c in s["compare"]:
        for cls, p in [("all", c), *c["by_class"].items()]:
            if not p["pairs"]:
                lines.append(f"| {c['a']} − {c['b']} | {cls} | 0 | – | no pairs | – | – | – |")
                continue
            seed_means = ", ".join(f"{k}: {v:+.2f}" for k, v in p["seed_means"].items())
            steps = ", ".join(f"{k}: {v}" for k, v in p["steps"].items())  # seed: step
            meets = ("yes" if c["meets_target"] else "no") if cls == "all" else ""
            lines.append(f"| {c['a']} − {c['b']} | {cls} | {p['pairs']} | {steps} | {p['mean']:+.3f} | "
                         f"{_f(p['low'], '+.3f')} to {_f(p['high'], '+.3f')} | {seed_means} | {meets} |")
    lines += ["", "## Learning curves", ""] + [f"![{label}]({file})" for file, label in PLOTS.values()] + [""]
    lines += ["Held-out: pooled over seeds × tasks at each step, 95 % Wilson band. Training curves: mean over "
              "seeds, 95 % t band over the seeds' values where at least two have the step; thin lines, one per "
              "seed. Training success is measured on the worlds each arm trains on (a rigged world is easier by "
              "design), so only the held-out curve compares arms. Non-zero advantage: groups whose total rewards "
              "differ (the cost-aware reward's format terms make most groups differ); mixed verdicts: groups in "
              "which some rollouts solved the task and some did not, the verifier's own signal.", "",
              "## Cost", "",
              "Training rows only (the last row per step); step time is the sum of time/step_s, wall is "
              "done.json's wall_s (– while a run, or for a total any run, is unfinished).", "",
              "| arm / seed | optimizer steps | episodes | distinct tasks | generated tokens | policy tokens | "
              "step time (s) | wall (s) |", "|---|---|---|---|---|---|---|---|"]
    for arm, cost in s["cost"].items():
        lines += [_cost_row(f"{arm} / seed {seed}", c) for seed, c in cost["seeds"].items()]
        lines.append(_cost_row(f"**{arm} total**", cost["total"]))
    if s["rig"]:
        r = s["rig"]
        lines += ["", f"Rig (rig/summary.json): {_f(r['seconds'], '.0f')} s, {r['rollouts']} rollouts, "
                      f"{r['tokens']} designer LLM tokens (its policy rollouts' tokens are not counted by envh rig), "
                      f"{r['accepted']} accepted of {r['tasks']} tasks."]
        lines += [f"- left out (the rigged arm plays that task as it is): {d}" for d in s["rig_dropped"]]
    if s["rig_included"]:
        lines += ["", "| arm | optimizer steps | episodes (+ rig rollouts) | distinct tasks | generated tokens | "
                      "policy tokens | step time (+ rig s) | wall (+ rig s) |", "|---|---|---|---|---|---|---|---|",
                  _cost_row(f"{s['rig_included']['arm']} incl. rig", s["rig_included"])]
    config = (_json(root / "experiment.json") or {}).get("config")
    lines += ["", "## Settings", ""] + (["```yaml", yaml.safe_dump(config, sort_keys=False).rstrip(), "```"]
                                        if config is not None else ["experiment.json holds no config."]) + [""]
    path = root / "report.md"
    path.write_text("\n".join(lines))
    return path
