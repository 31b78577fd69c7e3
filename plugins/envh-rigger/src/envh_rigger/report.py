"""The report of a rig run: ``OUT/report.md`` and PNG plots (matplotlib, Agg backend).

It speaks the target's language: the metric the target names (success rate, or mean
steps), its band, the validator's decision per round with the posterior mass of each
region and the validator's stated error rates, each candidate's layers (the rendered
spec) and rationale, and in the header the policy, designer, spec and seed.

``metric_per_round.png``: per task, the metric of the baseline (round 0) and of each
validated candidate with its 95 % interval (Wilson for rates, t for means), against the
band. ``rollouts.png``: where rollouts went (observation vs validation of accepted and
rejected candidates; candidates stopped by the free cascade cost none).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from envh import TaskRef

from . import differs
from .budget import Usage
from .journal import Journal
from .stats import ALPHA_RIG, LiftTest, SequentialValidator, round_alpha, wilson
from .targets import Target

PLOT = "metric_per_round.png"


def _task_rows(journal: Journal, key: str) -> dict[str, Any]:
    events = journal.events(key)
    # one observation per observed spec: a resumed run that re-records one does not count twice
    observations = list({e["spec_id"]: e for e in events if e["kind"] == "baseline"}.values())
    attempts = list({(e["attempt"]["round"], e["attempt"].get("spec_id"), json.dumps(e["attempt"]["layers"],
                                                                                       sort_keys=True)): e["attempt"]
                     for e in events if e["kind"] == "attempt"}.values())
    accepted = [e for e in events if e["kind"] == "accepted"]
    baseline = next((e for e in events if e["kind"] == "baseline"), None)
    return {"baseline": baseline, "observations": observations, "attempts": attempts, "accepted": accepted}


def _value(stats: dict[str, Any], target: Target) -> tuple[float, tuple[float, float]]:
    if target.metric == "weakness_rate":
        bites, n = int(stats.get("weakness_bites", 0)), int(stats["n"])
        return float(stats.get("weakness_rate", 0.0)), wilson(bites, n)
    if target.binary:
        return float(stats["success_rate"]), tuple(stats["interval"])  # type: ignore[return-value]
    mean = float(stats["mean_steps"])
    lo, hi = stats.get("steps_interval") or [None, None]
    return mean, (mean if lo is None or not math.isfinite(lo) else lo, mean if hi is None or not math.isfinite(hi) else hi)


def _plots(out: Path, rows: dict[str, dict[str, Any]], target: Target) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made: list[str] = []
    keys = [k for k, r in rows.items() if r["baseline"]]
    if not keys:
        return made
    label = {"success_rate": "success rate", "mean_steps": "mean steps",
             "weakness_rate": "weakness rate"}[target.metric]
    cols = min(3, len(keys))
    nrows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    for ax, key in zip(axes.flat, keys, strict=False):
        r = rows[key]
        base = r["baseline"]
        lo, hi = base["band"]
        ax.axhspan(lo, hi, color="tab:green", alpha=0.15, label="target band")
        y, iv = _value(base["stats"], target)
        pts = [(0, y, iv, "tab:gray")]
        for a in r["attempts"]:
            res = a.get("result")
            if res:
                y, iv = _value(res, target)
                pts.append((a["round"], y, iv, "tab:green" if a["verdict"] == "accepted" else "tab:red"))
        for x, y, (ilo, ihi), color in pts:
            ax.errorbar([x], [y], yerr=[[max(0.0, y - ilo)], [max(0.0, ihi - y)]], fmt="o", color=color, capsize=3)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color="tab:blue", alpha=0.4)
        ax.set_title(key, fontsize=9)
        if target.binary:
            ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("round (0 = baseline)")
        ax.set_ylabel(label)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.suptitle(f"{label} per round vs {target}")
    fig.tight_layout()
    fig.savefig(out / PLOT, dpi=90)
    plt.close(fig)
    made.append(PLOT)

    obs, acc, rej = [], [], []
    for key in keys:
        r = rows[key]
        obs.append(sum(e["stats"]["n"] for e in r["observations"]))
        acc.append(sum(a["result"]["n"] for a in r["attempts"] if a.get("result") and a["verdict"] == "accepted"))
        rej.append(sum(a["result"]["n"] for a in r["attempts"] if a.get("result") and a["verdict"] != "accepted"))
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(keys) + 2), 3.5))
    xs = range(len(keys))
    ax.bar(xs, obs, label="observe", color="tab:gray")
    ax.bar(xs, acc, bottom=obs, label="validate (accepted)", color="tab:green")
    ax.bar(xs, rej, bottom=[o + a for o, a in zip(obs, acc, strict=True)], label="validate (rejected)",
           color="tab:red")
    ax.set_xticks(list(xs), [k.split("/")[-1] for k in keys], rotation=30, fontsize=8)
    ax.set_ylabel("rollouts")
    ax.set_title("where rollouts went")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "rollouts.png", dpi=90)
    plt.close(fig)
    made.append("rollouts.png")
    return made


def _fmt(stats: dict[str, Any] | None, target: Target) -> str:
    if not stats:
        return "-"
    y, (lo, hi) = _value(stats, target)
    return f"{y:.2f} [{lo:.2f}, {hi:.2f}] (n={stats['n']})"


def _confidence(res: dict[str, Any]) -> str:
    conf = res.get("confidence")
    if not conf:
        return ""
    return (" (uniform-prior posterior mass " + ", ".join(f"{k} {v:.2f}" for k, v in conf.items())
            + "; the verdict is the stopping rule's, whose error rates are stated per band)")


def _guarantee(target: Target, band: list[float], validator: SequentialValidator,
               baseline: dict[str, Any] | None = None, tasks: int = 1, *, rounds: int = 5) -> str:
    if target.relative:
        base = min(1.0, max(0.0, float((baseline or {}).get(target.metric, 0.0))))
        test = LiftTest(delta=abs(target.lift), alpha=round_alpha(1, tasks=tasks))
        parts = [f"{k}: P(accept) = {v['p_beats']:.3f} with {v['pairs']:.1f} seed pairs"
                 for k, v in test.characteristic(base, lower=target.lift < 0).items()]
        return (f"paired lift test (base and candidate on the same seeds): a candidate no better than its base "
                f"is accepted with probability <= {test.alpha:g} in round 1, halving each round "
                f"(<= {ALPHA_RIG:g} over all {tasks} task(s) of the rig together, whatever the base's rate); exact "
                f"at a base {target.metric} of {base:.2f} with independent outcomes, round 1: " + "; ".join(parts))
    if not target.binary:
        return ("mean-steps rule: decided past an edge at 10 rollouts when clear, else at n >= max(20, "
                "(z s / (w/2))^2, (skewness / 0.2)^2); stated P(in | centre) >= 0.85, P(in | an edge -/+ one "
                "width) <= 0.10 (measured on normal, Poisson and geometric counts); an 'in' needing more than "
                "the cap is refused; a candidate in the band must also move its step counts from the base's "
                f"towards it on the same seeds (paired sign test at alpha {differs.paired_alpha(rounds):g} a round): "
                f"one identical to its base is accepted with probability <= {differs.ALPHA_PAIRED:g} per task")
    c = validator.characteristic((band[0], band[1]))
    parts = [f"P(in | p={v['p']:.2f}) = {v['p_in']:.2f} with {v['rollouts']:.1f} rollouts" for k, v in c.items()
             if not k.startswith("p=")]
    # and halfway out, where a wide band is lenient: the candidates it accepts most wrongly
    w = band[1] - band[0]
    for p in sorted({round(max(0.0, band[0] - w / 2), 4), round(min(1.0, band[1] + w / 2), 4)} - {0.0, 1.0}):
        probs, n = validator.design_for((band[0], band[1])).operating(p)
        parts.append(f"P(in | p={p:.2f}) = {probs['in']:.2f} with {n:.1f} rollouts")
    return ("validator's exact error rates at this band: " + "; ".join(parts)
            + "; an 'in' is played again on fresh seeds and must say 'in' again (a clearly-out candidate passes "
            "both with probability <= 0.01, so a task accepts one over R rounds with probability <= R / 100); "
            "and it must have moved from its base towards the band: free past a base whose first "
            f"{_far_runs(band, rounds, validator.k_max)} episodes all fell on the far side, else by the paired lift test on the same seeds "
            f"(alpha {differs.paired_alpha(rounds):g} a round), so a candidate identical to its "
            f"base is accepted with probability <= {differs.ALPHA_IDENTICAL:g} per task")


def _far_runs(band: list[float], rounds: int, k_max: int | None) -> str:
    runs = {("below" if up else "above"): differs.far_run((band[0], band[1]), up, rounds, True, k_max)
            for up in (True, False) if (band[0] > 0 if up else band[1] < 1)}
    return " / ".join(f"{'never' if n is None else n} ({side} the band)" for side, n in runs.items()) or "-"


def write_report(out: Path, journal: Journal, tasks: list[TaskRef], target: Target, usage: Usage,
                 stops: dict[str, str], *, config: dict[str, Any] | None = None,
                 validator: SequentialValidator | None = None) -> Path:
    """Write ``report.md`` and the plots; returns the report's path."""
    cfg = config or {}
    validator = validator or SequentialValidator()
    rows = {str(t): _task_rows(journal, str(t)) for t in tasks}
    plots = _plots(out, rows, target)
    u = usage.to_data()
    metric = {"success_rate": "success rate", "mean_steps": "mean steps",
              "weakness_rate": "weakness rate (shows and fails)"}[target.metric]
    spec = cfg.get("spec")
    lines = [f"# envh rig report: {target}", "",
             f"Policy `{cfg.get('policy', '?')}` · designer `{cfg.get('designer', '?')}` · diagnoser "
             f"`{cfg.get('diagnoser', 'stats')}` · spec `{spec if isinstance(spec, str) else json.dumps(spec)}` · "
             f"seed {cfg.get('seed', 0)}.", "",
             f"Target: {target.describe()} (metric: {metric}). Rollouts: {u['rollouts']}; LLM tokens: "
             f"{u['prompt_tokens'] + u['completion_tokens']} ({u['llm_calls']} calls, {u['retries']} retries); "
             f"cost ${u['dollars']:.4f}.", "",
             f"| task | baseline {metric} | band | stop | rounds | accepted | best candidate |",
             "|---|---|---|---|---|---|---|"]
    for key, r in rows.items():
        tried = [a for a in r["attempts"] if a.get("result")]
        band = r["baseline"]["band"] if r["baseline"] else None
        best = (min(tried, key=lambda a: abs(_value(a["result"], target)[0] - sum(band) / 2))
                if tried and band else None)
        lines.append(f"| {key} | {_fmt(r['baseline']['stats'] if r['baseline'] else None, target)} | "
                     f"{band} | {stops.get(key, 'not run')} | {max((a['round'] for a in r['attempts']), default=0)} | "
                     f"{len(r['accepted'])} | {_fmt(best['result'] if best else None, target)} |")
    lines += [""] + [f"![{p}]({p})" for p in plots]
    for key, r in rows.items():
        lines += ["", f"## {key}", ""]
        if r["baseline"]:
            b = r["baseline"]
            diag = b["diagnosis"]
            lines.append(f"Baseline {metric} {_fmt(b['stats'], target)}, band {b['band']}, direction "
                         f"{b['direction'] or 'none needed'}. Diagnosis ({diag.get('failure_axis')}): "
                         f"{diag.get('summary', '')}")
            for claim in diag.get("claims", [])[:6]:
                ev = claim.get("evidence", {})
                lines.append(f"  - {claim.get('axis')}: {claim.get('claim')} — episode seed {ev.get('seed')}, "
                             f"step {ev.get('step')}: \"{str(ev.get('quote', ''))[:120]}\"")
            div = diag.get("divergence")
            if div:
                rows_ = sorted(div["expected"].items(), key=lambda kv: -kv[1]["rate"])[:6]
                lines.append(f"  Replayed against the reference ({div['replayed']} failed episodes), where the "
                             "reference plays each class, the episodes decided there (lost, else first off it): "
                             + "; ".join(f"{cls} {r['decisive']}/{r['taken']} [{r['interval'][0]:.2f}, "
                                         f"{r['interval'][1]:.2f}]" for cls, r in rows_))
            if diag.get("uninformative"):
                lines.append("  True of every failed episode, so naming no weakness: "
                             + ", ".join(f"`{p}`" for p in diag["uninformative"]))
            if b.get("weakness"):
                by = {"keywords": " (read from the words by keywords)",
                      "designer": " (read from the words by the designer)"}.get(b.get("weakness_read_by") or "", "")
                lines.append(f"  Weakness predicate: `{b['weakness']}`{by}")
            if b.get("reference"):
                lines.append(f"  Solvability check: {b['reference']}")
            if b.get("check"):
                c = b["check"]
                lines.append(f"  The base judged against the band on {c['n']} rollouts: {c['decision']}"
                             f"{'' if c.get('decisive', True) else ' (not decisive)'}.")
            guarantee = _guarantee(target, b["band"], validator, b["stats"], len(tasks), rounds=int(cfg.get("rounds") or 5))
            lines.append(f"  {guarantee}.")
        for a in r["attempts"]:
            what = a["meta"] or {"kinds": [layer.get("kind") for layer in a["layers"]]}
            res = a.get("result")
            measured = (f"{_fmt(res, target)}, decision **{res['decision']}**{_confidence(res)}" if res
                        else f"cascade {a['cascade']['stage']}")
            lines.append(f"- round {a['round']}: {what} → {measured} → **{a['verdict']}** ({a['reason'][:200]})")
            if (a.get("cascade") or {}).get("reference"):
                lines.append(f"  - solvability: {a['cascade']['reference']}")
            if res and res.get("lift"):
                lift = res["lift"]
                lines.append(f"  - lift over the base on the same {lift['pairs']} seeds: {lift['measured']:+.2f} "
                             f"(asked {lift['asked']:+g}; base {lift['base']:.2f}), test at alpha {lift['alpha']:g}: "
                             f"{lift['verdict']}")
            if res and res.get("confirmation"):
                conf = res["confirmation"]
                lines.append(f"  - confirmation on {conf['n']} fresh rollouts: {conf['decision']}")
            if res and res.get("differs"):
                d = res["differs"]
                lines.append(f"  - against the base: the base's first {d['run']} episodes all on the far side "
                             f"({d['base_episodes']} more played)" if d["rule"] == "far base" else
                             f"  - against the base on the same {d['pairs']} seeds: {d['towards']} towards the band, "
                             f"{d['away']} away, paired test at alpha {d['alpha']:g}: {d['verdict']} "
                             f"({d['base_episodes']} base episodes played)")
            if res and res.get("wins_with_rewrites"):
                lines.append(f"  - {res['wins_with_rewrites']} of {res['successes']} wins had actions the candidate "
                             f"replaced ({res['rewritten_steps']} replaced steps in all): the harness played part "
                             "of them")
            if a.get("rationale"):
                lines.append(f"  - rationale: {a['rationale'][:300]}")
            lines.append("  - layers:\n\n    ```json\n" + "\n".join(
                "    " + ln for ln in json.dumps(a["layers"], indent=2).splitlines()) + "\n    ```")
        for acc in r["accepted"]:
            lines.append(f"- pool: `{acc['path']}` (spec id {acc['spec_id'][:12]})")
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
