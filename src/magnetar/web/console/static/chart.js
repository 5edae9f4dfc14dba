// A small inline SVG line chart for the topic page: throughput over the last minutes.
//
// Theory of operation: the page keeps a bounded history of samples per series ({t: ms, v: number});
// renderChart() redraws the whole SVG from it on every poll (a few hundred points: cheaper than diffing).
// The x axis is the last CHART_WINDOW_MS up to now, the y axis runs from 0 to the largest value shown.
"use strict";

const CHART_WINDOW_MS = 5 * 60 * 1000;
const CHART_POINTS_MAX = 600;

class History {
  constructor() {
    this.points = [];
  }
  push(t, v) {
    this.points.push({ t, v });
    const cutoff = t - CHART_WINDOW_MS;
    while (this.points.length > CHART_POINTS_MAX || (this.points.length && this.points[0].t < cutoff)) {
      this.points.shift();
    }
  }
  last() {
    return this.points.length ? this.points[this.points.length - 1].v : 0;
  }
}

function renderChart(series, opts = {}) {
  const w = opts.width || 640;
  const h = opts.height || 180;
  const pad = { l: 56, r: 10, t: 10, b: 22 };
  const now = opts.now || Date.now();
  const t0 = now - CHART_WINDOW_MS;
  let ymax = 0;
  for (const s of series) for (const p of s.points) ymax = Math.max(ymax, p.v);
  ymax = ymax > 0 ? niceCeil(ymax) : 1;
  const x = (t) => pad.l + ((t - t0) / CHART_WINDOW_MS) * (w - pad.l - pad.r);
  const y = (v) => h - pad.b - (v / ymax) * (h - pad.t - pad.b);
  let svg = `<svg class="chart" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img"` +
    ` aria-label="${esc(opts.label || "chart")}">`;
  for (let i = 0; i <= 4; i++) {
    const v = (ymax * i) / 4;
    svg += `<line class="grid" x1="${pad.l}" x2="${w - pad.r}" y1="${y(v)}" y2="${y(v)}"/>` +
      `<text class="axis" x="${pad.l - 4}" y="${y(v) + 4}" text-anchor="end">${esc(shortNum(v))}</text>`;
  }
  for (let m = 0; m <= 5; m++) {
    const t = t0 + m * 60000;
    svg += `<text class="axis" x="${x(t)}" y="${h - 6}" text-anchor="middle">${m === 5 ? "now" : "-" + (5 - m) + "m"}</text>`;
  }
  for (const s of series) {
    const pts = s.points.filter((p) => p.t >= t0).map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`);
    if (pts.length) {
      svg += `<polyline class="series" data-series="${esc(s.name)}" fill="none" stroke="${s.color}"` +
        ` stroke-width="2" points="${pts.join(" ")}"/>`;
    }
  }
  svg += "</svg>";
  const legend = series.map((s) =>
    `<span class="legend"><i style="background:${s.color}"></i>${esc(s.name)}: <b>${esc(shortNum(s.history ? s.history.last() : 0))}</b>${esc(s.unit || "")}</span>`).join(" ");
  return svg + `<div class="legends">${legend}</div>`;
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function shortNum(v) {
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (Math.abs(v) >= 1e3) return (v / 1e3).toFixed(1) + "k";
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}
