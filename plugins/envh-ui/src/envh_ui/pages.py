"""HTML for ``envh ui``: server-rendered pages, every value escaped, no build step.

A page is a function from data to an HTML string. Styles and the small client scripts
(``static/``: the playground and its spec editor, the episodes page's compare button) are
static files: the Content-Security-Policy allows no inline script or style.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any
from urllib.parse import urlencode

from envh.rollout.trajectory import StepRecord, Trajectory

from . import charts, compare
from .charts import MetricsRun
from .steps import PromptInfo, StepsPage


def layout(title: str, body: str, scripts: tuple[str, ...] = ()) -> str:
    """A page: the app's stylesheet and ``scripts``, all static files (the CSP allows
    no inline script or style)."""
    tags = "".join(f"<script src='/static/{name}' defer></script>" for name in scripts)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)} · envh</title>"
            "<link rel='icon' href='/static/favicon.svg' type='image/svg+xml'>"
            f"<link rel='stylesheet' href='/static/envh.css'>{tags}</head><body><nav><a href='/'>Runs</a>"
            f"<a href='/playground'>Playground</a></nav><main><h1>{escape(title)}</h1>{body}</main></body></html>")


def run_link(index: int, run_id: str, **query: Any) -> str:
    """The episodes page of a run: the id travels as a query value, whatever it contains."""
    return escape(f"/run/{index}?{urlencode({'id': run_id, **query})}")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def runs_page(dirs: list[tuple[Any, ...]]) -> str:
    """``dirs``: ``(index, name, runs, files)`` per directory, with a fifth item, the
    problem, when its store cannot be read."""
    parts = []
    for index, name, runs, files, *problem in dirs:
        parts.append(f"<h2 class='dir'>{escape(name)}</h2>")
        if problem:
            parts.append(f"<p class='bad store-error'>{escape(str(problem[0]))}</p>")
        elif runs:
            rows = "".join(
                f"<tr class='run'><td><a href='{run_link(index, r['run_id'])}'>{escape(r['run_id'])}</a></td>"
                f"<td>{escape(str(r['policy'] or ''))}</td><td>{r['episodes']}</td>"
                f"<td>{_pct(r['success_rate'])} <span class='muted'>[{_pct(r['wilson'][0])}, "
                f"{_pct(r['wilson'][1])}]</span></td><td>{r['mean_steps']:.1f}</td>"
                f"<td>{escape(', '.join(f'{k}: {v}' for k, v in sorted(r['errors'].items())) or '-')}</td></tr>"
                for r in runs)
            parts.append("<table><tr><th>run</th><th>policy</th><th>episodes</th>"
                         "<th>success [Wilson 95%]</th><th>mean steps</th><th>errors</th></tr>" + rows + "</table>")
        else:
            parts.append("<p class='muted'>no trajectory store here</p>")
        if files:
            links = " ".join(f"<a class='file' href='/file/{index}/{escape(f)}'>{escape(f)}</a>" for f in files)
            parts.append(f"<p>Files: {links}</p>")
        if "experiment.json" in files:
            parts.append(f"<p><a href='/rig/{index}'>Experiment report</a></p>")
        elif "report.md" in files or "rig.json" in files:
            parts.append(f"<p><a href='/rig/{index}'>Rig report</a></p>")
        if "metrics.jsonl" in files or "experiment.json" in files:
            parts.append(f"<p><a href='/training/{index}'>Training metrics</a></p>")
    return layout("Runs", "".join(parts) or "<p>No run directories given.</p>")


def episodes_page(index: int, run_id: str, rows: list[dict[str, Any]], total: int, page: int, page_size: int,
                  filters: dict[str, str]) -> str:
    def link(p: int) -> str:
        return run_link(index, run_id, **filters, page=p)

    options = "".join(f"<option value='{o}'{' selected' if filters.get('outcome') == o else ''}>{o or 'all'}</option>"
                      for o in ("", "success", "failure", "error"))
    form = (f"<form method='get' id='filters'><input type='hidden' name='id' value='{escape(run_id)}'>outcome <select name='outcome'>{options}</select> "
            f"task <input name='task' value='{escape(filters.get('task', ''))}'> "
            f"spec <input name='spec' value='{escape(filters.get('spec', ''))}' size='10'> "
            f"<button type='submit'>Filter</button></form>")
    body = "".join(
        f"<tr class='episode'><td><input type='checkbox' class='pick' value='{r['seq']}'></td>"
        f"<td><a href='/traj/{index}/{r['seq']}'>{escape(r['key'])}</a></td><td>{escape(str(r['task']))}</td>"
        f"<td>{escape(str(r['seed']))}</td>"
        f"<td class='{'ok' if r['success'] else 'err' if r['error_class'] else 'bad'}'>"
        f"{'success' if r['success'] else escape(r['error_class'] or 'failure')}</td>"
        f"<td>{escape(str(r['steps']))}</td><td>{escape(str(r['spec_id'])[:12])}</td></tr>" for r in rows)
    last = max((total - 1) // page_size, 0)
    pager = (f"<p id='pager'>{total} episodes · page {page + 1} of {last + 1} "
             + (f"<a href='{link(page - 1)}'>previous</a> " if page > 0 else "")
             + (f"<a id='next' href='{link(page + 1)}'>next</a>" if page < last else "") + "</p>")
    compare = f"<button id='compare' data-dir='{index}'>Compare two</button>"
    return layout(f"Run {run_id}", form + pager + "<table><tr><th></th><th>episode</th><th>task</th><th>seed</th>"
                  "<th>outcome</th><th>steps</th><th>spec</th></tr>" + body + "</table>" + compare, ("episodes.js",))


def _action(action: Any) -> str:
    if action is None:
        return "<span class='muted'>-</span>"
    args = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in dict(action.args).items())
    return escape(f"{action.tool}({args})")


def _head(t: Trajectory, usage: dict[str, int]) -> str:
    verdict = t.verdict
    head = (f"<table class='meta'><tr><th>task</th><td>{escape(str(t.task))}</td><th>seed</th><td>{t.seed}</td></tr>"
            f"<tr><th>policy</th><td>{escape(t.policy)}</td><th>spec</th><td>{escape(t.spec_id)}</td></tr>"
            f"<tr><th>verdict</th><td class='{'ok' if t.success else 'bad'}' id='verdict'>"
            f"{'success' if t.success else 'failure'}{'' if verdict is None else f' (score {verdict.score})'}</td>"
            f"<th>stop</th><td>{escape(t.stop)}</td></tr>"
            f"<tr><th>tokens</th><td>{escape(json.dumps(usage))}</td><th>duration</th><td>{t.duration_s:.2f} s</td></tr>"
            "</table>")
    if t.error:
        head += f"<h3 class='bad'>{escape(t.error_class or 'error')}</h3><pre>{escape(t.error)}</pre>"
        if t.error_traceback:
            head += f"<details><summary>traceback</summary><pre>{escape(t.error_traceback)}</pre></details>"
    if t.initial_observation is not None:
        head += f"<h3>First observation</h3><pre>{escape(t.initial_observation.text)}</pre>"
    return head


def _prompt(info: PromptInfo | None, src: str) -> str:
    """A closed prompt: its counts now, its messages fetched from ``src`` when opened."""
    if info is None:
        return ""
    since = f", {info.count - info.shared} new since step {info.after}'s prompt" if info.after is not None else ""
    return (f"<details class='prompt' data-src='{escape(src)}'><summary>prompt: {info.count} messages{since}"
            f"</summary><p class='muted shared'></p><pre class='prompt'></pre>"
            f"<button type='button' class='whole'>whole prompt</button></details>")


def _env_error(error: Any) -> str:
    """A step's env error as a tag: its message, shortened (whole on hover)."""
    message = str(error.get("message", error) if isinstance(error, dict) else error)
    return (f"<span class='tag bad env-error' title='{escape(message)}'>env error: "
            f"{escape(compare.short(message))}</span>")


