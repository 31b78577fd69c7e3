// The playground's spec editor: a textarea over a backdrop that marks problem lines (with
// their message at the line's end), a gutter of line numbers with problem marks, and
// completion of keys and enum values from the layer kinds' schemas (POST /api/spec/complete).
// Everything the server sends is shown with textContent: nothing is parsed as HTML.
(() => {
  'use strict';
  const ta = document.getElementById('spec');
  const editor = document.getElementById('editor');
  const gutter = document.getElementById('gutter');
  const backdrop = document.getElementById('backdrop');
  const box = document.getElementById('completions');
  const problems = document.getElementById('problems');
  const PAD = 4;
  let markers = [];
  let items = [];
  let active = 0;
  let range = null;
  let asked = 0;
  let validateTimer = null;
  let completeTimer = null;

  const probe = document.createElement('span');
  probe.className = 'probe';
  probe.textContent = 'x'.repeat(64);
  editor.appendChild(probe);
  const charWidth = () => probe.getBoundingClientRect().width / 64;
  const lineHeight = () => parseFloat(getComputedStyle(ta).lineHeight) || 20;

  // the server counts characters (code points), the textarea UTF-16 units: they differ
  // after any character outside the BMP (an emoji in a comment)
  const toPoints = (text, units) => Array.from(text.slice(0, units)).length;
  const toUnits = (text, points) => Array.from(text).slice(0, points).join('').length;

  async function post(path, body) {
    const r = await fetch(path, {method: 'POST', headers: {'content-type': 'application/json'},
                                 body: JSON.stringify(body)});
    return r.json();
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function render() {
    const lines = ta.value.split('\n');
    const byLine = new Map();
    for (const m of markers) {
      if (Number.isInteger(m.line) && m.line >= 1) byLine.set(m.line, [...(byLine.get(m.line) || []), m]);
    }
    const gut = [];
    const back = [];
    lines.forEach((text, i) => {
      const here = byLine.get(i + 1);
      const g = el('div', here ? 'marked' : '', String(i + 1));
      const b = el('div', here ? 'line marked' : 'line');
      b.appendChild(el('span', 'text', text));
      if (here) {
        const message = here.map(m => String(m.message)).join(' · ');
        g.title = message;
        g.dataset.line = b.dataset.line = String(i + 1);
        b.appendChild(el('span', 'msg', message));
      }
      gut.push(g);
      back.push(b);
    });
    gutter.replaceChildren(...gut);
    backdrop.replaceChildren(...back);
    // sizes through the CSSOM, which the Content-Security-Policy allows (style attributes it does not)
    ta.style.height = `${lines.length * lineHeight() + 2 * PAD}px`;
    const longest = lines.reduce((n, l) => Math.max(n, l.length), 0);
    ta.style.width = `${Math.max(editor.clientWidth - gutter.offsetWidth, (longest + 4) * charWidth() + 2 * PAD)}px`;
    problems.replaceChildren(...markers.map(m => el(
      'li', 'problem', `${m.line ? `line ${m.line}` : 'spec'}${m.path ? ` (${m.path})` : ''}: ${m.message}`)));
  }

  function setMarkers(list) {
    markers = Array.isArray(list) ? list : [];
    render();
  }

  function hide() {
    box.hidden = true;
    items = [];
  }

  function paint() {
    [...box.children].forEach((li, i) => li.classList.toggle('active', i === active));
    const li = box.children[active];
    if (li) li.scrollIntoView({block: 'nearest'});
  }

  function show(offset) {
    box.replaceChildren(...items.map((it, i) => {
      const li = el('li', 'completion');
      li.setAttribute('role', 'option');
      li.appendChild(el('span', 'label', String(it.label)));
      if (it.detail) li.appendChild(el('span', 'detail', String(it.detail).split('\n')[0]));
      li.title = String(it.detail || '');
      li.addEventListener('mousedown', e => { e.preventDefault(); accept(i); });
      return li;
    }));
    const before = ta.value.slice(0, offset);
    const line = before.split('\n').length - 1;
    const col = before.length - before.lastIndexOf('\n') - 1;
    box.style.left = `${gutter.offsetWidth + PAD + col * charWidth() - editor.scrollLeft}px`;
    box.style.top = `${PAD + (line + 1) * lineHeight() - editor.scrollTop + 2}px`;
    box.hidden = false;
    paint();
  }

  async function complete() {
    const text = ta.value;
    const offset = ta.selectionStart;
    const mine = ++asked;
    if (offset !== ta.selectionEnd) return hide();
    let out;
    try {
      out = await post('/api/spec/complete', {spec: text, offset: toPoints(text, offset)});
    } catch (err) {
      return hide();
    }
    if (mine !== asked || ta.value !== text || ta.selectionStart !== offset) return;  // stale answer
    range = [toUnits(text, out.from), toUnits(text, out.to)];
    const current = text.slice(range[0], range[1]);  // an item that is already there is no suggestion
    items = (Array.isArray(out.items) ? out.items : []).filter(it => String(it.insert).trim() !== current);
    active = 0;
    if (items.length) show(offset); else hide();
  }

  function accept(i) {
    const it = items[i];
    if (!it || !range) return;
    const [from, to] = range;
    hide();
    ta.focus();
    ta.setSelectionRange(from, to);
    // insertText keeps the browser's undo history (and fires 'input': the marks are redone)
    if (!document.execCommand('insertText', false, String(it.insert))) {
      ta.setRangeText(String(it.insert), from, to, 'end');
      changed(null);
    }
    complete();  // accepting a key offers its values
  }

  async function validate() {
    const text = ta.value;
    let out;
    try {
      out = await post('/api/spec/check', {spec: text, build: false});
    } catch (err) {
      return;
    }
    if (ta.value === text) setMarkers(out.markers);
  }

  function changed(e) {
    markers = [];  // their lines may have moved: checked again once typing pauses
    render();
    clearTimeout(completeTimer);
    // typing asks for suggestions; a paste, a deletion or a new line closes them
    if (e && e.inputType === 'insertText' && e.data && e.data.length === 1) completeTimer = setTimeout(complete, 40);
    else hide();
    clearTimeout(validateTimer);
    validateTimer = setTimeout(validate, 500);
  }

  ta.addEventListener('input', changed);
  ta.addEventListener('keydown', e => {
    if (e.key === ' ' && e.ctrlKey) {
      e.preventDefault();
      complete();
      return;
    }
    if (box.hidden || !items.length) return;
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      active = (active + (e.key === 'ArrowDown' ? 1 : items.length - 1)) % items.length;
      paint();
    } else if (e.key === 'Enter' || e.key === 'Tab') {
      accept(active);
    } else if (e.key === 'Escape') {
      hide();
    } else {
      const modifier = ['Shift', 'Control', 'Alt', 'Meta', 'CapsLock'].includes(e.key);
      if (!modifier && (e.key.length > 1 || e.ctrlKey || e.metaKey || e.altKey)) hide();  // the caret moves away
      return;
    }
    e.preventDefault();
  });
  ta.addEventListener('blur', hide);
  ta.addEventListener('click', hide);
  editor.addEventListener('scroll', hide);
  window.addEventListener('resize', render);

  window.envhEditor = {setMarkers, value: () => ta.value};
  render();
  validate();
})();
