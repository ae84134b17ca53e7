"""Writes: batch writes, and the staged exactly-once streaming sink (``exactlyOnce=staged``)
under injected failures in a task and in the driver's commit. The transactional sink, the
default, is tested in ``test_txn_sink``."""

from __future__ import annotations

from collections import Counter

from pyspark.sql import functions as F

from odradek.client import Consumer, Producer, TopicPartition
from odradek.spark.options import STAGING_TOPIC
from tests.spark.upper_case_stream import run_upper_case_stream


def read_topic(spark, bootstrap: str, topic: str):
    return (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("includeHeaders", "true").load())


def test_batch_write_with_every_column(spark, bootstrap, new_topic):
    target = new_topic(3)
    rows = [(f"k{i}" if i % 4 else None, f"value {i}", target, i % 3, [(f"h{i}", b"x")] if i % 2 else None)
            for i in range(30)]
    df = spark.createDataFrame(rows, "key string, value string, topic string, partition int, "
                                     "headers array<struct<key:string,value:binary>>")
    df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).mode("append").save()
    back = read_topic(spark, bootstrap, target).collect()
    got = [(None if r["key"] is None else r["key"].decode(), r["value"].decode(), r["partition"],
            None if r["headers"] is None else [(h["key"], h["value"]) for h in r["headers"]]) for r in back]
    assert sorted(got, key=lambda t: t[1]) == sorted(((k, v, p, h) for k, v, _, p, h in rows), key=lambda t: t[1])


def test_batch_write_exactly_once_goes_through_staging(spark, bootstrap, new_topic):
    target = new_topic(2)
    df = spark.range(50).select(F.col("id").cast("string").alias("key"), F.col("id").cast("string").alias("value"))
    (df.repartition(3).write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", target)
     .option("exactlyOnce", "staged").mode("append").save())
    back = read_topic(spark, bootstrap, target).collect()
    assert sorted(int(r["value"]) for r in back) == list(range(50))
    assert all(r["headers"][-1]["key"] == "odradek.sink" for r in back)
    keys = {r["key"]: r["partition"] for r in back}
    from odradek.client.partitioner import murmur2

    assert all(p == (murmur2(k) & 0x7FFFFFFF) % 2 for k, p in keys.items())  # the Java partitioner's choice


def staged_rows(bootstrap: str) -> int:
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        tps = [TopicPartition(STAGING_TOPIC, p) for p in consumer.partitions_for_topic(STAGING_TOPIC)]
        return sum(consumer.end_offsets(tps).values())


def test_stream_sink_is_exactly_once_under_injected_failures(spark, bootstrap, new_topic, tmp_path):
    """Three runs of one query over 300 records in micro-batches of 100:
    1. batch 0: the first attempt of a task fails after staging its rows (Spark retries
       it); batch 1: the driver's commit fails after publishing half of the batch;
    2. restarted: batch 1 is replayed and its publish resumed; batch 2: the commit fails
       after the sink recorded it, before Spark did;
    3. restarted: batch 2 is replayed, and the sink skips it.
    Every record lands in the target exactly once."""
    source, target = new_topic(2), new_topic(2)
    with Producer(bootstrap) as producer:
        for i in range(300):
            producer.send(source, b"event-%03d" % i, key=b"m%d" % (i % 17), partition=i % 2)
        producer.flush()
    checkpoint = str(tmp_path / "checkpoint")
    staged_before = staged_rows(bootstrap) if _has_staging(bootstrap) else 0

    def run(failpoint: str | None):
        return run_upper_case_stream(spark, bootstrap, source, target, checkpoint, failpoint, exactlyOnce="staged")

    first = run("write.after_stage@0,commit.mid_publish@1")
    assert "injected failure at commit.mid_publish of batch 1" in str(first.exception())
    published = Counter(r["value"] for r in read_topic(spark, bootstrap, target).collect())
    assert 100 < sum(published.values()) < 200 and max(published.values()) == 1  # batch 1 half published
    second = run("commit.after_commit@2")
    assert "injected failure at commit.after_commit of batch 2" in str(second.exception())
    third = run(None)
    assert third.exception() is None and not third.isActive
    out = read_topic(spark, bootstrap, target).collect()
    values = Counter(r["value"] for r in out)
    assert values == Counter(b"EVENT-%03d" % i for i in range(300))  # each exactly once
    tags = [r["headers"][-1]["value"].decode() for r in out]
    assert len(set(tags)) == 300 and {t.split("/")[1] for t in tags} == {"0", "1", "2"}
    # The failed task attempt of batch 0 and the replays staged rows that were never published.
    assert staged_rows(bootstrap) - staged_before > 300


def _has_staging(bootstrap: str) -> bool:
    from odradek.client import AdminClient

    with AdminClient(bootstrap) as admin:
        return STAGING_TOPIC in admin.list_topics()