def _step_row(step: StepRecord, info: PromptInfo | None, src: str) -> str:
    marks = []
    rewritten = step.executed is not None and step.proposed is not None and step.executed != step.proposed
    env_error = bool(step.error) and not step.blocked and not step.invalid  # else it is the block's or the parse's
    if step.blocked:
        marks.append("<span class='tag blocked'>blocked</span>")
    if rewritten:
        marks.append("<span class='tag rewritten'>rewritten</span>")
    if step.invalid:
        marks.append("<span class='tag'>invalid</span>")
    if env_error:
        marks.append(_env_error(step.error))
    cls = " ".join(name for name, on in (("blocked", bool(step.blocked)), ("rewritten", rewritten and not step.blocked),
                                         ("env-error", env_error)) if on)
    base = step.base_observation
    seen, diff = escape(step.observation.text), ""
    if base is not None and base.text != step.observation.text:  # the layers' edit, word by word
        base_html, seen = compare.word_diff(base.text, step.observation.text)
        diff = f"<div><b>base observation</b><pre class='base'>{base_html}</pre></div>"
    effects = "".join(compare.badge(e) for e in step.effects if isinstance(e, dict))
    turn = step.turn
    model = ""
    if turn is not None:
        model = (f"<details><summary>model turn: {len(turn.completion_token_ids or [])} completion tokens, "
                 f"{step.policy_s:.2f} s</summary><pre class='completion'>{escape(turn.text or '')}</pre>"
                 f"{_prompt(info, src)}</details>")
    return (f"<tr class='step {cls}'><td>{step.index}</td><td>{_action(step.proposed)}</td>"
            f"<td>{_action(step.executed)} {''.join(marks)}"
            f"{f'<br><span class=bad>{escape(step.blocked)}</span>' if step.blocked else ''}"
            f"{f'<br><span class=bad>{escape(step.invalid)}</span>' if step.invalid else ''}</td>"
            f"<td><div class='cols'><div><b>seen</b><pre class='seen'>{seen}</pre></div>{diff}</div>{model}</td>"
            f"<td>{step.reward}{_step_meta(step)}</td><td><div class='badges'>{effects}</div></td></tr>")


