"""The offline loader, after the Hadoop loading of Kafka 0.7's design documentation: each run
loads the activity topics' new records into the Parquet warehouse, one parallel task per
topic-partition, and stores the consumed offset ranges with the output, so that a rerun
neither loses nor duplicates records.

Layout, under ``warehouse/activity``::

    load=000001/                   one committed load
        topic=page_views/*.parquet the records (member, type, page, query, ..., with their
        topic=searches/*.parquet   partition, offset and timestamp)
        _offsets.json              {"page_views": {"0": [start, end], ...}, ...} (Spark's
                                   readers skip names starting with "_")
    _staging/                      loads being written

A load reads, per topic-partition, from the end of the last committed range (the log start
for a partition never loaded) to the last stable offset (the end of the log for everything
committed: the activity is produced in transactions), with the ``odradek`` batch source at
read_committed (``startingOffsets``/``endingOffsets`` as JSON), writes Parquet into ``_staging``,
writes ``_offsets.json`` beside it, and then renames the directory to ``load=N`` in one step
(a rename is atomic on a local file system). A load cut short before the rename leaves only
``_staging`` (cleared by the next run), so its records are loaded again, once; after it,
its offsets are committed together with its records. Like the Hadoop loader of that
document, the offsets live with the output, not in the broker.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from odradek.client import AdminClient, Consumer, TopicPartition
from odradek.demo.streaming_job import EVENT_SCHEMA

__all__ = ["LoadResult", "load", "committed_offsets"]


@dataclass(frozen=True)
class LoadResult:
    load: str | None        # the committed load's directory name; None when nothing was new
    records: int            # records loaded (offsets also count transaction markers)
    ranges: dict            # {topic: {partition: [start, end]}} of this load

    @property
    def partitions(self) -> int:
        return sum(1 for parts in self.ranges.values() for s, e in parts.values() if e > s)


def committed_offsets(root: Path) -> dict[TopicPartition, int]:
    """The end of every committed range, per topic-partition."""
    ends: dict[TopicPartition, int] = {}
    for offsets in sorted(root.glob("load=*/_offsets.json")):
        for topic, parts in json.loads(offsets.read_text()).items():
            for partition, (_, end) in parts.items():
                tp = TopicPartition(topic, int(partition))
                ends[tp] = max(ends.get(tp, 0), end)
    return ends


def _log_offsets(bootstrap: str, topics: list[str]) -> tuple[dict, dict]:
    with AdminClient(bootstrap, client_id="odradek-demo-loader") as admin:
        described = admin.describe_topics(topics)
        tps = [TopicPartition(t, p.partition) for t in topics for p in described[t].partitions]
    with Consumer(bootstrap, client_id="odradek-demo-loader", isolation_level="read_committed") as consumer:
        return consumer.beginning_offsets(tps), consumer.end_offsets(tps)


def load(spark: SparkSession, bootstrap: str, topics: list[str], warehouse: Path) -> LoadResult:
    root = warehouse / "activity"
    shutil.rmtree(root / "_staging", ignore_errors=True)
    earliest, latest = _log_offsets(bootstrap, topics)
    done = committed_offsets(root)
    start = {tp: done.get(tp, earliest[tp]) for tp in latest}
    ranges: dict = {}
    for tp in sorted(latest):
        ranges.setdefault(tp.topic, {})[str(tp.partition)] = [start[tp], latest[tp]]
    new = sum(latest[tp] - start[tp] for tp in latest)
    if new <= 0:
        return LoadResult(None, 0, ranges)
    as_json = lambda pick: json.dumps({t: {p: r[pick] for p, r in parts.items()} for t, parts in ranges.items()})
    records = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", ",".join(topics)).option("kafka.isolation.level", "read_committed")
               .option("startingOffsets", as_json(0)).option("endingOffsets", as_json(1)).load())
    rows = records.select(
        "topic", "partition", "offset", "timestamp",
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")).select(
        "topic", "partition", "offset", "timestamp", "e.member", "e.type", "e.page", "e.referrer", "e.query",
        "e.results", F.timestamp_millis("e.ts").alias("event_time"))
    number = 1 + max((int(p.name.split("=")[1]) for p in root.glob("load=*")), default=0)
    name = f"load={number:06d}"
    staging = root / "_staging" / name
    rows.write.mode("overwrite").partitionBy("topic").parquet(str(staging))
    loaded = spark.read.parquet(str(staging)).count()
    (staging / "_offsets.json").write_text(json.dumps(ranges, indent=1, sort_keys=True))
    os.rename(staging, root / name)
    return LoadResult(name, loaded, ranges)
