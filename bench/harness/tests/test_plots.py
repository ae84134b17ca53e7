"""The bench's PNG plots from made-up results: every plot is written and is a PNG (never
compared pixel by pixel). Run: ``.venv/bin/pytest bench/harness/tests -q``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.harness import plots  # noqa: E402


def _results() -> dict:
    latency = [{"kind": "latency", "key": f"latency_{rate}", "ratio": {}, "median": {
        broker: {"offered_records_per_s": rate, "throughput": rate * 0.99, "p50_ms": 1.0 * k, "p99_ms": 3.0 * k,
                 "p999_ms": 6.0 * k} for broker, k in (("odradek", 1), ("tansu", 2))}} for rate in (1000, 10000)]
    partitions = [{"kind": "partitions", "key": f"partitions_{n}", "ratio": {},
                   "median": {"odradek": {"throughput": 5e5 / n}, "tansu": {"throughput": 4e5 / n}}} for n in (10, 100)]
    throughput = [{"kind": "throughput", "key": "produce", "title": "produce acks=1", "ratio": {
        "throughput": 1.5, "cpu_per_unit": 0.8}, "median": {}}]
    return {"comparisons": latency + partitions + throughput}


def test_every_plot_is_written(tmp_path):
    paths = plots.write_all(_results(), tmp_path)
    assert sorted(p.name for p in paths) == ["latency.png", "summary.png", "throughput.png", "workloads.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)


def test_no_latency_runs_no_summary(tmp_path):
    results = {"comparisons": [c for c in _results()["comparisons"] if c["kind"] != "latency"]}
    assert "summary.png" not in [p.name for p in plots.write_all(results, tmp_path)]
