"""The transactional sink (``exactlyOnce=transactional``, the streaming default):

- the commit protocol driven directly, without Spark: prepare, decide, commit, a replay of a
  decided batch, a retried task fencing its predecessor, a driver dying after its decision,
  abort;
- a Spark job killed with kill -9 (its whole process group) in the middle of a batch's
  writes and restarted, its output read with confluent-kafka at read_committed: every input
  record exactly once, nothing of the batch cut short; and read back through the ``odradek``
  source at read_committed;
- a driver whose commit fails after its decision: the replay commits the decided batch;
- a task attempt that dies without aborting, fenced by Spark's retry of it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql import functions as F

from odradek.client import Producer
from odradek.client.transactions import TransactionHandle, end_transaction
from odradek.spark import failpoints
from odradek.spark.options import parse_sink_options
from odradek.spark.sink_log import SinkLog
from odradek.spark.txn_sink import abort_batch, commit_batch, transactional_id, write_task
from tests.spark.upper_case_stream import run_upper_case_stream

ROOT = Path(__file__).resolve().parents[2]


def read_all(bootstrap: str, topic: str, partitions: int, committed: bool = True) -> list[bytes]:
    """Every value of ``topic`` up to its end, read with confluent-kafka at read_committed
    (or read_uncommitted)."""
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                              "isolation.level": "read_committed" if committed else "read_uncommitted",
                              "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        tps = [KafkaTopicPartition(topic, p, 0) for p in range(partitions)]
        consumer.assign(tps)
        values, at_end, deadline = [], set(), time.monotonic() + 30
        while len(at_end) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(message.partition())
                    continue
                raise AssertionError(message.error())
            values.append(message.value())
        assert len(at_end) == partitions, "the partitions' ends were not reached"
        return values
    finally:
        consumer.close()


def rows(prefix: str, n: int) -> list:
    return [(None, None, b"k%d" % i, b"%s-%d" % (prefix.encode(), i), ()) for i in range(n)]


def options_for(bootstrap: str, topic: str, **extra):
    """The sink's options, and its log's topic created, as the driver's writer does."""
    options = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                                  "commit.topic": f"_commits-{uuid.uuid4().hex[:8]}", **extra})
    SinkLog(bootstrap, options.commit_topic)
    return options


def write(options, query: str, batch: int, partition: int, values: list):
    return write_task(options, [[(options.topic,) + r[1:] for r in values]], query, batch, partition)


def test_commit_protocol_replays_fencing_and_abort(bootstrap, new_topic):
    target = new_topic(2)
    o = options_for(bootstrap, target)
    query = uuid.uuid4().hex
    # Batch 0: two tasks prepare; nothing is visible before the driver decides.
    m = [write(o, query, 0, 0, rows("a", 10)), write(o, query, 0, 1, rows("b", 5))]
    assert [x.count for x in m] == [10, 5] and all(x.handle and not x.replayed for x in m)
    assert m[0].handle[0] == transactional_id("odradek-spark-", query, 0) == f"odradek-spark-{query}/0"
    assert read_all(bootstrap, target, 2) == []
    assert commit_batch(o, m, 0) == 2
    assert sorted(read_all(bootstrap, target, 2)) == sorted(v for *_, v, _ in rows("a", 10) + rows("b", 5))
    # A replay of batch 0: its tasks find it decided in the sink log and write nothing; the
    # driver commits nothing new.
    again = [write(o, query, 0, 0, rows("a", 10)), write(o, query, 0, 1, rows("b", 5))]
    assert all(x.replayed and x.handle is None for x in again)
    assert commit_batch(o, again, 0) == 0 and len(read_all(bootstrap, target, 2)) == 15

    # Batch 1: a retried task (same transactional id) fences the attempt before it, whose
    # prepared transaction can then never be committed.
    zombie = write(o, query, 1, 0, rows("zombie", 4))
    retry = write(o, query, 1, 0, rows("c", 4))
    assert retry.handle[0] == zombie.handle[0] == transactional_id("odradek-spark-", query, 0)  # every batch
    assert retry.handle[1] == zombie.handle[1] and retry.handle[2] > zombie.handle[2]
    with pytest.raises(Exception, match="FENCED|EPOCH"):
        end_transaction(bootstrap, TransactionHandle(*zombie.handle), True)
    empty = write(o, query, 1, 1, [])
    assert empty.handle is None and empty.count == 0  # no rows, no transaction
    assert commit_batch(o, [retry, empty], 1) == 1
    assert Counter(read_all(bootstrap, target, 2)) == Counter(v for *_, v, _ in rows("a", 10) + rows("b", 5)
                                                              + rows("c", 4))

    # Batch 2: the driver dies right after recording its decision; Spark's abort must not
    # undo a decided batch; the replay's tasks write nothing and the driver commits what it
    # decided.
    m = [write(o, query, 2, 0, rows("d", 3)), write(o, query, 2, 1, rows("e", 3))]
    with pytest.raises(failpoints.InjectedFailure):
        commit_batch(replace(o, failpoint="commit.after_decision@2"), m, 2)
    abort_batch(o, m, 2)
    assert len(read_all(bootstrap, target, 2)) == 19  # batch 2 decided, not committed yet
    replay = [write(o, query, 2, 0, rows("d", 3)), write(o, query, 2, 1, rows("e", 3))]
    assert all(x.replayed for x in replay)
    assert commit_batch(o, replay, 2) == 2
    assert len(read_all(bootstrap, target, 2)) == 25

    # Batch 3: aborted by Spark before any decision: never visible to read_committed.
    m = [write(o, query, 3, 0, rows("f", 6))]
    abort_batch(o, m, 3)
    committed = read_all(bootstrap, target, 2)
    assert len(committed) == 25 and not any(v.startswith(b"f-") for v in committed)
    assert sum(v.startswith(b"f-") for v in read_all(bootstrap, target, 2, committed=False)) == 6


