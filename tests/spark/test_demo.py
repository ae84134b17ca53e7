"""The demo end to end at a small size, and the batch loader's offsets-with-the-output."""

from __future__ import annotations

import json
import time

from rich.console import Console

from pyspark.sql import functions as F

from odradek.client import AdminClient, NewTopic, Producer
from odradek.demo import batch_loader, streaming_job
from odradek.demo.activity import PAGE_VIEWS
from odradek.demo.pipeline import DemoConfig, create_topics, run
from odradek.demo.streaming_job import COUNT_SCHEMA, PAGE_VIEW_COUNTS


def test_demo_end_to_end(spark, tmp_path):
    console = Console(file=open(tmp_path / "report.txt", "w"), width=120)
    summary = run(DemoConfig(events=1500, members=80, directory=tmp_path / "demo", seed=3), console, spark=spark)
    console.file.close()
    assert summary["produced"] == 1500
    processed = summary["processed"]  # each query read all the page views, the Parquet copy every count
    assert {n: c for n, c in processed.items() if n != "page_views_per_minute_parquet"} == dict.fromkeys(
        ("page_view_counts_topic", "member_visits_topic", "member_visits_parquet"), summary["by_topic"]["page_views"])
    assert processed["page_views_per_minute_parquet"] == summary["count_records"]
    assert sum(summary["by_topic"].values()) == 1500 and summary["duplicates"] == 0
    assert summary["rerun"].load is None  # a rerun of the loader with no new events adds nothing
    assert summary["windows"] >= 1 and summary["count_records"] >= 1
    assert 0 < summary["members"] <= 80 and summary["busiest"][0]["visits"] >= summary["busiest"][-1]["visits"]
    assert summary["top_pages"] and all(views > 0 for _, views in summary["top_pages"])
    assert summary["window_rows"] == summary["count_records"]  # both sinks hold the same final counts
    assert summary["count_duplicates"] == 0
    charts = summary["charts"]  # the run's charts, sampled while it ran
    assert [p.name for p in charts] == ["throughput.png", "streaming.png", "lag.png"]
    assert all(p.parent == (tmp_path / "demo" / "report").resolve() and p.stat().st_size > 0 for p in charts)
    report = (tmp_path / "report.txt").read_text()
    for text in ("Top pages", "Busiest members", "Where the outputs are", "nothing new to load",
                 "the two sinks agree", "Late events:", "Exactly once, end to end, through Kafka transactions",
                 "none twice", "chart: lag"):
        assert text in report

    # A second run in the same directory: its events come after the first run's, so the
    # watermark the checkpoints kept drops only the few made late on purpose, and the report
    # says how many.
    console = Console(file=open(tmp_path / "report2.txt", "w"), width=120)
    again = run(DemoConfig(events=1500, members=80, directory=tmp_path / "demo", seed=4), console, spark=spark)
    console.file.close()
    views = again["by_topic"]["page_views"] - summary["by_topic"]["page_views"]
    late = again["late"]["page_view_counts_topic"]
    assert views > 1000 and late <= views * 0.02
    assert again["window_rows"] == again["count_records"] >= summary["count_records"]
    report = (tmp_path / "report2.txt").read_text()
    assert (f"Late events: {late:,} page views" in report) if late else ("Late events: none dropped" in report)


def test_both_sinks_hold_the_same_counts_when_the_queries_stopped_at_different_offsets(spark, bootstrap, tmp_path):
    """In --duration and --follow runs the queries start and stop one after another, so each
    cut the events into micro-batches of its own; here the topic's aggregation has run
    before a very late page view arrives, as it may have in such a run. A first micro-batch
    has no watermark yet and keeps events of any age: an aggregation of the Parquet table's
    own would count that page view in a window the topic's aggregation dropped it from."""
    create_topics(bootstrap, 2)
    now = time.time_ns() // 1_000_000
    _views(bootstrap, [("/early", now - 4 * 60_000), ("/feed", now - 10_000)])
    base = tmp_path / "demo"
    _run(spark, bootstrap, base, "page_view_counts_topic")
    _views(bootstrap, [("/late", now - 6 * 60_000), ("/feed", now)])
    _run(spark, bootstrap, base, "page_view_counts_topic", "page_views_per_minute_parquet")

    in_topic = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", PAGE_VIEW_COUNTS).option("kafka.isolation.level", "read_committed").load()
                .select(F.from_json(F.col("value").cast("string"), COUNT_SCHEMA).alias("c")).select("c.*"))
    in_parquet = spark.read.parquet(str(base / "warehouse" / "page_views_per_minute"))
    topic_rows, parquet_rows = sorted(map(tuple, in_topic.collect())), sorted(map(tuple, in_parquet.collect()))
    assert [(page, views) for _, _, page, views in topic_rows] == [("/early", 1)]  # /late: behind the watermark
    assert parquet_rows == topic_rows


def _views(bootstrap: str, views: list[tuple[str, int]]) -> None:
    """Page views ``(page, event time in ms)`` into the demo's ``page_views`` topic."""
    with Producer(bootstrap) as producer:
        for page, ts in views:
            body = {"type": "page_view", "member": 1, "page": page, "referrer": "/feed", "ts": ts}
            producer.send(PAGE_VIEWS, json.dumps(body).encode(), key=b"member-1", timestamp=ts)
        producer.flush()


def _run(spark, bootstrap: str, base, *names: str) -> None:
    """The demo's queries ``names``, in that order, each over what its topic holds now."""
    queries = streaming_job.build_queries(spark, bootstrap, base)
    for name in names:
        query = queries[name].trigger(availableNow=True).start()
        query.awaitTermination()
        assert query.exception() is None


def test_batch_loader_loads_only_new_offsets(spark, bootstrap, tmp_path):
    topic = f"loader-{tmp_path.name[-8:]}"
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 3, 1)])

    def produce(start: int, count: int) -> None:
        with Producer(bootstrap) as producer:
            for i in range(start, start + count):
                body = {"type": "page_view", "member": i % 5, "page": f"/p{i}", "ts": 1_700_000_000_000 + i}
                producer.send(topic, json.dumps(body).encode(), key=b"member-%d" % (i % 5))
            producer.flush()

    warehouse = tmp_path / "warehouse"
    produce(0, 40)
    first = batch_loader.load(spark, bootstrap, [topic], warehouse)
    produce(40, 25)
    second = batch_loader.load(spark, bootstrap, [topic], warehouse)
    third = batch_loader.load(spark, bootstrap, [topic], warehouse)
    assert (first.records, second.records, third.records, third.load) == (40, 25, 0, None)
    offsets = batch_loader.committed_offsets(warehouse / "activity")
    assert sum(offsets.values()) == 65
    rows = spark.read.parquet(str(warehouse / "activity")).select("partition", "offset", "page").collect()
    assert sorted(r["page"] for r in rows) == sorted(f"/p{i}" for i in range(65))
    assert len({(r["partition"], r["offset"]) for r in rows}) == 65
