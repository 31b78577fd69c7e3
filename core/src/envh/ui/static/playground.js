// The playground: reset a spec on a task, step it by tool buttons or typed actions, and
// show what the policy sees beside the base observation. Text from the server is set
// with textContent only.
(() => {
  'use strict';
  let session = null;
  const $ = id => document.getElementById(id);

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
    const out = await api('/api/play/new', {spec: window.envhEditor.value(), task: $('task').value});
    session = out.session || null;
    $('log').replaceChildren();
    $('verdict').textContent = '';
    show(out);
  }

  async function step() {
    if (!session) return;
    show(await api('/api/play/' + encodeURIComponent(session) + '/step', {action: $('action').value}));
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
  });
  $('check').addEventListener('click', check);
  $('save').addEventListener('click', save);
  $('start').addEventListener('click', start);
  $('step').addEventListener('click', step);
  $('action').addEventListener('keydown', e => { if (e.key === 'Enter') step(); });
})();
