"""The training page: a run's ``metrics.jsonl`` (envh-grpo writes one row per step) as
small multiples with the step on the x axis, several runs overlaid.

Charts are server-rendered SVG; each line carries its steps and values as data attributes,
from which ``static/training.js`` redraws it smoothed (an exponential moving average) and
reads the values under the pointer. Reward terms (``reward/<term>`` keys) are drawn stacked,
positive terms above zero and negative ones below, so their sum is the ``reward`` line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from html import escape
from typing import Any

import attrs

#: chart geometry (SVG user units): the plot box inside a W x H view box
W, H = 320, 170
LEFT, RIGHT, TOP, BOTTOM = 58, 10, 8, 22
#: points kept per line (a longer run is thinned evenly, its last point always kept)
MAX_POINTS = 1000
#: table rows shown in all (each run's last ones, an equal share each, at most 500)
TABLE_ROWS = 2000
PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f", "#854d0e", "#475569")
#: sections, in order, and the key prefixes that put a metric in each (first match wins)
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Reward", ("reward",)),
    ("Success and held-out evaluation", ("success", "eval/", "heldout/")),
    ("Optimisation", ("loss", "policy_loss", "kl", "grad_norm", "clip_fraction", "lr", "updates")),
    ("Rollouts", ("episodes", "turns", "groups/", "rollout/", "gen_tokens", "policy_tokens")),
    ("Time", ("time/",)),
)


@attrs.frozen(kw_only=True)
class MetricsRun:
    """One training run's rows as read from its ``metrics.jsonl`` (``label``: its folder
    relative to the run directory, ``.`` for the directory itself); ``heldout``: held-out
    success per eval step, from the ``eval/step-N.jsonl`` files beside it."""

    label: str
    rows: list[dict[str, Any]]
    heldout: dict[int, float] = attrs.field(factory=dict)


def fmt(value: Any) -> str:
    """A value as shown: numbers to 4 significant digits, anything else as text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) and abs(value) < 10**6:
        return str(value)
    return f"{value:.4g}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def has_steps(rows: Sequence[dict[str, Any]]) -> bool:
    """Every row names its step: the x axis is the step; otherwise the row number."""
    return bool(rows) and all(_number(r.get("step")) is not None for r in rows)


def series(run: MetricsRun, key: str) -> list[tuple[float, float]]:
    """``(step, value)`` of ``key`` in step order; a step logged twice (a resumed run)
    keeps its last row."""
    if key.startswith("heldout/"):
        return sorted((float(s), v) for s, v in run.heldout.items())
    stepped = has_steps(run.rows)
    points: dict[float, float] = {}
    for i, row in enumerate(run.rows):
        value = _number(row.get(key))
        if value is not None:
            points[float(row["step"]) if stepped else float(i)] = value
    return sorted(points.items())


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(points) <= MAX_POINTS:
        return points
    stride = len(points) / (MAX_POINTS - 1)
    return [points[int(i * stride)] for i in range(MAX_POINTS - 1)] + [points[-1]]


def _keys(runs: Sequence[MetricsRun]) -> list[str]:
    keys = {k for r in runs for row in r.rows for k, v in row.items() if k != "step" and _number(v) is not None}
    if any(r.heldout for r in runs):
        keys.add("heldout/success")
    return sorted(keys)


def group_of(key: str) -> str:
    for name, prefixes in GROUPS:
        if key.startswith(prefixes):
            return name
    return "Other"


def reward_terms(keys: Sequence[str]) -> list[str]:
    """The ``reward/<term>`` keys that add up to the reward (weights are settings, not terms)."""
    return [k for k in keys if k.startswith("reward/") and not k.endswith("weight")]


class _Scale:
    def __init__(self, xs: Sequence[float], ys: Sequence[float]) -> None:
        self.x0, self.x1 = min(xs), max(xs)
        self.y0, self.y1 = min(ys), max(ys)
        if self.y0 == self.y1:
            self.y0, self.y1 = self.y0 - (abs(self.y0) or 1.0) / 2, self.y1 + (abs(self.y1) or 1.0) / 2

    def x(self, v: float) -> float:
        span = self.x1 - self.x0
        return LEFT + ((v - self.x0) / span if span else 0.5) * (W - LEFT - RIGHT)

    def y(self, v: float) -> float:
        return TOP + (self.y1 - v) / (self.y1 - self.y0) * (H - TOP - BOTTOM)

    def attrs(self) -> str:
        return (f"data-x0='{self.x0!r}' data-x1='{self.x1!r}' data-y0='{self.y0!r}' data-y1='{self.y1!r}' "
                f"data-box='{LEFT},{TOP},{W - RIGHT},{H - BOTTOM}'")


