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
    document.querySelectorAll('button.tool').forEach(b => { b.disabled = !playing; });
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
    for (const id of ['seen', 'base', 'log', 'tools', 'verdict']) $(id).replaceChildren();
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
    if (out.effects) {
      const li = document.createElement('li');
      li.className = 'logline';
      li.textContent = `${out.action} -> reward ${out.reward}` + (out.done ? ' (done)' : '') + ' ' +
        JSON.stringify(out.effects);
      $('log').appendChild(li);
    }
    if (out.tools) {
      const buttons = out.tools.map(t => {
        const b = document.createElement('button');
        b.className = 'tool';
        b.textContent = t.name;
        b.title = t.description || '';
        b.addEventListener('click', () => { $('action').value = t.name + ' '; $('action').focus(); });
        return b;
      });
      $('tools').replaceChildren(...buttons);
    }
    if (out.verdict) $('verdict').textContent = JSON.stringify(out.verdict);
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
