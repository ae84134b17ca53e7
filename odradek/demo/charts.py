"""PNG charts of a demo run, from its timeline (``odradek.demo.timeline``).

- ``throughput.png``: records per second produced into the activity topics (the rise of
  their end offsets between samples) and read by each streaming query (the rise of its
  position), over the run's seconds; beside it the running totals in ``page_views``: its end
  offsets and each query's position;
- ``streaming.png``: each query's micro-batches side by side: input rows per batch, and how
  long the batch took (trigger execution, ms);
- ``lag.png``: each query's lag in ``page_views`` (end offsets less its position) over time.

Drawn with matplotlib's object API on the Agg canvas: no display, no pyplot state, so it
works headless, in tests and from any thread. Time runs from the first sample (seconds).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from odradek.demo.timeline import MicroBatch, Sample

__all__ = ["rates", "throughput_chart", "streaming_chart", "lag_chart", "write_charts"]

DPI = 100  # 8 x 4 inches: 800 x 400 pixels, tens of KB per chart


def _figure(width: float = 8, height: float = 4) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def _finish(ax, title: str, ylabel: str) -> None:
    ax.set(title=title, xlabel="seconds since the demo started", ylabel=ylabel)
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


def rates(times: list[float], totals: list[int]) -> tuple[list[float], list[float]]:
    """Per second between consecutive points: ``(times[1:], rises / seconds)``; a total that
    falls (a restarted count) counts as no rise."""
    xs, ys = [], []
    for i in range(1, len(times)):
        span = times[i] - times[i - 1]
        if span > 0:
            xs.append(times[i])
            ys.append(max(totals[i] - totals[i - 1], 0) / span)
    return xs, ys


def throughput_chart(samples: list[Sample], path: Path, topics: list[str], topic: str) -> Path:
    """Side by side: records/s produced into ``topics`` (summed) and read of ``topic`` by each
    query; and the running totals in ``topic``: its end offsets, and each query's position."""
    t0 = samples[0].time
    fig = _figure(11, 4)
    rate_ax, total_ax = fig.subplots(1, 2)
    times = [s.time - t0 for s in samples]
    produced = [sum(s.ends.get(t, 0) for t in topics) for s in samples]
    rate_ax.step(*rates(times, produced), where="pre", color="black", lw=1.5,
                 label=f"produced into {' + '.join(topics)}")
    total_ax.plot(times, [s.ends.get(topic, 0) for s in samples], color="black", lw=1.5,
                  label=f"end offsets of {topic}")
    for query in _queries(samples):
        read = [s.position(query) for s in samples]
        rate_ax.step(*rates(times, read), where="pre", lw=1, alpha=0.8, label=f"{query} (read)")
        total_ax.plot(times, read, lw=1, alpha=0.8, label=f"{query} (read)")
    _finish(rate_ax, "Throughput", "records per second")
    _finish(total_ax, f"Produced and read in {topic}", "offset (summed over partitions)")
    return _save(fig, path)


def streaming_chart(batches: list[MicroBatch], path: Path, t0: float) -> Path:
    """Rows per micro-batch and batch duration, per query, side by side."""
    fig = _figure(11, 4)
    rows_ax, time_ax = fig.subplots(1, 2)
    for query in sorted({b.query for b in batches}):
        mine = sorted((b for b in batches if b.query == query), key=lambda b: b.time)
        xs = [b.time - t0 for b in mine]
        rows_ax.plot(xs, [b.rows for b in mine], marker="o", ms=3, lw=1, label=query)
        time_ax.plot(xs, [b.duration_ms for b in mine], marker="o", ms=3, lw=1, label=query)
    _finish(rows_ax, "Streaming job: rows per micro-batch", "input rows")
    _finish(time_ax, "Streaming job: micro-batch duration", "ms")
    return _save(fig, path)


def lag_chart(samples: list[Sample], path: Path, topic: str) -> Path:
    """Each query's lag in ``topic`` over time."""
    t0 = samples[0].time
    fig = _figure()
    ax = fig.add_subplot()
    times = [s.time - t0 for s in samples]
    for query in _queries(samples):
        ax.plot(times, [s.lag(query, topic) for s in samples], lw=1.2, label=query)
    _finish(ax, f"Consumer lag in {topic}", "records behind the end offsets")
    return _save(fig, path)


def _queries(samples: list[Sample]) -> list[str]:
    return sorted({q for s in samples for q in s.positions})


def write_charts(samples: list[Sample], batches: list[MicroBatch], directory: Path, topics: list[str],
                 topic: str) -> list[Path]:
    """The charts there is something to draw in, written into ``directory``; their paths."""
    paths = []
    if len(samples) > 1:
        paths.append(throughput_chart(samples, directory / "throughput.png", topics, topic))
    if batches:
        t0 = samples[0].time if samples else min(b.time for b in batches)
        paths.append(streaming_chart(batches, directory / "streaming.png", t0))
    if len(samples) > 1 and _queries(samples):
        paths.append(lag_chart(samples, directory / "lag.png", topic))
    return paths