def _axes(scale: _Scale, stepped: bool) -> str:
    """The plot box, three y ticks and the first and last step, labels outside the box."""
    parts = [f"<rect class='frame' x='{LEFT}' y='{TOP}' width='{W - LEFT - RIGHT}' height='{H - TOP - BOTTOM}'/>"]
    for v in (scale.y0, (scale.y0 + scale.y1) / 2, scale.y1):
        y = scale.y(v)
        parts.append(f"<line class='grid' x1='{LEFT}' x2='{W - RIGHT}' y1='{y:.1f}' y2='{y:.1f}'/>"
                     f"<text class='tick' x='{LEFT - 4}' y='{y + 3:.1f}' text-anchor='end'>{escape(fmt(v))}</text>")
    for v, anchor in ((scale.x0, "start"), (scale.x1, "end")):
        label = fmt(int(v)) if v == int(v) else fmt(v)
        parts.append(f"<text class='tick' x='{scale.x(v):.1f}' y='{H - 6}' text-anchor='{anchor}'>{label}</text>")
    parts.append(f"<text class='tick axis' x='{(LEFT + W - RIGHT) / 2}' y='{H - 6}' text-anchor='middle'>"
                 f"{'step' if stepped else 'row'}</text>")
    return "".join(parts)


def _line(points: list[tuple[float, float]], scale: _Scale, run: int) -> str:
    color = PALETTE[run % len(PALETTE)]
    xs = json.dumps([x for x, _ in points])
    ys = json.dumps([float(f"{y:.6g}") for _, y in points])
    data = f"data-run='{run}' data-x='{escape(xs)}' data-y='{escape(ys)}'"
    if len(points) == 1:
        x, y = points[0]
        return f"<circle class='series' {data} cx='{scale.x(x):.1f}' cy='{scale.y(y):.1f}' r='3' fill='{color}'/>"
    coords = " ".join(f"{scale.x(x):.1f},{scale.y(y):.1f}" for x, y in points)
    return (f"<polyline class='series' {data} fill='none' stroke='{color}' stroke-width='1.5' "
            f"points='{coords}'/>")


def chart(key: str, runs: Sequence[MetricsRun], stepped: bool) -> str:
    """One metric, every run that has it overlaid; empty when no run has a value."""
    lines = [(i, _thin(series(r, key))) for i, r in enumerate(runs)]
    lines = [(i, p) for i, p in lines if p]
    if not lines:
        return ""
    scale = _Scale([x for _, p in lines for x, _ in p], [y for _, p in lines for _, y in p])
    last = " · ".join(f"<span class='last' data-run='{i}'>{escape(fmt(p[-1][1]))}</span>" for i, p in lines)
    body = "".join(_line(p, scale, i) for i, p in lines)
    return (f"<figure class='metric-chart' data-key='{escape(key)}'><figcaption><b>{escape(key)}</b> "
            f"<span class='muted'>last {last}</span></figcaption>"
            f"<svg class='chart' viewBox='0 0 {W} {H}' role='img' aria-label='{escape(key)} by step' {scale.attrs()}>"
            f"{_axes(scale, stepped)}{body}<line class='cursor' x1='-10' x2='-10' y1='{TOP}' y2='{H - BOTTOM}'/></svg>"
            f"<p class='hover muted'>&#8203;</p></figure>")


def _stack_run(run: MetricsRun, terms: Sequence[str]) -> list[tuple[str, list[tuple[float, float]]]]:
    """One run's stacked shapes: per term, its positive part stacked up from zero and its
    negative part down from zero, each a closed outline in data units."""
    per = {t: dict(series(run, t)) for t in terms}
    xs = sorted({x for p in per.values() for x in p})
    pos, neg = [0.0] * len(xs), [0.0] * len(xs)
    shapes: list[tuple[str, list[tuple[float, float]]]] = []
    for term in terms:
        for base, sign in ((pos, 1.0), (neg, -1.0)):
            parts = [sign * max(sign * per[term].get(x, 0.0), 0.0) for x in xs]
            if not any(parts):
                continue
            top = [b + v for b, v in zip(base, parts)]
            shapes.append((term, list(zip(xs, top)) + list(zip(reversed(xs), reversed(base)))))
            base[:] = top
    return shapes


