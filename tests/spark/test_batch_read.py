"""Batch reads: exactly what kafka-python produced, over offset ranges given as JSON."""

from __future__ import annotations

import json

import pytest
from kafka import KafkaProducer
from pyspark.sql import functions as F

from odradek.spark.offset_range import OffsetRange
from odradek.spark.offset_reader import OffsetReader
from odradek.spark.options import parse_source_options


def produce_with_kafka_python(bootstrap: str, topic: str, count: int, partitions: int = 3) -> list[tuple]:
    """Records with null and empty keys and values, headers, explicit timestamps and
    partitions, half of them gzip-compressed; (key, value, partition, offset, timestamp,
    headers) of each as the broker acknowledged it."""
    sent = []
    for compression in (None, "gzip"):
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, linger_ms=5)
        futures = []
        for _ in range(count // 2):
            n = len(futures) + (0 if compression is None else count)
            key = None if n % 7 == 3 else (b"" if n % 11 == 4 else b"member-%d" % n)
            value = None if n % 13 == 5 and key is not None else b"event %d " % n * (n % 5 + 1)
            headers = [("trace", b"t%d" % n), ("empty", b"")] if n % 3 == 0 else []
            stamp = 1_700_000_000_000 + n * 1000
            partition = n % partitions
            futures.append((key, value, headers, producer.send(
                topic, value=value, key=key, headers=headers, partition=partition, timestamp_ms=stamp)))
        producer.flush()
        for key, value, headers, future in futures:
            meta = future.get(timeout=30)
            sent.append((key, value, topic, meta.partition, meta.offset, meta.timestamp, 0,
                         tuple(headers) or None))
        producer.close()
    return sent


def position(row: tuple) -> tuple:
    return row[3], row[4]


def read_back(df) -> list[tuple]:
    rows = df.select("key", "value", "topic", "partition", "offset",
                     (F.unix_micros("timestamp") / 1000).cast("long").alias("ms"), "timestampType",
                     "headers").collect()
    return [(r["key"], r["value"], r["topic"], r["partition"], r["offset"], r["ms"], r["timestampType"],
             None if r["headers"] is None else tuple((h["key"], h["value"]) for h in r["headers"]))
            for r in rows]


def reader(spark, bootstrap, topic):
    return (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic))


def test_batch_read_returns_what_kafka_python_produced(spark, bootstrap, new_topic):
    topic = new_topic(3)
    sent = produce_with_kafka_python(bootstrap, topic, 120)
    df = reader(spark, bootstrap, topic).option("includeHeaders", "true").load()
    assert df.rdd.getNumPartitions() == 3  # one input partition per topic-partition
    assert sorted(read_back(df), key=position) == sorted(sent, key=position)
    plain = reader(spark, bootstrap, topic).load()
    assert "headers" not in plain.columns
    assert plain.count() == len(sent)


def test_json_offsets_and_min_partitions(spark, bootstrap, new_topic):
    topic = new_topic(2)
    sent = produce_with_kafka_python(bootstrap, topic, 40, partitions=2)
    ends = {p: max(r[4] for r in sent if r[3] == p) + 1 for p in (0, 1)}
    starting = json.dumps({topic: {"0": 3, "1": -2}})
    ending = json.dumps({topic: {"0": ends[0] - 2, "1": -1}})
    df = (reader(spark, bootstrap, topic).option("startingOffsets", starting).option("endingOffsets", ending)
          .option("minPartitions", "5").option("includeHeaders", "true").load())
    assert df.rdd.getNumPartitions() >= 5
    want = [r for r in sent if (r[3] == 0 and 3 <= r[4] < ends[0] - 2) or r[3] == 1]
    assert sorted(read_back(df), key=position) == sorted(want, key=position)


