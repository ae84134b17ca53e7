"""The demo's streaming job: a demo directory from before the per-minute table was copied
from the topic is taken over without Spark (the job's queries run in tests/spark/test_demo.py)."""

from __future__ import annotations

from odradek.demo.streaming_job import _forget_own_aggregation


def _checkpoint(path, sources: str):
    (path / "offsets").mkdir(parents=True)
    (path / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n' + sources + "\n")
    return path


def test_the_tables_own_aggregation_is_forgotten_with_the_table(tmp_path):
    old = _checkpoint(tmp_path / "checkpoints" / "page_views_per_minute_parquet", '{"page_views": {"0": 12}}')
    table = tmp_path / "warehouse" / "page_views_per_minute"
    (table / "_spark_metadata").mkdir(parents=True)
    _forget_own_aggregation(old, table)
    assert not old.exists() and not table.exists()  # the copy rebuilds the table from the topic's start


def test_the_copys_checkpoint_and_table_stay(tmp_path):
    copy = _checkpoint(tmp_path / "checkpoints" / "page_views_per_minute_parquet", '{"page_view_counts": {"0": 3}}')
    table = tmp_path / "warehouse" / "page_views_per_minute"
    (table / "_spark_metadata").mkdir(parents=True)
    _forget_own_aggregation(copy, table)
    _forget_own_aggregation(tmp_path / "checkpoints" / "none yet", table)
    assert (copy / "offsets" / "0").is_file() and (table / "_spark_metadata").is_dir()