def stacked(runs: Sequence[MetricsRun], terms: Sequence[str], stepped: bool) -> str:
    """The reward terms stacked, one chart per run on its own scale (a select picks the
    run shown; the others carry the class ``off``)."""
    if len(terms) < 2:
        return ""
    stacks = [(i, shapes) for i, r in enumerate(runs) if (shapes := _stack_run(r, terms))]
    if not stacks:
        return ""
    colors = {t: PALETTE[(k + 3) % len(PALETTE)] for k, t in enumerate(terms)}
    svgs = []
    for i, shapes in stacks:
        points = [p for _, outline in shapes for p in outline]
        scale = _Scale([x for x, _ in points], [0.0, *(y for _, y in points)])
        polys = "".join(f"<polygon class='term' data-term='{escape(t)}' fill='{colors[t]}' points='"
                        + " ".join(f"{scale.x(x):.1f},{scale.y(y):.1f}" for x, y in outline) + "'/>"
                        for t, outline in shapes)
        zero = scale.y(0.0)
        svgs.append(f"<svg class='chart stack{'' if i == stacks[0][0] else ' off'}' data-run='{i}' "
                    f"viewBox='0 0 {W} {H}' role='img' aria-label='reward terms by step, {escape(runs[i].label)}'>"
                    f"{_axes(scale, stepped)}{polys}"
                    f"<line class='zero' x1='{LEFT}' x2='{W - RIGHT}' y1='{zero:.1f}' y2='{zero:.1f}'/></svg>")
    legend = "".join(f"<li><svg width='10' height='10' aria-hidden='true'><rect width='10' height='10' "
                     f"fill='{colors[t]}'/></svg> {escape(t.removeprefix('reward/'))}</li>" for t in terms)
    pick = ""
    if len(stacks) > 1:
        options = "".join(f"<option value='{i}'>{escape(runs[i].label)}</option>" for i, _ in stacks)
        pick = f" <select class='stack-run' aria-label='run'>{options}</select>"
    return (f"<figure class='stack-chart'><figcaption><b>reward terms, stacked</b>{pick}</figcaption>"
            f"{''.join(svgs)}<ul class='legend'>{legend}</ul></figure>")


def table(runs: Sequence[MetricsRun], keys: Sequence[str]) -> str:
    """The last rows of each run, values rounded, in a box that scrolls (both ways)."""
    several = len(runs) > 1
    head = ("<th>run</th>" if several else "") + "<th>step</th>" + "".join(f"<th>{escape(k)}</th>" for k in keys)
    rows = []
    share = max(min(500, TABLE_ROWS // len(runs)), 1)
    for run in runs:
        for row in run.rows[-share:]:
            cells = "".join(f"<td>{escape(fmt(row[k]))}</td>" if k in row else "<td></td>" for k in keys)
            label = f"<td>{escape(run.label)}</td>" if several else ""
            rows.append(f"<tr class='metric'>{label}<td>{escape(fmt(row.get('step', '')))}</td>{cells}</tr>")
    return f"<div class='table-box'><table id='metrics'><tr>{head}</tr>{''.join(rows)}</table></div>"


EMPTY = ("<div class='empty' id='no-metrics'><p><b>No training metrics in <code>{dir}</code>.</b></p>"
         "<p>This page charts <code>metrics.jsonl</code>: the file <code>envh-grpo</code> appends one row to at each "
         "training step (in its <code>output_dir</code>), and <code>envh experiment</code> keeps per run under "
         "<code>arms/ARM/seed-N/</code> and <code>baseline/</code>. It looked in the directory and in its "
         "sub-folders up to three levels down{found}.</p><p>Start a training run with its output in this "
         "directory, or open <code>envh ui</code> on the folder that holds one.</p></div>")


def training_html(directory: str, runs: Sequence[MetricsRun]) -> str:
    """The page body: runs' legend, a smoothing slider, the charts by section, the table."""
    runs = [r for r in runs if r.rows or r.heldout]
    if not runs:
        return EMPTY.format(dir=escape(directory), found="")
    keys = _keys(runs)
    if not keys:
        found = f" and found {sum(len(r.rows) for r in runs)} rows, none with a number in it"
        return EMPTY.format(dir=escape(directory), found=escape(found)) + table(runs, [])
    stepped = all(has_steps(r.rows) for r in runs if r.rows)
    legend = "".join(f"<li data-run='{i}' data-label='{escape(r.label)}'><svg width='14' height='4' aria-hidden='true'><rect width='14' height='4' "
                     f"fill='{PALETTE[i % len(PALETTE)]}'/></svg> {escape(r.label)} "
                     f"<span class='muted'>({len(r.rows)} rows)</span></li>" for i, r in enumerate(runs))
    note = "" if stepped else "<p class='muted'>Some rows have no <code>step</code>: the x axis is the row number.</p>"
    controls = ("<p class='controls'><label>smoothing <input type='range' id='smooth' min='0' max='0.99' "
                "step='0.01' value='0'></label> <output id='smooth-value'>0</output> "
                "<span class='muted'>exponential moving average; hover a chart for its values</span></p>")
    sections = []
    for name in [g for g, _ in GROUPS] + ["Other"]:
        members = [k for k in keys if group_of(k) == name]
        charts = (stacked(runs, reward_terms(keys), stepped) if name == "Reward" else "") + \
            "".join(chart(k, runs, stepped) for k in members)
        if charts:
            sections.append(f"<h2>{escape(name)}</h2><div class='charts'>{charts}</div>")
    return (f"<ul class='runs-legend'>{legend}</ul>{note}{controls}{''.join(sections)}"
            f"<h2>Rows</h2>{table(runs, keys)}")
