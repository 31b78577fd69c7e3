// The training page: each line carries its steps and values (data-x, data-y); the slider
// redraws every line as an exponential moving average, and the pointer over a chart shows
// the values at the nearest step. Text is set with textContent only.
(() => {
  'use strict';
  const slider = document.getElementById('smooth');
  if (!slider) return;
  const shown = document.getElementById('smooth-value');
  const labels = new Map([...document.querySelectorAll('.runs-legend li[data-run]')]
    .map(li => [li.dataset.run, li.dataset.label]));

  function geometry(svg) {
    const d = svg.dataset;
    const [l, t, r, b] = d.box.split(',').map(Number);
    return {l, t, r, b, x0: Number(d.x0), x1: Number(d.x1), y0: Number(d.y0), y1: Number(d.y1)};
  }
  const X = (g, v) => g.l + (g.x1 === g.x0 ? 0.5 : (v - g.x0) / (g.x1 - g.x0)) * (g.r - g.l);
  const Y = (g, v) => g.t + (g.y1 - v) / (g.y1 - g.y0) * (g.b - g.t);
  const round = v => String(Number(v.toPrecision(4)));

  // debiased, as TensorBoard's: the first points are not pulled towards zero
  function ema(ys, w) {
    let acc = 0;
    return ys.map((y, i) => {
      acc = acc * w + (1 - w) * y;
      return w ? acc / (1 - Math.pow(w, i + 1)) : y;
    });
  }

  const lines = [...document.querySelectorAll('svg.chart .series')].map(el => {
    const ys = JSON.parse(el.dataset.y);
    return {el, xs: JSON.parse(el.dataset.x), ys, smooth: ys, g: geometry(el.ownerSVGElement)};
  });

  function draw() {
    const w = Number(slider.value);
    shown.textContent = w.toFixed(2);
    for (const line of lines) {
      line.smooth = ema(line.ys, w);
      if (line.el.tagName === 'polyline') {
        line.el.setAttribute('points', line.xs.map((x, i) =>
          `${X(line.g, x).toFixed(1)},${Y(line.g, line.smooth[i]).toFixed(1)}`).join(' '));
      }
    }
  }
  slider.addEventListener('input', draw);

  function nearest(xs, x) {
    let best = 0;
    xs.forEach((v, i) => { if (Math.abs(v - x) < Math.abs(xs[best] - x)) best = i; });
    return best;
  }

  for (const svg of document.querySelectorAll('.metric-chart svg.chart')) {
    const g = geometry(svg);
    const mine = lines.filter(l => l.el.ownerSVGElement === svg);
    const cursor = svg.querySelector('.cursor');
    const hover = svg.closest('figure').querySelector('.hover');
    svg.addEventListener('mousemove', e => {
      const p = new DOMPoint(e.clientX, e.clientY).matrixTransform(svg.getScreenCTM().inverse());
      const x = g.x0 + (Math.min(Math.max(p.x, g.l), g.r) - g.l) / (g.r - g.l) * (g.x1 - g.x0);
      const smoothing = Number(slider.value) > 0;
      let step = null;
      const parts = [];
      for (const line of mine) {
        const i = nearest(line.xs, x);
        step = step === null || Math.abs(line.xs[i] - x) < Math.abs(step - x) ? line.xs[i] : step;
        const value = round(line.ys[i]) + (smoothing ? ` (smoothed ${round(line.smooth[i])})` : '');
        parts.push(mine.length > 1 ? `${labels.get(line.el.dataset.run)}: ${value}` : value);
      }
      if (step === null) return;
      cursor.setAttribute('x1', X(g, step).toFixed(1));
      cursor.setAttribute('x2', X(g, step).toFixed(1));
      hover.textContent = `step ${step}: ${parts.join(' · ')}`;
      hover.dataset.step = String(step);
    });
  }

  for (const select of document.querySelectorAll('select.stack-run')) {
    select.addEventListener('change', () => {
      for (const svg of select.closest('figure').querySelectorAll('svg.stack')) {
        svg.classList.toggle('off', svg.dataset.run !== select.value);
      }
    });
  }
})();
