"""The pure half of ``bench/bench_scale.py``: its options, the topics a partition count is
spread over, percentiles, results merged run over run, the goals, the README table and the plot.

Nothing here starts a process or reads the clock, so ``bench/harness/tests/test_scale.py``
checks it on made-up figures.

A **run** (one partition count on a fresh cluster) is a dict; every key but ``partitions`` may
be missing (a skipped or failed phase)::

    {"partitions": 1000, "revision": "f1fc656", "dirty": false, "date": "2026-12-06 13:30 UTC",
     "create_s": 4.2, "delete_s": 3.1, "delete_metadata_s": 2.0,
     "idle": {"seconds": 30, "brokers": {"1": 0.02, ...}, "zookeeper": 0.004,
              "cluster": 0.07, "others": 0.9},          # cores: CPU-s per wall second
     "rss_mb": {"1": 180.0, ...}, "hwm_mb": {"1": 200.0, ...},
     "failover": {"controller": 2, "seconds": 6.8, "led": 333},
     "produce": {"records": 100000, "rps": 52000.0, "p50_ms": 12.0, "p99_ms": 40.0, "failed": 0,
                 "cpu_ms_per_k": 90.0, "cluster_cores": 1.2,
                 "paced": {"rate": 1000, "records": 10000, "p50_ms": 8.0, "p99_ms": 30.0, "failed": 0}},
     "consumers": {"members": 300, "rebalance_s": 9.0, "produce_rps": 30000.0, "p99_ms": 80.0,
                   "consumed": 100000, "consume_rps": 28000.0},
     "errors": {"phase": "message"}}

The results file (``bench/results/scale.json``, and ``bench/published/scale.json`` for the
README) is ``{"runs": [run, ...]}`` with at most one run per partition count, sorted by count:
`merge` lets a later run at 10,000 and 30,000 partitions join earlier ones at 300 and 1,000.
"""

from __future__ import annotations

import math
from pathlib import Path

PHASES = ("idle", "produce", "consumers", "failover", "delete")
README_START, README_END = "<!-- bench:scale -->", "<!-- /bench:scale -->"

# The goals the figures are held to (the plot draws each as a dashed line at its count).
GOALS = {
    "idle": (10_000, 0.1, "idle CPU of the whole cluster at 10,000 partitions < 0.1 cores"),
    "create": (10_000, 20.0, "create or delete 10,000 partitions <= 20 s"),
    "failover": (30_000, 10.0, "controller failover at 30,000 partitions <= 10 s"),
    "rss": (30_000, 1024.0, "RSS per broker at 30,000 partitions <= 1 GB"),
}


# -- options ----------------------------------------------------------------------------------


def parse_counts(text: str) -> list[int]:
    """``"1000,10k,30_000"`` -> ``[1000, 10000, 30000]`` (sorted, no duplicates)."""
    counts = set()
    for item in text.split(","):
        item = item.strip().lower().replace("_", "")
        if not item:
            continue
        value = int(float(item[:-1]) * 1000) if item.endswith("k") else int(item)
        if value < 1:
            raise ValueError(f"a partition count must be positive: {item!r}")
        counts.add(value)
    if not counts:
        raise ValueError("no partition count given")
    return sorted(counts)


def parse_skip(text: str) -> frozenset[str]:
    """``"consumers,failover"`` -> the phases to skip; an unknown name is an error."""
    names = {s.strip() for s in text.split(",") if s.strip()}
    unknown = names - set(PHASES)
    if unknown:
        raise ValueError(f"unknown phase(s) {sorted(unknown)}; the phases are {', '.join(PHASES)}")
    return frozenset(names)


def topic_layout(count: int, per_topic: int, prefix: str = "scale") -> list[tuple[str, int]]:
    """``count`` partitions as topics of ``per_topic`` partitions (the last one holds the rest):
    ``[("scale-000", 100), ...]``; names sort in creation order."""
    if per_topic < 1:
        raise ValueError("per_topic must be positive")
    n = math.ceil(count / per_topic)
    width = max(3, len(str(n - 1)))
    return [(f"{prefix}-{i:0{width}d}", min(per_topic, count - i * per_topic)) for i in range(n)]


def targets(layout) -> list[tuple[str, int]]:
    """Every partition once, partition-major so that consecutive records go to different topics."""
    return [(t, p) for p in range(max(n for _, n in layout)) for t, n in layout if p < n]


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by the nearest-rank method; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def cores(cpu_before: dict, cpu_after: dict, seconds: float) -> dict:
    """CPU-s spent per wall second by each key present in both (a process that died is left out)."""
    return {k: (cpu_after[k] - cpu_before[k]) / seconds for k in cpu_before if k in cpu_after}


# -- results ----------------------------------------------------------------------------------


