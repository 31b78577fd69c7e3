"""The report of a rig run: ``OUT/report.md`` and PNG plots (matplotlib, Agg backend).

``sr_per_round.png``: per task, the success rate of the baseline (round 0) and of each
validated candidate with its Wilson interval, against the target band.
``rollouts.png``: where rollouts went, per task: observation vs validation of accepted
and rejected candidates (candidates stopped by the free cascade cost none).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from envh import TaskRef

from .budget import Usage
from .journal import Journal
from .targets import Target


def _task_rows(journal: Journal, key: str) -> dict[str, Any]:
    events = journal.events(key)
    baselines = [e for e in events if e["kind"] == "baseline"]
    attempts = [e["attempt"] for e in events if e["kind"] == "attempt"]
    accepted = [e for e in events if e["kind"] == "accepted"]
    return {"baseline": baselines[0] if baselines else None, "observations": baselines,
            "attempts": attempts, "accepted": accepted}


def _plots(out: Path, rows: dict[str, dict[str, Any]], target: Target) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    keys = [k for k, r in rows.items() if r["baseline"]]
    if not keys:
        return made
    cols = min(3, len(keys))
    nrows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        r = rows[key]
        base = r["baseline"]
        lo, hi = base["band"]
        ax.axhspan(lo, hi, color="tab:green", alpha=0.15, label="target band")
        pts = [(0, base["stats"]["success_rate"], base["stats"]["interval"], "tab:gray")]
        for a in r["attempts"]:
            res = a.get("result")
            if res:
                color = "tab:green" if a["verdict"] == "accepted" else "tab:red"
                pts.append((a["round"], res["success_rate"], res["interval"], color))
        for x, y, (ilo, ihi), color in pts:
            ax.errorbar([x], [y], yerr=[[y - ilo], [ihi - y]], fmt="o", color=color, capsize=3)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color="tab:blue", alpha=0.4)
        ax.set_title(key, fontsize=9)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("round (0 = baseline)")
        ax.set_ylabel("success rate")
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.suptitle(f"success rate per round vs {target}")
    fig.tight_layout()
    fig.savefig(out / "sr_per_round.png", dpi=90)
    plt.close(fig)
    made.append("sr_per_round.png")

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
    ax.bar(xs, rej, bottom=[o + a for o, a in zip(obs, acc)], label="validate (rejected)", color="tab:red")
    ax.set_xticks(list(xs), [k.split("/")[-1] for k in keys], rotation=30, fontsize=8)
    ax.set_ylabel("rollouts")
    ax.set_title("where rollouts went")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "rollouts.png", dpi=90)
    plt.close(fig)
    made.append("rollouts.png")
    return made


def _fmt_sr(stats: dict[str, Any] | None) -> str:
    if not stats:
        return "-"
    lo, hi = stats["interval"]
    return f"{stats['success_rate']:.2f} [{lo:.2f}, {hi:.2f}] (n={stats['n']})"


def write_report(out: Path, journal: Journal, tasks: list[TaskRef], target: Target, usage: Usage,
                 stops: dict[str, str]) -> Path:
    """Write ``report.md`` and the plots; returns the report's path."""
    rows = {str(t): _task_rows(journal, str(t)) for t in tasks}
    plots = _plots(out, rows, target)
    u = usage.to_data()
    lines = [f"# envh rig report: {target}", "",
             f"Target: {target.describe()}. Rollouts: {u['rollouts']}; LLM tokens: "
             f"{u['prompt_tokens'] + u['completion_tokens']} ({u['llm_calls']} calls, {u['retries']} retries); "
             f"cost ${u['dollars']:.4f}.", "",
             "| task | baseline | stop | rounds | accepted | best candidate |", "|---|---|---|---|---|---|"]
    for key, r in rows.items():
        tried = [a for a in r["attempts"] if a.get("result")]
        band = r["baseline"]["band"] if r["baseline"] else None
        best = min(tried, key=lambda a: abs(a["result"]["success_rate"] - sum(band) / 2)) if tried and band else None
        lines.append(f"| {key} | {_fmt_sr(r['baseline']['stats'] if r['baseline'] else None)} | "
                     f"{stops.get(key, 'not run')} | {max((a['round'] for a in r['attempts']), default=0)} | "
                     f"{len(r['accepted'])} | {_fmt_sr(best['result'] if best else None)} |")
    lines += [""] + [f"![{p}]({p})" for p in plots]
    for key, r in rows.items():
        lines += ["", f"## {key}", ""]
        if r["baseline"]:
            b = r["baseline"]
            lines.append(f"Baseline {_fmt_sr(b['stats'])}, band {b['band']}, direction "
                         f"{b['direction'] or 'none needed'}. Diagnosis ({b['diagnosis']['failure_axis']}): "
                         f"{b['diagnosis']['summary']}")
        for a in r["attempts"]:
            what = a["meta"] or {"kinds": [layer.get("kind") for layer in a["layers"]]}
            res = a.get("result")
            measured = f"{_fmt_sr(res)}, {res['decision']}" if res else f"cascade {a['cascade']['stage']}"
            lines.append(f"- round {a['round']}: {what} → {measured} → **{a['verdict']}** ({a['reason'][:200]})")
        for acc in r["accepted"]:
            lines.append(f"- pool: `{acc['path']}` (spec id {acc['spec_id'][:12]})")
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
