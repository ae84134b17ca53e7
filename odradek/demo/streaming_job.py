"""The demo's PySpark Structured Streaming job over the ``page_views`` topic.

Two aggregations, each written to a topic and to Parquet (four queries, each with its own
checkpoint under ``<dir>/checkpoints``, so a rerun resumes exactly where the last one stopped):

- page views per page per one-minute event-time window, with a two-minute watermark
  (events later than that are dropped; a window is final once the watermark passes its
  end): to the topic ``page_view_counts`` through the ``odradek`` sink in Kafka
  transactions (key: page; value: JSON window, page, views); a second query reads that
  topic back at read_committed and appends its records to the Parquet table
  ``warehouse/page_views_per_minute`` (Spark's file sink, exactly once by its own log);
- visits (page views) per member: the whole table each micro-batch (complete mode; Python
  data source sinks take append and complete, not update) to the compacted topic
  ``member_visits`` (key: member; value: JSON member, visits, last_seen; compaction keeps
  each member's latest count), and a snapshot in ``warehouse/member_visits`` (rewritten
  each micro-batch).

Exactly once end to end: the activity is produced in transactions and read here at
read_committed (``kafka.isolation.level``); both topic outputs are written with
``exactlyOnce=transactional`` (each micro-batch's output committed in Kafka transactions,
one per task, through Spark's commit protocol: ``odradek.spark.txn_sink``), so their own
readers at read_committed see every micro-batch once.

Why the Parquet table is loaded from the topic rather than aggregated by a query of its own:
which late events a watermark drops depends on where a query's micro-batches began and ended
(a batch filters with the watermark of the batches before it; a query's first batch, with
none yet, keeps events of any age). Two queries aggregating the same events, started and
stopped at different moments (``start``, ``stop_all``), cut them into different batches, and
could finalize different (window, page) counts: one sink would then hold a count, from a late
event, that the other dropped. One aggregation, its output copied, makes both sinks hold the
same final counts by construction; the Parquet table trails the topic by at most the copy's
micro-batch, and ``run_available_now`` runs the copy after the aggregation.

``run_available_now`` processes what is in the topic and stops (Trigger.AvailableNow);
``start`` keeps the queries running every ``interval`` until ``stop_all``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from collections import Counter

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

from odradek.demo.activity import PAGE_VIEWS
from odradek.demo.timeline import MicroBatch, micro_batch

__all__ = ["PAGE_VIEW_COUNTS", "MEMBER_VISITS", "EVENT_SCHEMA", "COUNT_SCHEMA", "RowCounter", "build_queries",
           "run_available_now", "start", "stop_all"]

PAGE_VIEW_COUNTS = "page_view_counts"
MEMBER_VISITS = "member_visits"
WATERMARK = "2 minutes"
WINDOW = "1 minute"

EVENT_SCHEMA = StructType([
    StructField("type", StringType()), StructField("member", LongType()), StructField("page", StringType()),
    StructField("referrer", StringType()), StructField("query", StringType()),
    StructField("results", IntegerType()), StructField("ts", LongType()),
])
# A record of ``page_view_counts``: the columns of the Parquet table, in its order.
COUNT_SCHEMA = StructType([
    StructField("window_start", TimestampType()), StructField("window_end", TimestampType()),
    StructField("page", StringType()), StructField("views", LongType()),
])


class RowCounter(StreamingQueryListener):
    """Input rows, and rows dropped as later than the watermark, per query name, summed over
    every micro-batch while registered (for queries that run longer than the progress
    history Spark keeps); and every micro-batch (``batches``, for the report's charts)."""

    def __init__(self) -> None:
        self.rows: Counter = Counter()
        self.dropped: Counter = Counter()
        self.batches: list[MicroBatch] = []
        self.spark: SparkSession | None = None

    def listen(self, spark: SparkSession) -> None:
        self.spark = spark
        spark.streams.addListener(self)

    def stop(self) -> None:
        if self.spark is not None:
            self.spark.streams.removeListener(self)
            self.spark = None

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        self.rows[progress.name] += progress.numInputRows
        self.dropped[progress.name] += sum(op.numRowsDroppedByWatermark for op in progress.stateOperators)
        self.batches.append(micro_batch(progress))

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


def _read(spark: SparkSession, bootstrap: str, topic: str, schema: StructType) -> DataFrame:
    """The JSON values of ``topic`` from its start, read at read_committed, as ``schema``'s columns."""
    raw = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).option("startingOffsets", "earliest")
           .option("kafka.isolation.level", "read_committed").load())
    return raw.select(F.from_json(F.col("value").cast("string"), schema).alias("v")).select("v.*")