def merge(old: dict | None, runs: list[dict]) -> dict:
    """``old``'s runs with ``runs`` added; a new run replaces an old one of the same count."""
    by_count = {r["partitions"]: r for r in (old or {}).get("runs", [])}
    by_count.update({r["partitions"]: r for r in runs})
    return {"runs": [by_count[c] for c in sorted(by_count)]}


def _get(run: dict, *path):
    for key in path:
        if not isinstance(run, dict) or key not in run:
            return None
        run = run[key]
    return run


def max_rss_mb(run: dict) -> float | None:
    values = list((run.get("rss_mb") or {}).values())
    return max(values) if values else None


def _slowest_of_create_delete(run: dict) -> float | None:
    values = [v for v in (run.get("create_s"), run.get("delete_s")) if v is not None]
    return max(values) if values else None


GOAL_FIGURES = {
    "idle": (lambda r: _get(r, "idle", "cluster"), "cores"),
    "create": (_slowest_of_create_delete, "s"),
    "failover": (lambda r: _get(r, "failover", "seconds"), "s"),
    "rss": (max_rss_mb, "MB"),
}


def verdicts(results: dict) -> list[tuple[str, str]]:
    """Each goal with what the run at its count says: ``(goal text, "met: 0.06 cores")``, or
    ``"not measured yet"`` when no run has that count (or that figure)."""
    runs = {r["partitions"]: r for r in results.get("runs", [])}
    out = []
    for name, (count, limit, text) in GOALS.items():
        figure, unit = GOAL_FIGURES[name]
        value = figure(runs[count]) if count in runs else None
        seen = "not measured yet" if value is None else \
            f"{'met' if value <= limit else 'NOT met'}: {value:.3g} {unit}"
        out.append((text, seen))
    return out


# -- the README table -------------------------------------------------------------------------


