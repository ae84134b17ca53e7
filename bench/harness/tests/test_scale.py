"""The pure parts of ``bench/bench_scale.py`` (``bench/harness/scale_report.py``): options, topic
layout, percentiles, results merged run over run, goals, the README table and the plot, on
made-up figures (no broker, no timing). Run: ``.venv/bin/pytest bench/harness/tests/test_scale.py -q``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import pytest  # noqa: E402

from bench import bench_scale  # noqa: E402
from bench.harness import scale_report as report  # noqa: E402


def test_partition_counts_accept_thousands_and_sort():
    assert report.parse_counts("30k, 1000,10_000,1000") == [1000, 10000, 30000]
    assert report.parse_counts("300") == [300]
    for bad in ("", "0", "1000,-5", "ten"):
        with pytest.raises(ValueError):
            report.parse_counts(bad)


def test_skip_names_only_known_phases():
    assert report.parse_skip("consumers, failover") == {"consumers", "failover"}
    assert report.parse_skip("") == frozenset()
    with pytest.raises(ValueError, match="consumer"):
        report.parse_skip("consumer")


def test_command_line():
    args = bench_scale.parse_args(["--partitions", "1000,3000", "--skip", "consumers"])
    assert args.partitions == [1000, 3000] and args.skip == {"consumers"}
    assert bench_scale.parse_args([]).partitions == [1000, 10000, 30000]
    with pytest.raises(SystemExit):
        bench_scale.parse_args(["--skip", "everything"])
    with pytest.raises(SystemExit):
        bench_scale.parse_args(["--members", "0"])


def test_layout_spreads_the_count_over_topics_and_every_partition_is_a_target():
    layout = report.topic_layout(250, 100)
    assert layout == [("scale-000", 100), ("scale-001", 100), ("scale-002", 50)]
    assert sum(n for _, n in report.topic_layout(30000, 100)) == 30000
    order = report.targets(layout)
    assert len(order) == 250 and len(set(order)) == 250
    assert order[:3] == [("scale-000", 0), ("scale-001", 0), ("scale-002", 0)]


def test_percentile_by_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert report.percentile(values, 99) == 99.0
    assert report.percentile(values, 50) == 50.0
    assert report.percentile([7.0], 99) == 7.0
    assert report.percentile([], 99) is None


def test_cores_leave_out_a_process_that_died():
    assert report.cores({"1": 10.0, "2": 5.0}, {"1": 11.5}, 30.0) == {"1": 0.05}


def _run(count: int, **extra) -> dict:
    return {"partitions": count, "revision": "abc1234", "dirty": False, "date": "2026-12-06 13:00 UTC",
            "create_s": count / 1000, "delete_s": count / 2000, "delete_metadata_s": count / 4000,
            "idle": {"brokers": {"1": 0.01, "2": 0.01, "3": 0.01}, "zookeeper": 0.001, "cluster": 0.031},
            "rss_mb": {"1": 100.0, "2": 120.0, "3": 110.0}, "failover": {"seconds": 7.0},
            "produce": {"rps": 1000.0, "p99_ms": 50.0, "paced": {"rate": 1000, "p50_ms": 9.0, "p99_ms": 20.0}},
            "consumers": {"members": 300, "rebalance_s": 9.0, "produce_rps": 800.0, "p99_ms": 90.0,
                          "consume_rps": 790.0}, **extra}


def test_merge_keeps_earlier_counts_and_replaces_the_same_count():
    old = report.merge(None, [_run(300), _run(1000)])
    new = report.merge(old, [_run(1000, revision="def5678"), _run(30000)])
    assert [r["partitions"] for r in new["runs"]] == [300, 1000, 30000]
    assert new["runs"][1]["revision"] == "def5678"


def test_goals_are_judged_at_their_count_only():
    results = report.merge(None, [_run(1000), _run(10000, create_s=25.0), _run(30000, rss_mb={"1": 1500.0})])
    seen = dict(report.verdicts(results))
    assert seen[report.GOALS["idle"][2]] == "met: 0.031 cores"
    assert seen[report.GOALS["create"][2]] == "NOT met: 25 s"  # the slower of create and delete
    assert seen[report.GOALS["failover"][2]] == "met: 7 s"
    assert seen[report.GOALS["rss"][2]] == "NOT met: 1.5e+03 MB"
    empty = dict(report.verdicts(report.merge(None, [_run(1000)])))
    assert set(empty.values()) == {"not measured yet"}


def test_table_has_a_column_per_count_and_survives_missing_phases(tmp_path):
    partial = {"partitions": 300, "create_s": 1.0, "errors": {"failover": "TimeoutError: late"}}
    text = report.table(report.merge(None, [partial, _run(1000)]))
    assert "| | 300 partitions | 1,000 partitions |" in text
    assert "| controller failover (kill -9 to all led) | - | 7.0 s |" in text
    assert "300 partitions, failover: TimeoutError: late" in text
    assert "| produce paced, acks=all (p50, p99) | -, - | 9 ms, 20 ms at 1,000/s |" in text
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.README_START}\nold\n{report.README_END}\nafter\n")
    assert report.update_readme(readme, "new table")
    assert readme.read_text() == f"intro\n{report.README_START}\nnew table\n{report.README_END}\nafter\n"
    plain = tmp_path / "plain.md"
    plain.write_text("no markers\n")
    assert not report.update_readme(plain, "x") and plain.read_text() == "no markers\n"


def test_plot_is_a_png(tmp_path):
    path = report.plot(report.merge(None, [_run(300), _run(1000), {"partitions": 10000}]), tmp_path / "s.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
