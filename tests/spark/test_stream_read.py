"""Streaming reads: exact resume from a checkpoint, admission control, AvailableNow, new
partitions and topics, data loss, read_committed."""

from __future__ import annotations

import json

import pytest

from odradek.client import AdminClient, Producer, TopicPartition


def produce(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> None:
    with Producer(bootstrap) as producer:
        for i in range(start, start + count):
            producer.send(topic, b"v%d" % i, key=b"k%d" % i, partition=i % partitions)
        producer.flush()


def stream(spark, bootstrap: str, **options):
    reader = spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


class Batches:
    """A foreachBatch sink keeping each batch's rows by batch id: a replayed batch replaces
    its first delivery, so the union shows what the source delivered, exactly once each."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.batches: dict[int, list] = {}
        self.deliveries: dict[int, int] = {}
        self.fail_on = fail_on

    def __call__(self, df, batch_id: int) -> None:
        rows = sorted((r["topic"], r["partition"], r["offset"], bytes(r["value"]))
                      for r in df.select("topic", "partition", "offset", "value").collect())
        self.deliveries[batch_id] = self.deliveries.get(batch_id, 0) + 1
        self.batches[batch_id] = rows
        if batch_id == self.fail_on:
            self.fail_on = None
            raise RuntimeError(f"crash in batch {batch_id}")

    def rows(self) -> list:
        return sorted(r for rows in self.batches.values() for r in rows)


def run(df, sink: Batches, checkpoint: str):
    query = (df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(300)
    except Exception:  # noqa: BLE001 - the failing run's exception is checked by the caller
        pass
    return query


def test_restart_from_checkpoint_sees_every_record_once(spark, bootstrap, new_topic, checkpoint):
    topic = new_topic(3)
    produce(bootstrap, topic, 0, 200, 3)
    sink = Batches(fail_on=1)
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=100)
    first = run(df, sink, checkpoint)
    assert first.exception() is not None and "crash in batch 1" in str(first.exception())
    replayed = list(sink.batches[1])
    produce(bootstrap, topic, 200, 61, 3)
    second = run(df, sink, checkpoint)
    assert second.exception() is None and not second.isActive  # AvailableNow ended by itself
    assert sink.deliveries[1] == 2 and sink.batches[1] == replayed  # the same records again
    want = sorted((topic, i % 3, i // 3, b"v%d" % i) for i in range(261))
    assert sink.rows() == want
    assert all(len(rows) <= 100 for rows in sink.batches.values())  # maxOffsetsPerTrigger
    assert len(sink.batches) == 3
    source = second.lastProgress["sources"][0]
    latest, end = (json.loads(source[k]) if isinstance(source[k], str) else source[k]
                   for k in ("latestOffset", "endOffset"))
    assert latest == end == {topic: {"0": 87, "1": 87, "2": 87}}  # reportLatestOffset


def test_new_partitions_and_topics_are_picked_up(spark, bootstrap, new_topic, checkpoint):
    first = new_topic(2)
    prefix = first.split("-")[0]
    produce(bootstrap, first, 0, 20, 2)
    sink = Batches()
    df = stream(spark, bootstrap, subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
    run(df, sink, checkpoint)
    assert len(sink.rows()) == 20
    with AdminClient(bootstrap) as admin:
        admin.create_partitions({first: 3})
    produce(bootstrap, first, 20, 30, 3)
    second = f"{prefix}-more"
    with AdminClient(bootstrap) as admin:
        from odradek.client import NewTopic

        admin.create_topics([NewTopic(second, 1, 1)])
    produce(bootstrap, second, 0, 5, 1)
    query = run(df, sink, checkpoint)
    assert query.exception() is None
    rows = sink.rows()
    assert len(rows) == len(set(rows)) == 55
    assert sum(1 for r in rows if r[0] == first and r[1] == 2) == 10  # the new partition, from 0
    assert sum(1 for r in rows if r[0] == second) == 5


@pytest.mark.parametrize("fail", [True, False])
def test_a_start_below_the_log_start_is_data_loss(spark, bootstrap, new_topic, checkpoint, fail):
    topic = new_topic(1)
    produce(bootstrap, topic, 0, 10, 1)
    sink = Batches()
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", failOnDataLoss=str(fail).lower())
    run(df, sink, checkpoint)
    produce(bootstrap, topic, 10, 10, 1)
    with AdminClient(bootstrap) as admin:
        admin.delete_records({TopicPartition(topic, 0): 15})  # 10..14 are gone unread
    query = run(df, sink, checkpoint)
    if fail:
        assert query.exception() is not None and "were deleted" in str(query.exception())
        assert len(sink.rows()) == 10
    else:
        assert query.exception() is None
        assert [r[2] for r in sink.rows()] == list(range(10)) + list(range(15, 20))


def test_min_offsets_per_trigger_holds_micro_batches_back(spark, bootstrap, new_topic, checkpoint):
    import time

    topic = new_topic(1)
    sink = Batches()
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", minOffsetsPerTrigger=30,
                maxTriggerDelay="1h")
    interval = spark.conf.get("spark.sql.streaming.noDataProgressEventInterval")
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")  # a progress per idle trigger
    query = (df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(processingTime="100 milliseconds").start())
    try:
        deadline = time.monotonic() + 120

        def wait_for_triggers(n):
            seen = len(query.recentProgress)
            while len(query.recentProgress) < seen + n and time.monotonic() < deadline:
                time.sleep(0.05)

        wait_for_triggers(1)  # the first trigger, with nothing to read, has been let through
        produce(bootstrap, topic, 0, 10, 1)
        wait_for_triggers(5)
        assert sink.rows() == []  # 10 records are fewer than minOffsetsPerTrigger
        produce(bootstrap, topic, 10, 25, 1)
        while len(sink.rows()) < 35 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [len(rows) for rows in sink.batches.values() if rows] == [35]  # one micro-batch of all
    finally:
        query.stop()
        spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", interval)


def test_progress_reports_give_the_lag_behind_latest(spark, bootstrap, new_topic, checkpoint):
    from odradek.spark import offsets_behind_latest

    topic = new_topic(2)
    produce(bootstrap, topic, 0, 30, 2)
    query = run(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=10),
                Batches(), checkpoint)
    read = 0
    progresses = [p for p in query.recentProgress if p.numInputRows]
    assert len(progresses) == 3
    for progress in progresses:
        read += progress.numInputRows
        lag = offsets_behind_latest(progress.sources[0])
        behind = float(lag["avgOffsetsBehindLatest"]) * 2
        assert behind == 30 - read  # what the two partitions still hold after this batch
        assert int(lag["minOffsetsBehindLatest"]) <= int(lag["maxOffsetsBehindLatest"])
    assert lag == {"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "0", "avgOffsetsBehindLatest": "0.0"}
    assert offsets_behind_latest(json.loads(progresses[0].json)["sources"][0]) is not None


def test_read_committed_stops_at_open_transactions_and_skips_aborted_ones(spark, bootstrap, new_topic, checkpoint):
    """Partition 0 holds a committed transaction, an aborted one, plain records, then a
    transaction still open: a read_committed stream reads up to its start (the last stable
    offset), without the aborted records or the markers; once it commits, the rest."""
    topic = new_topic(1)
    with Producer(bootstrap, transactional_id=f"{topic}-txn") as txn, Producer(bootstrap) as plain:
        txn.init_transactions()
        for values, commit in (([b"c1", b"c2"], True), ([b"a1", b"a2"], False)):
            txn.begin_transaction()
            for v in values:
                txn.send(topic, v, partition=0)
            txn.flush()  # in the log before the abort (an abort drops what is still unsent)
            txn.commit_transaction() if commit else txn.abort_transaction()
        plain.send(topic, b"p1", partition=0).result()
        txn.begin_transaction()
        txn.send(topic, b"o1", partition=0)
        txn.flush()
        df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                    **{"kafka.isolation.level": "read_committed"})
        sink = Batches()
        assert run(df, sink, checkpoint).exception() is None
        assert [r[3] for r in sink.rows()] == [b"c1", b"c2", b"p1"]
        uncommitted = Batches()
        df_all = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest")
        run(df_all, uncommitted, checkpoint + "-all")
        assert sorted(r[3] for r in uncommitted.rows()) == [b"a1", b"a2", b"c1", b"c2", b"o1", b"p1"]
        txn.commit_transaction()
    run(df, sink, checkpoint)
    assert [r[3] for r in sink.rows()] == [b"c1", b"c2", b"p1", b"o1"]