def _step_meta(step: StepRecord) -> str:
    """A step's prompt tokens and env latency, where recorded."""
    parts = []
    if "prompt_tokens" in step.usage:
        parts.append(f"<span class='prompt-tokens'>{step.usage['prompt_tokens']:,} prompt tokens</span>")
    if step.env_s > 0:
        parts.append(f"<span class='env-latency'>env {step.env_s * 1000:,.0f} ms</span>")
    return f"<div class='step-meta muted'>{'<br>'.join(parts)}</div>" if parts else ""


def _steps_pager(page: StepsPage, link: str) -> str:
    """Where the shown steps are in the episode, links to the other pages, a jump to a step."""
    shown = len(page.trajectory.steps)
    where = (f"steps {page.first}–{page.first + shown - 1} of {page.total}" if shown else "no steps")
    if page.pages == 1:
        return f"<p class='steps-pager muted'>{where}</p>"
    links = [(0, "first"), (page.page - 1, "previous"), (page.page + 1, "next"), (page.pages - 1, "last")]
    anchors = " ".join(f"<a class='steps-{label}' href='{escape(link)}?page={p}'>{label}</a>"
                       for p, label in links if 0 <= p < page.pages and p != page.page)
    return (f"<div class='steps-pager'>{where} · page {page.page + 1} of {page.pages} {anchors} "
            f"<form method='get' action='{escape(link)}'>step <input name='step' type='number' min='0' "
            f"max='{page.total - 1}' size='6'> <button type='submit'>Go</button></form></div>")


def trajectory_html(page: StepsPage, index: int, seq: int) -> str:
    """An episode's head and one page of its steps (episode ``seq`` of run directory
    ``index``); prompts are fetched when opened (``static/trajectory.js``)."""
    t = page.trajectory
    link = f"/traj/{index}/{seq}"
    rows = "".join(_step_row(step, info, f"/api/traj/{index}/{seq}/prompt/{page.first + i}")
                   for i, (step, info) in enumerate(zip(t.steps, page.prompts)))
    table = ("<table id='steps'><tr><th>#</th><th>proposed</th><th>sent</th><th>observation</th><th>reward</th>"
             "<th>layer effects</th></tr>" + rows + "</table>")
    pager = _steps_pager(page, link)
    return _head(t, page.usage) + pager + table + (pager if page.pages > 1 else "")


def trajectory_page(page: StepsPage, index: int, seq: int, picker: str = "") -> str:
    """``picker``: a form to open this episode beside another run's (``compare_picker``)."""
    return layout(f"Episode {page.trajectory.key}", picker + trajectory_html(page, index, seq), ("trajectory.js",))