def events(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """The parsed events of ``topic``, with ``event_time`` from the event's own ``ts``."""
    return _read(spark, bootstrap, topic, EVENT_SCHEMA).withColumn("event_time", F.timestamp_millis("ts"))


def _page_counts(views: DataFrame) -> DataFrame:
    windowed = views.withWatermark("event_time", WATERMARK).groupBy(F.window("event_time", WINDOW), "page")
    return windowed.agg(F.count("*").alias("views")).select(
        F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"), "page", "views")


def _member_visits(views: DataFrame) -> DataFrame:
    return views.groupBy("member").agg(F.count("*").alias("visits"), F.max("event_time").alias("last_seen"))


def _forget_own_aggregation(checkpoint: Path, table: Path) -> None:
    """A demo directory from before the table was copied from the topic holds a checkpoint
    of the table's own aggregation of ``page_views``, which the copy cannot resume from (its
    offsets are of another topic): both go, and the copy rebuilds the table from the start of
    ``page_view_counts``, which holds every final count made so far (a new checkpoint with
    the old table would make Spark's file sink skip the batches its log already numbers)."""
    first = checkpoint / "offsets" / "0"
    if first.is_file() and f'"{PAGE_VIEWS}"' in first.read_text():
        shutil.rmtree(checkpoint)
        shutil.rmtree(table, ignore_errors=True)


def build_queries(spark: SparkSession, bootstrap: str, base: Path) -> dict:
    """The four query definitions (``DataStreamWriter``s, not started), by name, in the
    order they are to run: ``page_views_per_minute_parquet`` copies what
    ``page_view_counts_topic`` committed, so it comes after it."""
    warehouse, checkpoints = base / "warehouse", base / "checkpoints"
    _forget_own_aggregation(checkpoints / "page_views_per_minute_parquet", warehouse / "page_views_per_minute")

    def source() -> DataFrame:
        return events(spark, bootstrap, PAGE_VIEWS)

    def to_topic(df: DataFrame, key: str, topic: str, mode: str, name: str):
        out = df.select(F.col(key).cast("string").alias("key"), F.to_json(F.struct(*df.columns)).alias("value"))
        return (out.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
                .option("topic", topic).option("exactlyOnce", "transactional").outputMode(mode).queryName(name)
                .option("checkpointLocation", str(checkpoints / name)))

    def snapshot(df: DataFrame, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(str(warehouse / "member_visits"))

    return {
        "page_view_counts_topic": to_topic(_page_counts(source()), "page", PAGE_VIEW_COUNTS, "append",
                                           "page_view_counts_topic"),
        "page_views_per_minute_parquet": (
            _read(spark, bootstrap, PAGE_VIEW_COUNTS, COUNT_SCHEMA).writeStream.format("parquet").outputMode("append")
            .option("path", str(warehouse / "page_views_per_minute")).queryName("page_views_per_minute_parquet")
            .option("checkpointLocation", str(checkpoints / "page_views_per_minute_parquet"))),
        "member_visits_topic": to_topic(
            _member_visits(source()).withColumn("member", F.concat(F.lit("member-"), F.col("member"))),
            "member", MEMBER_VISITS, "complete", "member_visits_topic"),
        "member_visits_parquet": (
            _member_visits(source()).writeStream.outputMode("complete").foreachBatch(snapshot)
            .queryName("member_visits_parquet")
            .option("checkpointLocation", str(checkpoints / "member_visits_parquet"))),
    }


def run_available_now(spark: SparkSession, bootstrap: str, base: Path,
                      batches: list[MicroBatch] | None = None, step=None) -> tuple[Counter, Counter]:
    """Run every query over what the topic holds now, one after another (on two cores,
    starting them together only makes Spark's Python planner workers miss their 10 s
    connect-back deadline); the rows each read, and the rows each dropped as later than
    its watermark. Each micro-batch is appended to ``batches`` when given; ``step(text)``,
    when given, is told what runs now ("planning the queries", then "query 2 of 4:
    page_views_per_minute_parquet"; planning the sources takes seconds)."""
    step = step or (lambda text: None)
    rows: Counter = Counter()
    dropped: Counter = Counter()
    step("planning the queries")
    queries = build_queries(spark, bootstrap, base)
    for number, (name, writer) in enumerate(queries.items(), 1):
        step(f"query {number} of {len(queries)}: {name}")
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"streaming query {name} failed: {query.exception()}")
        rows[name] += sum(p["numInputRows"] for p in query.recentProgress)
        dropped[name] += sum(op.get("numRowsDroppedByWatermark", 0)
                             for p in query.recentProgress for op in p.get("stateOperators", ()))
        if batches is not None:
            batches.extend(micro_batch(p) for p in query.recentProgress)
    return rows, dropped


def start(spark: SparkSession, bootstrap: str, base: Path, queries: dict, interval: str = "5 seconds") -> None:
    """Start every query with a processing-time trigger into ``queries`` (by name), each
    once the previous one has reported its first micro-batch (see ``run_available_now`` for
    why not all at once)."""
    for name, writer in build_queries(spark, bootstrap, base).items():
        query = queries[name] = writer.trigger(processingTime=interval).start()
        while query.isActive and query.lastProgress is None:
            query.awaitTermination(0.5)


def stop_all(queries: dict) -> None:
    for query in queries.values():
        query.stop()
