"""The demo's closing report: what was produced, what the streaming job and the loader
made of it, the top pages, the busiest members, and where every output is, charts of the
run included (PNG, in ``<dir>/report``: see ``charts``).

The result topics are read back at read_committed, as a downstream consumer of an
exactly-once pipeline reads them; the report checks that no (window, page) count is there
twice and says how the pipeline is exactly once end to end."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table

from odradek.demo import charts as charts_module
from odradek.demo.activity import LATE_SHARE, PAGE_VIEWS, SEARCHES
from odradek.demo.batch_loader import LoadResult
from odradek.demo.produce import ProduceResult
from odradek.demo.streaming_job import MEMBER_VISITS, PAGE_VIEW_COUNTS, WATERMARK
from odradek.demo.timeline import MicroBatch, Sample

__all__ = ["summarize", "write_charts", "print_report"]


def summarize(spark: SparkSession, bootstrap: str, base: Path) -> dict:
    """The numbers of the report, read back from the warehouse and the result topics."""
    warehouse = base / "warehouse"
    raw = spark.read.parquet(str(warehouse / "activity"))  # load=N/topic=T partitions; _* ignored
    by_topic = {r["topic"]: r["count"] for r in raw.groupBy("topic").count().collect()}
    duplicates = raw.count() - raw.select("topic", "partition", "offset").distinct().count()
    top_pages = (raw.where(F.col("topic") == PAGE_VIEWS).groupBy("page").count()
                 .orderBy(F.desc("count"), "page").limit(5).collect())
    windows_path = warehouse / "page_views_per_minute"
    windows = window_rows = 0
    if any(windows_path.glob("*.parquet")):
        per_minute = spark.read.parquet(str(windows_path))
        windows, window_rows = per_minute.select("window_start").distinct().count(), per_minute.count()
    visits = _latest_by_key(spark, bootstrap, MEMBER_VISITS)
    busiest = sorted((json.loads(v) for v in visits.values()), key=lambda m: (-m["visits"], m["member"]))[:5]
    counts_topic = _latest_by_key(spark, bootstrap, PAGE_VIEW_COUNTS, keep_all=True)
    counted = {(c["window_start"], c["page"]) for c in (json.loads(v) for v in counts_topic.values())}
    return {"by_topic": by_topic, "duplicates": duplicates, "top_pages": [(r["page"], r["count"]) for r in top_pages],
            "windows": windows, "window_rows": window_rows, "busiest": busiest, "members": len(visits),
            "count_records": len(counts_topic), "count_duplicates": len(counts_topic) - len(counted)}


def _latest_by_key(spark: SparkSession, bootstrap: str, topic: str, keep_all: bool = False) -> dict:
    """``{key: value}`` of the newest record per key of ``topic`` (or every record by
    topic-partition-offset with ``keep_all``), read with the ``odradek`` batch source at
    read_committed."""
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("kafka.isolation.level", "read_committed").load())
    if keep_all:
        return {(r["partition"], r["offset"]): r["value"] for r in df.select("partition", "offset", "value").collect()}
    latest = df.groupBy("key").agg(F.max_by("value", "offset").alias("value"))
    return {bytes(r["key"]): bytes(r["value"]).decode() for r in latest.collect()}


def write_charts(base: Path, samples: list[Sample], batches: list[MicroBatch]) -> list[Path]:
    """The run's charts (throughput, the streaming job's micro-batches, its lag in the page
    views) as PNG files in ``base/report``; the paths of those there was data for."""
    return charts_module.write_charts(samples, batches, base / "report", [PAGE_VIEWS, SEARCHES], PAGE_VIEWS)


def print_report(console: Console, base: Path, produced: ProduceResult, processed: dict, late: dict,
                 loads: list[LoadResult], rerun: LoadResult, summary: dict, bootstrap: str,
                 charts: list[Path] = ()) -> None:
    console.rule("[bold]odradek demo: report")
    rate = produced.total / produced.seconds if produced.seconds else 0
    console.print(f"Produced [bold]{produced.total:,}[/] events this run "
                  f"({produced.counts.get('page_views', 0):,} page views, {produced.counts.get('searches', 0):,} "
                  f"searches) in {produced.seconds:.1f} s ({rate:,.0f}/s), keyed by member.")
    console.print(f"Streaming job: {', '.join(f'{n} read {c:,}' for n, c in processed.items())} rows.")
    _print_windows(console, summary, late)
    _print_exactly_once(console, produced, summary)
    for result in loads:
        if result.load:
            console.print(f"Batch loader: {result.records:,} records from {result.partitions} topic-partitions "
                          f"into {result.load}, offsets stored with them.")
    console.print(f"Batch loader rerun: {'nothing new to load' if rerun.load is None else rerun.records} "
                  f"(no duplicates: {summary['duplicates'] == 0}); warehouse holds "
                  + ", ".join(f"{t} {c:,}" for t, c in sorted(summary["by_topic"].items())) + " records.")
    pages = Table(title="Top pages", title_justify="left")
    pages.add_column("page")
    pages.add_column("views", justify="right")
    for page, views in summary["top_pages"]:
        pages.add_row(page, f"{views:,}")
    members = Table(title="Busiest members", title_justify="left")
    members.add_column("member")
    members.add_column("visits", justify="right")
    members.add_column("last seen (UTC)")
    for m in summary["busiest"]:
        members.add_row(m["member"], f"{m['visits']:,}", str(m.get("last_seen", ""))[:19].replace("T", " "))
    console.print(pages)
    console.print(members)
    outputs = Table(title="Where the outputs are", title_justify="left")
    outputs.add_column("output")
    outputs.add_column("location", overflow="fold")  # a path is whole, if on two lines
    outputs.add_row("broker", bootstrap)
    outputs.add_row("window counts (Kafka transactions)", f"topic {PAGE_VIEW_COUNTS}")
    outputs.add_row("visits per member (Kafka transactions, compacted)", f"topic {MEMBER_VISITS}")
    outputs.add_row(f"page views per minute (copied from topic {PAGE_VIEW_COUNTS})",
                    str(base / "warehouse" / "page_views_per_minute"))
    outputs.add_row("visits per member", str(base / "warehouse" / "member_visits"))
    outputs.add_row("raw activity + offsets", str(base / "warehouse" / "activity"))
    outputs.add_row("streaming checkpoints", str(base / "checkpoints"))
    outputs.add_row("Spark's log", str(base / "spark.log"))
    for path in charts:
        outputs.add_row(f"chart: {path.stem}", str(path))
    console.print(outputs)


def _print_exactly_once(console: Console, produced: ProduceResult, summary: dict) -> None:
    twice = summary.get("count_duplicates", 0)
    check = "none twice" if not twice else f"{twice:,} TWICE"
    console.print(f"Exactly once, end to end, through Kafka transactions: the activity was produced in "
                  f"{produced.transactions:,} transactions and is read at read_committed; the streaming job "
                  f"commits each micro-batch's topic output in transactions (one per task, committed by the "
                  f"driver with Spark's commit, exactlyOnce=transactional), read back here at read_committed: "
                  f"{summary['count_records']:,} (window, page) counts in topic {PAGE_VIEW_COUNTS}, {check}.")


def _print_windows(console: Console, summary: dict, late: dict) -> None:
    """The per-minute counts as both sinks hold them, side by side in the same unit (rows of
    window and page), and what the watermark left out of them, and why. The Parquet table is
    a copy of the topic (``streaming_job``), so once the queries are drained they agree; a
    difference means the copy did not finish."""
    rows, in_topic = summary["window_rows"], summary["count_records"]
    agree = "the two sinks agree" if rows == in_topic else "the two sinks DIFFER"
    console.print(f"Page views per minute: {rows:,} (window, page) counts over {summary['windows']:,} "
                  f"one-minute windows final in Parquet, {in_topic:,} in topic {PAGE_VIEW_COUNTS}: {agree}. "
                  f"Visits: {summary['members']:,} members in topic {MEMBER_VISITS}.")
    dropped = max((n for name, n in late.items() if name.startswith("page_view")), default=0)
    if dropped:
        console.print(f"Late events: {dropped:,} page views this run came more than {WATERMARK} (the watermark) "
                      f"behind the newest event time, and are not in the per-minute counts; the generator "
                      f"makes about {LATE_SHARE:.1%} of events that late on purpose, as mobile clients send them. "
                      f"The visits per member count them.")
    else:
        # A query's first micro-batch has no watermark yet (Spark's starts at 0), so the late
        # events it reads are counted, not dropped: "none dropped", not "none late".
        console.print(f"Late events: none dropped this run; every page view read is in the per-minute counts, "
                      f"or in a window not yet final. Events more than {WATERMARK} (the watermark) behind the "
                      f"newest event time are dropped from then on; the first micro-batch of a run has no "
                      f"watermark yet and keeps them.")
