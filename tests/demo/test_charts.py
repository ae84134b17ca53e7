"""The demo's charts from a made-up timeline (PNG files: their signature and size, never
their pixels), and the timeline's pieces: rates, checkpoint positions, micro-batches."""

from __future__ import annotations

import json

import matplotlib.image

from odradek.demo.charts import rates, write_charts
from odradek.demo.timeline import MicroBatch, Sample, checkpoint_position, micro_batch

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
QUERIES = ("page_view_counts_topic", "member_visits_topic")


def _timeline() -> tuple[list[Sample], list[MicroBatch]]:
    """20 s of 200 page views and 50 searches a second; the first query commits every 5 s,
    the second only once, at 15 s (no position before: nothing committed yet)."""
    samples = []
    for i in range(41):
        t = 1000.0 + i / 2
        views = 100 * i
        positions = {QUERIES[0]: 100 * (i - i % 10)}
        if i >= 30:
            positions[QUERIES[1]] = 3000
        samples.append(Sample(t, {"page_views": views, "searches": 25 * i}, positions))
    batches = [MicroBatch(QUERIES[0], 1000.0 + 5 * k, 1000, 800 + 10 * k) for k in range(4)]
    batches.append(MicroBatch(QUERIES[1], 1015.0, 3000, 2500))
    return samples, batches


def _png_size(path) -> tuple[int, int]:
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    height, width = matplotlib.image.imread(path).shape[:2]
    return width, height


def test_write_charts_makes_three_pngs(tmp_path):
    samples, batches = _timeline()
    paths = write_charts(samples, batches, tmp_path / "report", ["page_views", "searches"], "page_views")
    assert [p.name for p in paths] == ["throughput.png", "streaming.png", "lag.png"]
    sizes = {p.name: _png_size(p) for p in paths}
    assert sizes == {"throughput.png": (1100, 400), "streaming.png": (1100, 400), "lag.png": (800, 400)}
    assert all(0 < p.stat().st_size < 100_000 for p in paths)


def test_nothing_to_draw_writes_nothing(tmp_path):
    assert write_charts([], [], tmp_path / "report", ["page_views"], "page_views") == []
    one = [Sample(1.0, {"page_views": 5})]
    assert write_charts(one, [], tmp_path / "report", ["page_views"], "page_views") == []
    assert not (tmp_path / "report").exists()


def test_lag_counts_everything_before_the_first_commit():
    sample = Sample(0.0, {"page_views": 700}, {QUERIES[0]: 650})
    assert (sample.lag(QUERIES[0], "page_views"), sample.lag(QUERIES[1], "page_views")) == (50, 700)


def test_rates_per_second_between_points():
    assert rates([0.0, 0.5, 1.5, 1.5, 2.0], [0, 100, 300, 400, 50]) == ([0.5, 1.5, 2.0], [200.0, 200.0, 0.0])


def test_checkpoint_position_is_the_last_committed_batch(tmp_path):
    checkpoint = tmp_path / "query"
    assert checkpoint_position(checkpoint, "page_views") is None  # not started
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    for batch, offsets in enumerate(({"0": 10, "1": 5}, {"0": 30, "1": 12}, {"0": 50, "1": 40})):
        (checkpoint / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n" + json.dumps({"page_views": offsets}) + "\n")
    assert checkpoint_position(checkpoint, "page_views") is None  # planned, nothing committed
    for batch in (0, 1):
        (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")
    (checkpoint / "commits" / ".2.tmp").write_text("")  # Spark's file being written: not a commit
    assert checkpoint_position(checkpoint, "page_views") == 42
    assert checkpoint_position(checkpoint, "searches") is None


def test_micro_batch_from_a_progress_report():
    progress = {"name": "q", "timestamp": "2026-11-29T03:54:06.279Z", "numInputRows": 1476,
                "durationMs": {"triggerExecution": 9321, "addBatch": 8000}}
    assert micro_batch(progress) == MicroBatch("q", 1795924446.279, 1476, 9321)
