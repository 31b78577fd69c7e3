"""The compare page: two episodes (of one run, or of two runs on the same task) side by
side, aligned by step. Each row is one step of both: the actions and observations with the
words that differ from the other side marked, the layers' effects as badges.

Only the shown page of steps is structured into records, as on a trajectory page.
"""

from __future__ import annotations

import difflib
import json
import re
from html import escape
from typing import Any

import attrs
from envh.rollout.trajectory import StepRecord, Trajectory, trajectory_from_data
from envh.types import Action

from .steps import STEPS

#: tokens a side may have for a word diff (the diff is quadratic in the worst case)
MAX_DIFF_TOKENS = 4000
_TOKENS = re.compile(r"\s+|[^\s]+")


@attrs.frozen(kw_only=True)
class Side:
    """One episode on the page: ``trajectory`` holds the shown steps, the first of which is
    step ``first`` of ``total``; ``dir`` and ``seq`` say where it is stored."""

    trajectory: Trajectory
    first: int
    total: int
    dir: int
    seq: int


def side(data: dict[str, Any], first: int, dir_index: int, seq: int, size: int = STEPS) -> Side:
    """Steps ``first`` to ``first + size`` of a stored episode (none past its end)."""
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise LookupError("not a readable trajectory (its steps are not a list)")
    try:
        trajectory = trajectory_from_data({**data, "steps": steps[first:first + size]})
    except Exception as exc:  # noqa: BLE001 - cattrs' validation groups too: a damaged row is a clear 404
        raise LookupError(f"not a readable trajectory ({type(exc).__name__}: {exc})") from exc
    return Side(trajectory=trajectory, first=first, total=len(steps), dir=dir_index, seq=seq)


def word_diff(a: str, b: str) -> tuple[str, str]:
    """``a`` and ``b`` as escaped HTML, the words only one of them has marked
    (``mark.del`` on ``a``'s side, ``mark.ins`` on ``b``'s); too long a text is shown unmarked."""
    ta, tb = _TOKENS.findall(a), _TOKENS.findall(b)
    if a == b or len(ta) > MAX_DIFF_TOKENS or len(tb) > MAX_DIFF_TOKENS:
        return escape(a), escape(b)
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        xa, xb = escape("".join(ta[i1:i2])), escape("".join(tb[j1:j2]))
        if op == "equal":
            left.append(xa)
            right.append(xb)
            continue
        if xa:
            left.append(f"<mark class='del'>{xa}</mark>")
        if xb:
            right.append(f"<mark class='ins'>{xb}</mark>")
    return "".join(left), "".join(right)


def action_text(action: Action | None) -> str:
    if action is None:
        return ""
    args = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in dict(action.args).items())
    return f"{action.tool}({args})"


def short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= limit else text[:limit - 1] + "…"


@attrs.frozen
class Badge:
    """A layer's effect for people: ``text`` in words, ``cls`` its look (blocked, rewritten,
    acted, quiet), ``title`` the effect as JSON (shown on hover)."""

    cls: str
    text: str
    title: str


def badge(effect: dict[str, Any]) -> str:
    """``badge_parts`` as HTML, every part escaped."""
    b = badge_parts(effect)
    return f"<span class='badge {b.cls}' title='{escape(b.title)}'>{escape(b.text)}</span>"


def badge_parts(effect: dict[str, Any]) -> Badge:
    """A layer's effect in words: which layer, what it did to the action (blocked and why,
    rewritten to what), whether it changed the transition or the observation."""
    name = str(effect.get("kind") or effect.get("layer") or "layer")
    did = str(effect.get("action", ""))
    words = []
    if did and did != "passed":
        words.append(did)
    if "reason" in effect:
        words[-1:] = [f"{words[-1] if words else 'blocked'} “{short(effect['reason'])}”"]
    sent = effect.get("sent")
    if isinstance(sent, dict) and "tool" in sent:
        args: dict[str, Any] = sent["args"] if isinstance(sent.get("args"), dict) else {}
        words.append("→ " + short(f"{sent['tool']}({', '.join(f'{k}={json.dumps(v, default=str)}' for k, v in args.items())})"))
    if effect.get("transition"):
        words.append("changed the transition")
    if effect.get("observation"):
        words.append("changed the observation")
    known = {"layer", "kind", "action", "reason", "sent", "transition", "observation", "observation_before", "format"}
    words += [f"{k}: {short(v, 40)}" for k, v in effect.items() if k not in known]
    quiet = not words or words == ["passed"]
    cls = "blocked" if did == "blocked" else "rewritten" if did not in ("", "passed") else "quiet" if quiet else "acted"
    layer = str(effect.get("layer") or "")
    named = f" ({layer})" if layer and layer != name and not layer.endswith(f":{name}") else ""  # ids are "N:kind"
    text = f"{name}{named}: {' · '.join(words) if words else 'passed'}"
    return Badge(cls, text, json.dumps(effect, default=str, sort_keys=True))


def _meta(s: Side, run_link: str) -> str:
    t = s.trajectory
    verdict = "success" if t.success else "failure"
    score = "" if t.verdict is None else f" (score {t.verdict.score})"
    return (f"<table class='meta'><tr><th>episode</th><td><a href='/traj/{s.dir}/{s.seq}'>{escape(t.key)}</a></td></tr>"
            f"<tr><th>run</th><td><a href='{run_link}'>{escape(t.run_id)}</a></td></tr>"
            f"<tr><th>task</th><td>{escape(str(t.task))}</td></tr><tr><th>seed</th><td>{t.seed}</td></tr>"
            f"<tr><th>policy</th><td>{escape(t.policy)}</td></tr><tr><th>spec</th><td>{escape(t.spec_id[:16])}</td></tr>"
            f"<tr><th>verdict</th><td class='{'ok' if t.success else 'bad'}'>{verdict}{score}</td></tr>"
            f"<tr><th>steps</th><td>{s.total} · stop: {escape(t.stop)}</td></tr></table>")