def compare_picker(index: int, seq: int, choices: list[tuple[int, str, str]], label: str,
                   selected: tuple[int, str] | None = None) -> str:
    """A form that opens episode ``seq`` beside the same task's episode in another run;
    ``choices``: ``(directory index, directory name, run id)`` of every run offered,
    ``selected`` the one chosen at first."""
    if not choices:
        return ""
    options = "".join(f"<option value='{d}:{escape(run)}'{' selected' if (d, run) == selected else ''}>"
                      f"{escape(name)} · {escape(run)}</option>" for d, name, run in choices)
    return (f"<form class='compare-with' method='get' action='/compare-task/{index}/{seq}'>{escape(label)} "
            f"<select name='with' aria-label='run'>{options}</select> <button type='submit'>Compare</button></form>")


def compare_page(a: compare.Side, b: compare.Side, page: int, pages: int, picker: str) -> str:
    """Two episodes aligned by step (``compare``); ``picker``: ``compare_picker``'s form."""
    here = f"/compare/{a.dir}/{a.seq}/{b.seq}" + (f"?bd={b.dir}" if b.dir != a.dir else "")
    links = (run_link(a.dir, a.trajectory.run_id), run_link(b.dir, b.trajectory.run_id), escape(here))
    return layout("Compare", compare.compare_html(a, b, page, pages, links, picker), ("compare.js",))


def text_page(title: str, text: str, images: list[str], index: int, pool: list[dict[str, Any]] | None = None,
              rounds: str = "") -> str:
    imgs = "".join(f"<img alt='{escape(i)}' src='/file/{index}/{escape(i)}' class='plot'>" for i in images)
    table = ""
    if pool:
        rows = "".join(
            f"<tr class='accepted'><td><code>{escape(p['spec_id'][:12])}</code></td>"
            f"<td>{escape(str(p['entry'].get('task', '')))}</td><td>{escape(str(p['entry'].get('target', '')))}</td>"
            f"<td>{escape(str(p['entry'].get('rationale', ''))[:200])}</td>"
            f"<td><a class='open' href='/playground?d={index}&spec={escape(p['spec_id'])}'>open in playground</a></td></tr>"
            for p in pool)
        table = ("<h2>Harness pool</h2><table id='pool'><tr><th>spec</th><th>task</th><th>target</th><th>rationale</th>"
                 "<th></th></tr>" + rows + "</table>")
    return layout(title, f"{rounds}{table}<h2>report.md</h2><pre id='report'>{escape(text)}</pre>{imgs}")


def training_page(directory: str, runs: list[MetricsRun]) -> str:
    """The training runs of a directory as small multiples (``charts``), several overlaid."""
    return layout("Training", charts.training_html(directory, runs), ("training.js",))


def playground_page(bridges: list[str], spec: str) -> str:
    options = " ".join(f"<code>{escape(b)}</code>" for b in bridges)
    return layout("Playground", f"""
<p>Installed bridges: {options}. Contract code runs in the untrusted tier.
<span class='muted'>Ctrl+Space completes keys and values from the layer kinds' schemas.</span></p>
<div class='cols'><div>
<div class='editor-wrap'><div class='editor' id='editor'><div class='gutter' id='gutter' aria-hidden='true'></div>
<div class='code'><div class='backdrop' id='backdrop' aria-hidden='true'></div>
<textarea id='spec' spellcheck='false' autocomplete='off' wrap='off'>{escape(spec)}</textarea></div></div>
<ul id='completions' class='completions' role='listbox' hidden></ul></div>
<p>task <input id='task' placeholder='split/instance_id'> <button id='check'>Check spec</button>
<button id='start'>Reset</button>
<button id='save'>Save spec</button> as <input id='savename' size='16' value='spec.yaml'></p>
<p id='error' class='bad'></p><ul id='problems'></ul>
</div><div>
<p id='state' class='state' data-state='none'>No game yet: press Reset to start one from the spec on the task.</p>
<p id='pending' class='pending' hidden>The spec or the task changed since this game started: the game goes on
as it was reset; the edits apply when you press Reset.</p>
<div id='tools'></div><div id='toolform'></div>
<p><input id='action' size='50' placeholder='tool key=value ... or JSON' disabled>
<button id='step' disabled>Step</button></p>
<div class='cols'><div><b>policy sees</b><pre id='seen'></pre></div><div><b>base observation</b><pre id='base'></pre></div></div>
<ol id='log'></ol><div class='verdict-box'><b>verdict</b><div id='verdict'></div></div>
</div></div>""", ("editor.js", "playground.js"))
