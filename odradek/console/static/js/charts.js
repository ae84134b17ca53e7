// Charts drawn with uPlot (vendor/uplot): a time series per container, updated in place on
// refresh. Points come from the console's samples as [[unixSeconds, value], ...].

const charts = new WeakMap(); // container -> uPlot

function columns(points) {
  return [points.map((p) => p[0]), points.map((p) => p[1])];
}

function draw(container, points, options) {
  const data = columns(points);
  const existing = charts.get(container);
  if (existing) {
    existing.setData(data);
    return existing;
  }
  container.replaceChildren();
  const chart = new uPlot(options, data, container);
  charts.set(container, chart);
  return chart;
}

// A titled line chart of a time series; `label` names the series (e.g. "messages/s").
export function lineChart(container, points, label, color = "#1f4e79") {
  if (points.length < 2) {
    if (!charts.has(container)) container.textContent = "Collecting samples…";
    return;
  }
  const size = () => ({ width: Math.max(container.clientWidth - 16, 300), height: 220 });
  const fresh = !charts.has(container);
  const chart = draw(container, points, {
    ...size(),
    series: [{}, { label, stroke: color, width: 2, fill: color + "22", points: { show: false } }],
    axes: [{}, { size: 60 }],
    scales: { y: { range: (u, min, max) => [0, Math.max(max, 1) * 1.1] } },
  });
  if (fresh) new ResizeObserver(() => chart.setSize(size())).observe(container);
}

// A sparkline: no axes, no legend, no cursor.
export function sparkline(container, points) {
  if (points.length < 2) {
    container.textContent = "–";
    return;
  }
  draw(container, points, {
    width: 120, height: 28, pxAlign: false,
    cursor: { show: false }, legend: { show: false }, select: { show: false },
    axes: [{ show: false }, { show: false }],
    scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
    series: [{}, { stroke: "#2e7d32", width: 1, fill: "#2e7d3222", points: { show: false } }],
  });
}