def _fmt(value, spec: str = ".1f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


ROWS = (
    ("revision, date", lambda r: f"{r.get('revision', '?')}{' (+dirty)' if r.get('dirty') else ''}, "
                                 f"{r.get('date', '?')}"),
    ("create (all led in Metadata)", lambda r: _fmt(r.get("create_s"), ".1f", " s")),
    ("delete (gone from Metadata / disk)", lambda r: f"{_fmt(r.get('delete_metadata_s'), '.1f', ' s')} / "
                                                     f"{_fmt(r.get('delete_s'), '.1f', ' s')}"),
    ("busy after every ISR was full (settled)", lambda r: _fmt(r.get("settled_s"), ".0f", " s")),
    ("idle CPU, cluster (3 brokers + ZooKeeper)", lambda r: _fmt(_get(r, "idle", "cluster"), ".3f", " cores")),
    ("idle CPU per broker", lambda r: " / ".join(_fmt(v, ".3f") for v in (_get(r, "idle", "brokers") or {}).values())
        or "-"),
    ("idle CPU, ZooKeeper", lambda r: _fmt(_get(r, "idle", "zookeeper"), ".3f", " cores")),
    ("other processes during the idle window", lambda r: _fmt(_get(r, "idle", "others"), ".2f", " cores")),
    ("RSS per broker (after create)", lambda r: " / ".join(_fmt(v, ".0f") for v in (r.get("rss_mb") or {}).values())
        + (" MB" if r.get("rss_mb") else "-")),
    ("controller failover (kill -9 to all led)", lambda r: _fmt(_get(r, "failover", "seconds"), ".1f", " s")),
    ("produce full speed, acks=all (records/s, p99 incl. queue)", lambda r: f"{_fmt(_get(r, 'produce', 'rps'), ',.0f')}, "
                                                      f"{_fmt(_get(r, 'produce', 'p99_ms'), '.0f', ' ms')}"),
    ("cluster CPU per 1,000 records produced (full speed)", lambda r: _fmt(_get(r, "produce", "cpu_ms_per_k"), ".0f",
                                                                            " ms")),
    ("produce paced, acks=all (p50, p99)", lambda r: (f"{_fmt(_get(r, 'produce', 'paced', 'p50_ms'), '.0f', ' ms')}, "
                                                       f"{_fmt(_get(r, 'produce', 'paced', 'p99_ms'), '.0f', ' ms')}"
                                                       + (f" at {_get(r, 'produce', 'paced', 'rate'):,.0f}/s"
                                                          if _get(r, "produce", "paced", "rate") else ""))),
    ("with consumers: group formed", lambda r: _fmt(_get(r, "consumers", "rebalance_s"), ".1f", " s")
        + (f" ({_get(r, 'consumers', 'members')} members)" if _get(r, "consumers", "members") else "")),
    ("with consumers: produce (records/s, p99)", lambda r: f"{_fmt(_get(r, 'consumers', 'produce_rps'), ',.0f')}, "
                                                            f"{_fmt(_get(r, 'consumers', 'p99_ms'), '.0f', ' ms')}"),
    ("with consumers: consumed (records/s)", lambda r: _fmt(_get(r, "consumers", "consume_rps"), ",.0f")),
)


def table(results: dict) -> str:
    """Markdown: one column per partition count, one row per figure, then the goals."""
    runs = results.get("runs", [])
    lines = ["| | " + " | ".join(f"{r['partitions']:,} partitions" for r in runs) + " |",
             "|---|" + "---:|" * len(runs)]
    lines += [f"| {name} | " + " | ".join(fn(r) for r in runs) + " |" for name, fn in ROWS]
    errors = [f"{r['partitions']:,} partitions, {phase}: {msg}" for r in runs
              for phase, msg in (r.get("errors") or {}).items()]
    lines += ["", "| goal | seen |", "|---|---|"] + [f"| {g} | {s} |" for g, s in verdicts(results)]
    if errors:
        lines += ["", "Phases that failed: " + "; ".join(errors)]
    return "\n".join(lines)


def update_readme(path: Path, text: str) -> bool:
    """Put ``text`` between `README_START` and `README_END` in ``path``; False (file untouched)
    when the markers are missing."""
    old = path.read_text()
    if README_START not in old or README_END not in old:
        return False
    before, rest = old.split(README_START, 1)
    path.write_text(f"{before}{README_START}\n{text}\n{README_END}{rest.split(README_END, 1)[1]}")
    return True


# -- the plot ---------------------------------------------------------------------------------


def _series(runs: list[dict], fn) -> tuple[list, list]:
    points = [(r["partitions"], fn(r)) for r in runs]
    points = [(x, y) for x, y in points if y is not None]
    return [x for x, _ in points], [y for _, y in points]


def _panel(ax, runs, curves, title, ylabel, goal=None, logy=False) -> None:
    for label, fn in curves:
        xs, ys = _series(runs, fn)
        if xs:
            ax.plot(xs, ys, marker="o", label=label)
    if goal:
        count, limit, _ = GOALS[goal]
        ax.axhline(limit, color="tab:red", ls="--", lw=0.8)
        ax.plot([count], [limit], marker="*", color="tab:red", ms=10, ls="", label=f"goal at {count:,}")
    ax.set(xscale="log", xlabel="partitions (RF 3)", ylabel=ylabel, title=title)
    # The same span on every panel whatever was measured, so later counts land in place.
    xs = [r["partitions"] for r in runs] + [g[0] for g in GOALS.values()]
    ax.set_xlim(min(xs) / 1.5, max(xs) * 1.5)
    ticks = sorted(set(xs))
    ax.set_xticks(ticks, [f"{t / 1000:g}k" if t >= 1000 else str(t) for t in ticks], fontsize=7)
    ax.minorticks_off()
    if logy:
        ax.set_yscale("log")
    else:
        ax.set_ylim(0, max(ax.get_ylim()[1], GOALS[goal][1] * 1.2 if goal else 0))
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def plot(results: dict, path: Path) -> Path:
    """One PNG, six panels against the count: idle CPU, RSS, create/delete, failover, produce
    records/s, produce p99 latency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results.get("runs", [])
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    axes = axes.ravel()
    _panel(axes[0], runs, [("cluster", lambda r: _get(r, "idle", "cluster")),
                           ("ZooKeeper", lambda r: _get(r, "idle", "zookeeper"))],
           "Idle CPU (30 s, no traffic)", "cores", "idle")
    _panel(axes[1], runs, [("largest broker", max_rss_mb)], "RSS per broker", "MB", "rss")
    _panel(axes[2], runs, [("create", lambda r: r.get("create_s")), ("delete", lambda r: r.get("delete_s"))],
           "Create / delete all partitions", "seconds", "create")
    _panel(axes[3], runs, [("kill -9 controller", lambda r: _get(r, "failover", "seconds"))],
           "Controller failover", "seconds", "failover")
    _panel(axes[4], runs, [("produce alone", lambda r: _get(r, "produce", "rps")),
                           ("with consumers", lambda r: _get(r, "consumers", "produce_rps")),
                           ("consumed", lambda r: _get(r, "consumers", "consume_rps"))],
           "Produce acks=all, all partitions", "records/s")
    _panel(axes[5], runs, [("paced", lambda r: _get(r, "produce", "paced", "p99_ms")),
                           ("full speed (queue included)", lambda r: _get(r, "produce", "p99_ms")),
                           ("full speed, with consumers", lambda r: _get(r, "consumers", "p99_ms"))],
           "Produce acks=all: p99 latency", "ms", logy=True)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
