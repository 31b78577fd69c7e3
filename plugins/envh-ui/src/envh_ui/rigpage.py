"""HTML for the rounds of an ``envh rig`` run: per task the baseline with its diagnosis,
then each round's candidate layers, what validation measured, the validator's decision and
confidence, and the verdict; an accepted candidate opens in the playground.

The events are the rigger's journal as written (``RunDirs.rig_rounds``): read as untrusted
data, every field optional, every value escaped.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _num(value: Any) -> str:
    try:
        return f"{value:.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else escape(str(value))
    except OverflowError:  # an integer past a float's range
        return escape(str(value))


def _measured(stats: Any) -> str:
    """``0.40 [0.17, 0.69] n=10`` from a stats record (success rate or mean steps)."""
    s = _d(stats)
    if not s:
        return "-"
    if "success_rate" in s:
        value, interval = s["success_rate"], s.get("interval")
    else:
        value, interval = s.get("mean_steps"), s.get("steps_interval")
    span = (f" [{_num(interval[0])}, {_num(interval[1])}]"
            if isinstance(interval, (list, tuple)) and len(interval) == 2 else "")
    return f"{_num(value)}{span} n={escape(str(s.get('n', '?')))}"


def _layers(layers: Any, meta: Any) -> str:
    kinds = [str(_d(layer).get("kind", "?")) for layer in layers] if isinstance(layers, list) else []
    detail = json.dumps(layers, indent=1, default=str)[:4000]
    label = escape(", ".join(kinds) or "-") + (f" <span class='muted'>{escape(str(meta)[:120])}</span>" if meta else "")
    return f"<details><summary>{label}</summary><pre>{escape(detail)}</pre></details>"


def rounds_html(index: int, tasks: list[dict[str, Any]], pool_ids: set[str]) -> str:
    if not tasks:
        return ""
    out = ["<h2>Rounds</h2>"]
    for t in tasks:
        out.append(f"<h3 class='rig-task'>{escape(t['task'])}</h3>")
        base = _d(t.get("baseline"))
        if base:
            diag = _d(base.get("diagnosis"))
            listed = diag.get("claims")
            claims = "".join(
                f"<li>{escape(str(_d(c).get('axis', '')))}: {escape(str(_d(c).get('claim', ''))[:300])}</li>"
                for c in (listed if isinstance(listed, list) else [])[:6])
            out.append(
                f"<p class='baseline'>baseline {_measured(base.get('stats'))}, band "
                f"{escape(str(base.get('band')))}, direction {escape(str(base.get('direction') or 'none needed'))}. "
                f"Diagnosis ({escape(str(diag.get('failure_axis', '-')))}): "
                f"{escape(str(diag.get('summary', ''))[:600])}</p>" + (f"<ul class='claims'>{claims}</ul>" if claims else ""))
        rows = []
        for a in t.get("attempts", []):
            res = _d(a.get("result"))
            conf = _d(res.get("confidence"))
            sid = str(a.get("spec_id") or "")
            verdict = str(a.get("verdict", "-"))
            open_link = (f"<a class='open' href='/playground?d={index}&spec={escape(sid)}'>open in playground</a>"
                         if sid in pool_ids else "")
            rows.append(
                f"<tr class='round {'ok' if verdict == 'accepted' else ''}'><td>{escape(str(a.get('round', '?')))}</td>"
                f"<td>{_layers(a.get('layers'), a.get('meta'))}</td><td>{_measured(res)}</td>"
                f"<td class='decision'>{escape(str(res.get('decision', _d(a.get('cascade')).get('stage', '-'))))}</td>"
                f"<td>{escape(', '.join(f'{k} {_num(v)}' for k, v in conf.items())) or '-'}</td>"
                f"<td class='verdict'><b>{escape(verdict)}</b><br><span class='muted'>"
                f"{escape(str(a.get('reason', ''))[:300])}</span></td>"
                f"<td>{escape(str(a.get('rationale') or '')[:300])}</td><td>{open_link}</td></tr>")
        if rows:
            out.append("<table class='rounds'><tr><th>round</th><th>candidate layers</th><th>measured</th>"
                       "<th>decision</th><th>confidence</th><th>verdict</th><th>rationale</th><th></th></tr>"
                       + "".join(rows) + "</table>")
    return "".join(out)