def test_starting_timestamp_and_assign(spark, bootstrap, new_topic):
    topic = new_topic(3)
    sent = produce_with_kafka_python(bootstrap, topic, 60)
    cut = 1_700_000_000_000 + 30 * 1000
    df = (spark.read.format("odradek").option("bootstrap.servers", bootstrap)
          .option("assign", json.dumps({topic: [0, 2]})).option("startingTimestamp", str(cut))
          .option("includeHeaders", "true").load())
    want = [r for r in sent if r[3] in (0, 2) and r[5] >= cut]
    assert sorted(read_back(df), key=position) == sorted(want, key=position)


def test_offsets_that_do_not_fit_fail_with_the_option_named(spark, bootstrap, new_topic):
    topic = new_topic(2)
    produce_with_kafka_python(bootstrap, topic, 10, partitions=2)
    bad = reader(spark, bootstrap, topic).option("startingOffsets", json.dumps({topic: {"0": 0}})).load()
    with pytest.raises(Exception, match="startingOffsets must name exactly the partitions read"):
        bad.count()
    backwards = (reader(spark, bootstrap, topic).option("startingOffsets", json.dumps({topic: {"0": 4, "1": 0}}))
                 .option("endingOffsets", json.dumps({topic: {"0": 2, "1": -1}})).load())
    with pytest.raises(Exception, match="starting offsets after ending offsets"):
        backwards.count()


def test_offset_ranges_pickle_as_input_partitions():
    import pickle

    r = OffsetRange("t", 1, 5, 9)
    assert pickle.loads(pickle.dumps(r)) == r and r.size == 4


def test_nothing_to_read_gives_no_rows(spark, bootstrap, new_topic):
    empty = new_topic(1)
    full = new_topic(2)
    produce_with_kafka_python(bootstrap, full, 4, partitions=2)
    future = str(4_000_000_000_000)

    def load(**options):
        df = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
        for name, value in options.items():
            df = df.option(name, value)
        return df.load()

    assert load(subscribe=empty).count() == 0
    assert load(subscribe=f"{empty}-missing").count() == 0
    assert load(subscribePattern="no-topic-matches-this-.*").count() == 0
    assert load(subscribe=full, startingTimestamp=future, startingOffsetsByTimestampStrategy="latest").count() == 0
    with pytest.raises(Exception, match="no record at or after the timestamp"):  # Spark's default: error
        load(subscribe=full, startingTimestamp=future).count()


def test_assign_of_a_partition_that_does_not_exist_fails_at_once(bootstrap, new_topic):
    topic = new_topic(2)
    options = parse_source_options({"kafka.bootstrap.servers": bootstrap,
                                    "assign": json.dumps({topic: [1, 2], f"{topic}-gone": [0]})})
    offsets = OffsetReader(options)  # it waited for a leader for a minute, then "no leader"
    try:
        with pytest.raises(ValueError, match=rf"\['{topic}-2', '{topic}-gone-0'\] do not exist "
                                             rf"\(topic '{topic}' has 2 partitions; topic '{topic}-gone' does not"):
            offsets.partitions()
    finally:
        offsets.close()


def test_max_records_per_partition_and_save_modes(spark, bootstrap, new_topic):
    topic = new_topic(2)
    sent = produce_with_kafka_python(bootstrap, topic, 40, partitions=2)
    df = (reader(spark, bootstrap, topic).option("maxRecordsPerPartition", "7")
          .option("kafka.client.id", "odradek-tests").option("kafka.fetch.max.wait.ms", "10").load())
    assert df.rdd.getNumPartitions() == 2 * 3  # 20 records a partition, 7 at most per Spark partition
    assert df.count() == len(sent)
    out = df.select("key", "value").write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    with pytest.raises(Exception, match="save mode Overwrite is not allowed"):  # more in test_user_errors
        out.option("topic", new_topic(1)).mode("overwrite").save()
    with pytest.raises(Exception, match="kafka.no.such.setting"):  # never silently ignored
        reader(spark, bootstrap, topic).option("kafka.no.such.setting", "x").load().count()