def start_job(bootstrap: str, source: str, target: str, checkpoint: str, failpoint: str,
              marker: Path) -> subprocess.Popen:
    env = {**os.environ, "ODRADEK_FAILPOINT_MARKER": str(marker), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tests.spark.txn_job", bootstrap, source, target, checkpoint,
                             failpoint], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def kill_at(job: subprocess.Popen, marker: Path, point: str, timeout: float = 240) -> None:
    """Wait until the job hangs at ``point``, then kill -9 its whole process group."""
    deadline = time.monotonic() + timeout
    try:
        while point not in (marker.read_text() if marker.exists() else ""):
            if job.poll() is not None:
                raise AssertionError(f"the job ended ({job.returncode}) before {point}: "
                                     + job.stderr.read().decode(errors="replace")[-3000:])
            if time.monotonic() > deadline:
                raise AssertionError(f"the job never reached {point}")
            time.sleep(0.2)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def fill(bootstrap: str, topic: str, n: int) -> Counter:
    with Producer(bootstrap) as producer:
        for i in range(n):
            producer.send(topic, b"event-%03d" % i, key=b"m%d" % (i % 17), partition=i % 2)
        producer.flush()
    return Counter(b"EVENT-%03d" % i for i in range(n))


def test_job_killed_hard_mid_batch_restarts_exactly_once(spark, bootstrap, new_topic, tmp_path):
    source, target = new_topic(2), new_topic(2)
    expected = fill(bootstrap, source, 200)  # two batches of 100: batch 1, the killed one, is the last
    checkpoint, marker = str(tmp_path / "checkpoint"), tmp_path / "marker"

    # Killed (the driver's JVM and every Python worker) while a task of batch 1 has written
    # its rows in its open transaction: batch 0 is there, whole; nothing of batch 1.
    kill_at(start_job(bootstrap, source, target, checkpoint, "write.before_prepare@1:hang", marker), marker,
            "write.before_prepare@1")
    seen = Counter(read_all(bootstrap, target, 2))
    assert sum(seen.values()) == 100 and max(seen.values()) == 1
    assert len(read_all(bootstrap, target, 2, committed=False)) > 100  # batch 1's rows are in the log

    # Restarted on the same checkpoint, by another driver (this process's SparkSession: a third
    # JVM's start would cost more than the rest of the restart): batch 1's replay fences the
    # dead attempts' transactions (aborting them) and the query completes.
    restarted = run_upper_case_stream(spark, bootstrap, source, target, checkpoint)
    assert restarted.exception() is None and not restarted.isActive
    assert Counter(read_all(bootstrap, target, 2)) == expected  # each record exactly once
    uncommitted = read_all(bootstrap, target, 2, committed=False)
    assert len(uncommitted) > 200  # the killed attempt's rows are in the log, aborted

    # The odradek source at read_committed reads the same; read_uncommitted the aborted rows too.
    def read(level: str):
        return (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", target)
                .option("kafka.isolation.level", level).load().select(F.col("value").cast("string")).collect())

    assert Counter(r[0].encode() for r in read("read_committed")) == expected
    assert len(read("read_uncommitted")) == len(uncommitted)


def test_a_batch_decided_before_the_driver_failed_is_committed_by_its_replay(spark, bootstrap, new_topic, tmp_path):
    """The driver's commit of batch 1 fails right after recording its decision; Spark then
    calls abort, which must leave the decided transactions open; the restarted query
    replays batch 1, whose tasks write nothing, and the driver commits what it decided."""
    source, target = new_topic(2), new_topic(2)
    expected = fill(bootstrap, source, 200)
    checkpoint = str(tmp_path / "checkpoint")

    def run(failpoint: str | None):
        return run_upper_case_stream(spark, bootstrap, source, target, checkpoint, failpoint)

    first = run("commit.after_decision@1")
    assert "injected failure at commit.after_decision of batch 1" in str(first.exception())
    seen = Counter(read_all(bootstrap, target, 2))
    assert sum(seen.values()) == 100 and max(seen.values()) == 1  # batch 1 decided, not yet committed
    second = run(None)
    assert second.exception() is None
    assert Counter(read_all(bootstrap, target, 2)) == expected


def test_a_task_dying_in_its_transaction_is_fenced_by_its_retry(spark, bootstrap, new_topic, tmp_path):
    """The first attempt of task 0 exits its Python worker (no abort) with its rows written
    in an open transaction; Spark retries the task, whose InitProducerId fences (aborts) it."""
    target = new_topic(2)
    df = spark.range(40).select(F.col("id").cast("string").alias("key"),
                                F.format_string("v%02d", "id").alias("value")).repartition(2)
    (df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", target)
     .option("exactlyOnce", "transactional").option("failpoint", "write.before_prepare@0:exit")
     .mode("append").save())
    assert sorted(read_all(bootstrap, target, 2)) == sorted(b"v%02d" % i for i in range(40))
    assert len(read_all(bootstrap, target, 2, committed=False)) > 40  # the dead attempt's rows, aborted
