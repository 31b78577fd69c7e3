// The playground: reset a spec on a task, step it by tool buttons or typed actions, and
// show what the policy sees beside the base observation. The page is always in one stated
// state (no game, busy, playing, game over, error) and Step works only while playing.
// Text from the server is set with textContent only.
(() => {
  'use strict';
  let session = null;
  let started = null;  // the spec and task the running game was reset from
  let steps = 0;
  const $ = id => document.getElementById(id);

  function setState(state, text) {
    $('state').dataset.state = state;
    $('state').textContent = text;
    const playing = state === 'playing';
    $('step').disabled = !playing;
    $('action').disabled = !playing;
    $('start').disabled = state === 'busy';
    document.querySelectorAll('button.tool, #toolform button').forEach(b => { b.disabled = !playing; });
    pending();
  }

  function pending() {  // edits reach a game only through Reset: say so while they are waiting
    const changed = session !== null && started !== null &&
      (window.envhEditor.value() !== started.spec || $('task').value !== started.task);
    $('pending').hidden = !changed;
  }

  function clearGame() {
    session = null;
    started = null;
    steps = 0;
    for (const id of ['seen', 'base', 'log', 'tools', 'toolform', 'verdict']) $(id).replaceChildren();
  }

  async function api(path, body) {
    const r = await fetch(path, {method: 'POST', headers: {'content-type': 'application/json'},
                                 body: JSON.stringify(body)});
    if (!r.ok) return {error: `HTTP ${r.status}: ${await r.text()}`, error_type: 'HTTPError'};
    return r.json();
  }

  function showError(out, source = 'play') {
    $('error').textContent = out.error ? String(out.error) : '';
    $('error').dataset.type = out.error_type || '';
    $('error').dataset.source = source;
    $('error').className = 'bad';
    if (out.markers) window.envhEditor.setMarkers(out.markers);
  }

  function show(out) {
    showError(out);
    if (out.error) return;
    $('seen').textContent = out.observation;
    $('base').textContent = out.base_observation ?? '(same)';
    if (out.effects) $('log').appendChild(logLine(out));
    if (out.tools) {
      const buttons = out.tools.map(t => {
        const b = document.createElement('button');
        b.className = 'tool';
        b.textContent = t.name;
        b.title = t.description || '';
        b.addEventListener('click', () => toolForm(t));
        return b;
      });
      $('tools').replaceChildren(...buttons);
    }
    if (out.verdict) showVerdict(out.verdict);
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  // one step: the action, its reward, how the episode stands, each layer's effect as a badge
  function logLine(out) {
    const li = el('li', 'logline');
    li.append(el('code', 'act', out.action), ' ', el('span', 'reward', `reward ${out.reward}`));
    if (out.terminated) li.append(' ', el('span', 'tag ended', 'terminated'));
    if (out.truncated) li.append(' ', el('span', 'tag ended', 'truncated'));
    const badges = el('div', 'badges');
    for (const b of out.badges || []) {
      const span = el('span', 'badge ' + b.cls, b.text);
      span.title = b.title;
      badges.appendChild(span);
    }
    if (badges.childNodes.length) li.appendChild(badges);
    return li;
  }

  function showVerdict(v) {
    const head = el('p', v.success ? 'ok' : 'bad', v.success ? 'success' : 'failure');
    head.append(el('span', 'muted', ` · score ${v.score}`));
    const metrics = Object.entries(v.metrics || {});
    if (!metrics.length) { $('verdict').replaceChildren(head); return; }
    const table = el('table', 'verdict-metrics');
    for (const [k, value] of metrics) {
      const tr = el('tr');
      tr.append(el('th', '', k), el('td', '', typeof value === 'string' ? value : JSON.stringify(value)));
      table.appendChild(tr);
    }
    $('verdict').replaceChildren(head, table);
  }

  // a tool's JSON schema as a form: one input per parameter (enums as selects, numbers as
  // number inputs, required ones marked); sending it steps with the well-formed JSON action
  function field(name, prop, required) {
    const label = el('label', 'param');
    label.append(el('span', 'pname', name + (required ? ' *' : '')));
    let input;
    if (Array.isArray(prop.enum)) {
      input = el('select');
      if (!required) input.appendChild(el('option', '', ''));
      for (const v of prop.enum) {
        const o = el('option', '', v);
        o.value = JSON.stringify(v);
        input.appendChild(o);
      }
      input.dataset.kind = 'json';
    } else if (prop.type === 'integer' || prop.type === 'number') {
      input = el('input');
      input.type = 'number';
      input.step = prop.type === 'integer' ? '1' : 'any';
      if (prop.minimum !== undefined) input.min = prop.minimum;
      if (prop.maximum !== undefined) input.max = prop.maximum;
      input.dataset.kind = 'number';
    } else if (prop.type === 'boolean') {
      input = el('input');
      input.type = 'checkbox';
      input.dataset.kind = 'boolean';
    } else {
      input = el('input');
      input.dataset.kind = prop.type === 'string' ? 'string' : 'json';
      if (input.dataset.kind === 'json') input.placeholder = 'JSON';
    }
    input.name = name;
    input.required = required && input.type !== 'checkbox';
    if (prop.description) input.title = prop.description;
    input.setAttribute('aria-label', name);
    label.append(' ', input);
    return label;
  }

  function formArgs(form) {
    const args = {};
    for (const input of form.querySelectorAll('input, select')) {
      const kind = input.dataset.kind;
      if (kind === 'boolean') { args[input.name] = input.checked; continue; }
      if (input.value === '') continue;
      if (kind === 'number') args[input.name] = Number(input.value);
      else if (kind === 'json') {
        try { args[input.name] = JSON.parse(input.value); } catch (err) { args[input.name] = input.value; }
      } else args[input.name] = input.value;
    }
    return args;
  }

  function toolForm(tool) {
    const schema = tool.parameters || {};
    const props = schema.properties || {};
    const required = new Set(schema.required || []);
    const form = el('form', 'toolform');
    form.dataset.tool = tool.name;
    form.append(el('b', '', tool.name), ' ');
    if (tool.description) form.append(el('span', 'muted', tool.description));
    const fields = el('div', 'params');
    for (const [name, prop] of Object.entries(props)) fields.appendChild(field(name, prop || {}, required.has(name)));
    const send = el('button', '', `Step with ${tool.name}`);
    send.type = 'submit';
    send.disabled = $('step').disabled;
    form.append(fields, send);
    form.addEventListener('submit', e => {
      e.preventDefault();
      $('action').value = JSON.stringify({tool: tool.name, args: formArgs(form)});
      step();
    });
    $('toolform').replaceChildren(form);
    const first = form.querySelector('input, select');
    (first || send).focus();
  }

  async function start() {
    const asked = {spec: window.envhEditor.value(), task: $('task').value};
    setState('busy', 'Resetting…');
    let out;
    try {
      out = await api('/api/play/new', asked);
    } catch (err) {
      out = {error: String(err), error_type: 'NetworkError'};
    }
    clearGame();  // a failed Reset leaves no game behind: the old one was replaced or is gone
    show(out);
    if (out.error || !out.session) {
      setState('error', 'Reset failed: no game is running (the error is shown under the spec). ' +
               'Fix the spec or the task and press Reset.');
      return;
    }
    session = out.session;
    started = asked;
    setState('playing', 'Playing: no step yet. Spec and task edits apply when you press Reset.');
  }

  async function step() {
    if (!session || $('step').disabled) return;
    setState('busy', 'Stepping…');
    let out;
    try {
      out = await api('/api/play/' + encodeURIComponent(session) + '/step', {action: $('action').value});
    } catch (err) {
      out = {error: String(err), error_type: 'NetworkError'};
    }
    show(out);
    if (out.error_type === 'SessionGone') {
      clearGame();
      setState('none', 'No game: this session is gone (closed or evicted). Press Reset to start one.');
    } else if (out.error) {
      setState('playing', `Playing: step ${steps}. The last action failed (see the error); the game goes on.`);
    } else if (out.done) {
      steps += 1;
      const v = out.verdict || {};
      setState('over', `Game over after ${steps} steps: ${v.success ? 'solved' : 'not solved'}` +
               (v.score !== undefined ? ` (score ${v.score})` : '') + '. Press Reset to play again.');
    } else {
      steps += 1;
      setState('playing', `Playing: step ${steps}. Spec and task edits apply when you press Reset.`);
    }
  }

  async function check() {
    const out = await api('/api/spec/check', {spec: window.envhEditor.value()});
    showError(out, 'check');
    if (out.ok) {
      $('error').textContent = 'spec ok: ' + out.spec_id;
      $('error').className = 'ok';
    }
  }

  function save() {  // the spec as a YAML file, from the browser: the app never writes files
    const blob = new Blob([window.envhEditor.value()], {type: 'application/x-yaml'});
    const link = document.createElement('a');
    link.href = URL.createObjectURL(blob);
    link.download = ($('savename').value.trim() || 'spec.yaml').replace(/[\\/]/g, '_');
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }

  $('spec').addEventListener('input', () => {  // a check's verdict is about the text before the edit
    if ($('error').dataset.source === 'check') $('error').textContent = '';
    pending();
  });
  $('task').addEventListener('input', pending);
  $('check').addEventListener('click', check);
  $('save').addEventListener('click', save);
  $('start').addEventListener('click', start);
  $('step').addEventListener('click', step);
  $('action').addEventListener('keydown', e => { if (e.key === 'Enter') step(); });
  setState('none', 'No game yet: press Reset to start one from the spec on the task.');
})();
