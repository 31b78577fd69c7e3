// The trajectory page holds no prompts: a step's prompt is fetched when its details open,
// as the messages new since the previous turn's prompt; "whole prompt" fetches all of them.
// Text from the server is set with textContent only.
(() => {
  'use strict';

  async function load(details, whole) {
    const pre = details.querySelector('pre.prompt');
    const note = details.querySelector('.shared');
    pre.textContent = 'loading…';
    let out;
    try {
      const r = await fetch(details.dataset.src + (whole ? '?whole=1' : ''));
      if (!r.ok) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
      out = await r.json();
    } catch (err) {
      pre.textContent = String(err);
      details.classList.add('failed');
      return;
    }
    note.textContent = out.shared ? `messages 1–${out.shared} are step ${out.after}'s prompt; then:` : '';
    pre.textContent = String(out.text);
    details.dataset.loaded = whole ? 'whole' : 'new';
    details.querySelector('button.whole').hidden = whole || !out.shared;
  }

  // 'toggle' does not bubble: one listener on the document, in the capture phase
  document.addEventListener('toggle', e => {
    const details = e.target;
    if (details.matches && details.matches('details.prompt') && details.open && !details.dataset.loaded) {
      load(details, false);
    }
  }, true);
  document.addEventListener('click', e => {
    const button = e.target.closest && e.target.closest('details.prompt button.whole');
    if (button) load(button.closest('details.prompt'), true);
  });
})();