def _cell(step: StepRecord | None, action_html: str, obs_html: str, ended: int) -> str:
    if step is None:
        return f"<td class='side none muted'>episode ended ({ended} steps)</td>"
    marks = []
    if step.blocked:
        marks.append(f"<span class='tag blocked'>blocked: {escape(short(step.blocked))}</span>")
    if step.executed is not None and step.proposed is not None and step.executed != step.proposed:
        marks.append(f"<span class='tag rewritten'>proposed {escape(short(action_text(step.proposed)))}</span>")
    if step.invalid:
        marks.append(f"<span class='tag'>invalid: {escape(short(step.invalid))}</span>")
    if step.error and not step.blocked and not step.invalid:  # else the error is the block's or the parse's
        marks.append(f"<span class='tag bad'>env error: {escape(short(step.error.get('message', step.error)))}</span>")
    badges = "".join(badge(e) for e in step.effects if isinstance(e, dict))
    return (f"<td class='side'><div class='act'><code>{action_html or '-'}</code> <span class='reward'>reward "
            f"{step.reward:g}</span> {''.join(marks)}</div>"
            f"<pre class='seen'>{obs_html}</pre>{f'<div class=badges>{badges}</div>' if badges else ''}</td>")


def sent_text(step: StepRecord | None) -> str:
    """What a step did: its sent action, else its proposed one, else (an output no action
    could be parsed from) the policy's raw output."""
    if step is None:
        return ""
    if step.executed or step.proposed:
        return action_text(step.executed or step.proposed)
    raw = step.raw if isinstance(step.raw, str) else step.turn.text if step.turn is not None else None
    return short(raw, 300) if raw else ""


def _row(n: int | str, a: StepRecord | None, b: StepRecord | None, ends: tuple[int, int]) -> str:
    act_a, act_b = word_diff(sent_text(a), sent_text(b))
    obs_a, obs_b = word_diff(a.observation.text if a else "", b.observation.text if b else "")
    same = a is not None and b is not None and act_a == act_b and a.observation.text == b.observation.text
    return (f"<tr class='pair {'same' if same else 'differs'}' data-step='{n}'><td class='n'>{n}</td>"
            f"{_cell(a, act_a, obs_a, ends[0])}{_cell(b, act_b, obs_b, ends[1])}</tr>")


def _start(a: Trajectory, b: Trajectory) -> str:
    ta = a.initial_observation.text if a.initial_observation else ""
    tb = b.initial_observation.text if b.initial_observation else ""
    if not ta and not tb:
        return ""
    oa, ob = word_diff(ta, tb)
    return (f"<tr class='pair start {'same' if ta == tb else 'differs'}'><td class='n'>start</td>"
            f"<td class='side'><pre class='seen'>{oa}</pre></td><td class='side'><pre class='seen'>{ob}</pre></td></tr>")


def _pager(page: int, pages: int, first: int, shown: int, total: int, link: str) -> str:
    where = f"steps {first}–{first + shown - 1} of {total}" if shown else "no steps"
    if pages == 1:
        return f"<p class='steps-pager muted'>{where}</p>"
    sep = "&amp;" if "?" in link else "?"
    anchors = " ".join(f"<a class='steps-{label}' href='{link}{sep}page={p}'>{label}</a>"
                       for p, label in ((page - 1, "previous"), (page + 1, "next")) if 0 <= p < pages)
    return f"<p class='steps-pager'>{where} · page {page + 1} of {pages} {anchors}</p>"


def compare_html(a: Side, b: Side, page: int, pages: int, links: tuple[str, str, str], picker: str) -> str:
    """``links``: the two runs' episodes pages and this page (without ``page``)."""
    ta, tb = a.trajectory, b.trajectory
    same_task = str(ta.task) == str(tb.task)
    task_note = (f"<p class='muted'>Same task: <b>{escape(str(ta.task))}</b>"
                 f"{'' if ta.seed != tb.seed else f', same seed {ta.seed}'}.</p>" if same_task else
                 "<p class='err'>The two episodes are of different tasks: steps are aligned by number only.</p>")
    first = page * STEPS
    shown = max(len(ta.steps), len(tb.steps))
    rows = [_start(ta, tb)] if page == 0 else []
    for i in range(shown):
        sa = ta.steps[i] if i < len(ta.steps) else None
        sb = tb.steps[i] if i < len(tb.steps) else None
        rows.append(_row(first + i, sa, sb, (a.total, b.total)))
    total = max(a.total, b.total)
    pager = _pager(page, pages, first, shown, total, links[2])
    differ = sum(r.startswith("<tr class='pair differs") or r.startswith("<tr class='pair start differs")
                 for r in rows)
    legend = ("<p class='muted legend-line'><mark class='del'>words only on the left</mark> "
              f"<mark class='ins'>words only on the right</mark> · {differ} of {len(rows)} rows shown differ "
              "<label><input type='checkbox' id='only-differ'> show only those</label></p>")
    head = (f"<div class='cols compare-head'><div id='left'>{_meta(a, links[0])}</div>"
            f"<div id='right'>{_meta(b, links[1])}</div></div>")
    table = ("<table id='pairs'><colgroup><col class='n'><col class='side'><col class='side'></colgroup>"
             "<tr><th>#</th><th>left</th><th>right</th></tr>" + "".join(rows) + "</table>")
    return head + task_note + picker + legend + pager + table + (pager if pages > 1 else "")
