"""PNG plots of a run (matplotlib, no display): throughput and latency against load.

- ``latency.png``: end-to-end p50 / p99 / p99.9 (ms, log scale) against the offered rate;
- ``throughput.png``: achieved against offered rate in the latency runs (the diagonal is
  keeping up), and throughput against partition count;
- ``workloads.png``: per workload, odradek's throughput and broker CPU as multiples of Tansu's;
- ``summary.png``: throughput and latency side by side, odradek and Tansu on each, from the
  latency runs (achieved against offered rate; p50 and p99 against offered rate): the chart
  the top-level README shows.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"odradek": "tab:blue", "tansu": "tab:orange"}


def _series(results: dict, kind: str, x: str, y: str) -> dict[str, tuple[list, list]]:
    out: dict[str, tuple[list, list]] = {}
    for c in results["comparisons"]:
        if c["kind"] != kind:
            continue
        for broker, med in c["median"].items():
            if med.get(x) is not None and med.get(y) is not None:
                xs, ys = out.setdefault(broker, ([], []))
                xs.append(med[x])
                ys.append(med[y])
    return out


def _draw_latency(ax, results: dict, metrics=("p50_ms", "p99_ms", "p999_ms")) -> None:
    """End-to-end latency percentiles against the offered rate, per broker (log-log)."""
    styles = {"p50_ms": ":", "p99_ms": "-", "p999_ms": "--"}
    for metric in metrics:
        for broker, (xs, ys) in _series(results, "latency", "offered_records_per_s", metric).items():
            ax.plot(xs, ys, styles[metric], marker="o", color=COLORS.get(broker), label=f"{broker} {metric[:-3]}")
    ax.set(xscale="log", yscale="log", xlabel="offered load (records/s of 100 B)",
           ylabel="end-to-end latency (ms)", title="Latency against load")
    ax.axhline(5, color="grey", lw=0.8)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)


def _draw_offered(ax, results: dict) -> None:
    """Achieved against offered rate in the latency runs, per broker; the diagonal keeps up."""
    top = 0
    for broker, (xs, ys) in _series(results, "latency", "offered_records_per_s", "throughput").items():
        ax.plot(xs, ys, marker="o", color=COLORS.get(broker), label=broker)
        top = max(top, *xs, *ys)
    ax.plot([0, top], [0, top], color="grey", lw=0.8, label="offered")
    ax.set(xlabel="offered (records/s)", ylabel="achieved (records/s)", title="Throughput against load")
    ax.legend()


def latency_plot(results: dict, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 5))
    _draw_latency(ax, results)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_plot(results: dict, path: Path) -> None:
    """Throughput and latency side by side, both brokers on each; nothing without latency runs."""
    if not _series(results, "latency", "offered_records_per_s", "throughput"):
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.5))
    _draw_offered(a, results)
    _draw_latency(b, results, ("p50_ms", "p99_ms"))
    a.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def throughput_plot(results: dict, path: Path) -> None:
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.5))
    _draw_offered(a, results)
    for broker in ("odradek", "tansu"):
        pts = sorted((int(c["key"].split("_")[1]), c["median"][broker]["throughput"])
                     for c in results["comparisons"]
                     if c["kind"] == "partitions" and broker in c["median"])
        if pts:
            b.plot(*zip(*pts), marker="o", color=COLORS[broker], label=broker)
    b.set(xscale="log", xlabel="partitions", ylabel="produce records/s",
          title="Throughput against partitions")
    if b.get_legend_handles_labels()[0]:
        b.legend()
    for ax in (a, b):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def workloads_plot(results: dict, path: Path) -> None:
    comps = [c for c in results["comparisons"] if c["kind"] == "throughput" and c["ratio"].get("throughput")]
    if not comps:
        return
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(comps) + 1.5))
    ys = range(len(comps))
    ax.barh([y - 0.2 for y in ys], [c["ratio"]["throughput"] for c in comps], 0.4,
            label="throughput (higher is better)", color="tab:blue")
    ax.barh([y + 0.2 for y in ys], [c["ratio"].get("cpu_per_unit") or 0 for c in comps], 0.4,
            label="broker CPU per unit (lower is better)", color="tab:red")
    ax.axvline(1, color="black", lw=0.8)
    ax.set_yticks(list(ys), [c["title"] for c in comps], fontsize=8)
    ax.set(xscale="log", xlabel="odradek / Tansu (medians)", title="odradek as a multiple of Tansu")
    ticks = [0.1, 0.25, 0.5, 1, 2, 4, 8]
    ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
    ax.minorticks_off()
    ax.invert_yaxis()
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(results: dict, results_dir: Path) -> list[Path]:
    paths = []
    for name, fn in (("latency.png", latency_plot), ("throughput.png", throughput_plot),
                     ("workloads.png", workloads_plot), ("summary.png", summary_plot)):
        path = results_dir / name
        fn(results, path)
        if path.exists():
            paths.append(path)
    return paths
