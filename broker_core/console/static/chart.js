// A small line chart drawn as inline SVG: time on x (the window up to now), values on y from 0.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#2f6fde", "#e0522b", "#12a150", "#9b51e0", "#d69e00", "#0093a8", "#c2185b", "#5d6b82"];

function svgEl(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

function niceMax(value) {
  if (value <= 0) return 1;
  const magnitude = Math.pow(10, Math.floor(Math.log10(value)));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

// HH:MM (UTC), with seconds when the chart spans less than ten minutes.
function clock(ms, seconds) {
  const d = new Date(ms);
  const parts = [d.getUTCHours(), d.getUTCMinutes()].concat(seconds ? [d.getUTCSeconds()] : []);
  return parts.map((n) => String(n).padStart(2, "0")).join(":");
}

// series: {name: [[timestamp_ms, value], ...]}; draws into the <svg> `svg`, replacing what it held. The x axis
// runs to toMs from fromMs, or from the first sample when the samples start later (a console started lately).
function drawLineChart(svg, series, fromMs, toMs) {
  const width = 900, height = 260, left = 56, right = 16, top = 12, bottom = 28;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const names = Object.keys(series).sort();
  let max = 0;
  for (const name of names) for (const [, v] of series[name]) max = Math.max(max, v);
  max = niceMax(max);
  const first = Math.min(...names.map((name) => series[name].length ? series[name][0][0] : toMs));
  if (first > fromMs && first < toMs) fromMs = first;
  const span = Math.max(1, toMs - fromMs);
  const x = (t) => left + (width - left - right) * (t - fromMs) / span;
  const y = (v) => top + (height - top - bottom) * (1 - v / max);
  for (let i = 0; i <= 4; i++) {
    const v = max * i / 4;
    svg.appendChild(svgEl("line", {class: "grid", x1: left, x2: width - right, y1: y(v), y2: y(v)}));
    const label = svgEl("text", {x: left - 6, y: y(v) + 4, "text-anchor": "end"});
    label.textContent = Number.isInteger(v) ? String(v) : v.toFixed(1);
    svg.appendChild(label);
  }
  for (let i = 0; i <= 6; i++) {
    const t = fromMs + span * i / 6;
    const label = svgEl("text", {x: x(t), y: height - 8, "text-anchor": i === 0 ? "start" : i === 6 ? "end" : "middle"});
    label.textContent = clock(t, span < 600000);
    svg.appendChild(label);
  }
  svg.appendChild(svgEl("line", {class: "axis", x1: left, x2: left, y1: top, y2: height - bottom}));
  svg.appendChild(svgEl("line", {class: "axis", x1: left, x2: width - right, y1: height - bottom, y2: height - bottom}));
  names.forEach((name, i) => {
    const color = PALETTE[i % PALETTE.length];
    const points = series[name].filter(([t]) => t >= fromMs && t <= toMs);
    const group = svgEl("g", {"data-series": name});
    if (points.length > 1) {
      group.appendChild(svgEl("polyline", {
        points: points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" "),
        fill: "none", stroke: color, "stroke-width": 2}));
    }
    for (const [t, v] of points) {
      const dot = svgEl("circle", {class: "point", cx: x(t).toFixed(1), cy: y(v).toFixed(1), r: 3, fill: color});
      const tip = svgEl("title");
      tip.textContent = `${name}: ${v} at ${new Date(t).toISOString()}`;
      dot.appendChild(tip);
      group.appendChild(dot);
    }
    svg.appendChild(group);
  });
  return names.map((name, i) => [name, PALETTE[i % PALETTE.length]]);
}
