"""Executor side of writes: the rows of Arrow batches sent as records with the process's
pooled ``AsyncProducer`` (idempotent, acks=all).

A row is ``value`` plus optional ``key``, ``topic``, ``partition`` and ``headers`` columns;
strings are sent as UTF-8. The ``topic`` option, when set, overrides the column (as in
Spark's Kafka sink); a null partition leaves the choice to the producer's partitioner.

Two ways to send (``send_rows``):
- direct: each row to its topic; at least once across task retries, like Spark's sink;
- staged (exactly-once sink, see ``stream_writer``): every row of the task goes to one
  partition of the staging topic, with two headers appended: ``odradek.stage`` (the task
  attempt's tag ``query/batch/attempt``) and ``odradek.target`` (``partition/topic``,
  partition -1 when the row named none). The driver later publishes only staged rows of the
  attempts Spark committed; a failed attempt's rows stay behind in staging, unpublished.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from odradek.client.errors import BufferFullError, KafkaError
from odradek.spark import client_pool

__all__ = ["Row", "rows_of", "send_rows", "send_some", "staged", "Tally", "DirectWrite", "StagedWrite",
           "STAGE_HEADER", "TARGET_HEADER"]

STAGE_HEADER = "odradek.stage"
TARGET_HEADER = "odradek.target"

# (topic, partition or None, key, value, headers tuple)
Row = tuple


@dataclass(frozen=True)
class DirectWrite(WriterCommitMessage):
    count: int


@dataclass(frozen=True)
class StagedWrite(WriterCommitMessage):
    """What one task attempt staged: ``count`` rows tagged ``tag`` in ``staging_partition``
    between ``first`` and ``last`` (inclusive; -1 when none)."""

    query_id: str
    batch_id: int
    task: int
    tag: str
    staging_partition: int
    first: int
    last: int
    count: int

    def as_row(self) -> list:
        return [self.task, self.staging_partition, self.first, self.last, self.count, self.tag]


def _as_bytes(column: pa.Array) -> list:
    values = column.to_pylist()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return [None if v is None else v.encode() for v in values]
    return values


def rows_of(batch: pa.RecordBatch, topic_option: str | None) -> Iterator[Row]:
    """The records of ``batch``'s rows. Raises ValueError for a row without a topic."""
    names = set(batch.schema.names)
    n = batch.num_rows
    values = _as_bytes(batch.column("value"))
    keys = _as_bytes(batch.column("key")) if "key" in names else [None] * n
    if topic_option is not None or "topic" not in names:
        topics = [topic_option] * n
    else:
        topics = batch.column("topic").to_pylist()
    partitions = batch.column("partition").to_pylist() if "partition" in names else [None] * n
    headers = batch.column("headers").to_pylist() if "headers" in names else [None] * n
    for topic, partition, key, value, hs in zip(topics, partitions, keys, values, headers, strict=True):
        if topic is None:
            raise ValueError("a row has a null topic and no 'topic' option is set")
        yield topic, partition, key, value, tuple((h["key"], h["value"]) for h in hs) if hs else ()


class Tally:
    """Acknowledgements counted as they arrive (delivery callbacks, on the loop): how many,
    the lowest and highest offset, and the first failure."""

    def __init__(self) -> None:
        self.sent = 0
        self.acked = 0
        self.first = -1
        self.last = -1
        self.error: BaseException | None = None

    def __call__(self, metadata, error) -> None:
        if error is not None:
            self.error = self.error or error
            return
        self.acked += 1
        offset = metadata.offset
        if self.first < 0 or offset < self.first:
            self.first = offset
        self.last = max(self.last, offset)


async def send_some(producer, rows: Iterable[Row], tally: Tally) -> None:
    """Hand ``rows`` to ``producer`` (on its loop), counting acknowledgements in ``tally``."""
    for topic, partition, key, value, headers in rows:
        while True:
            try:
                producer.send(topic, value, key, headers or None, partition, callback=tally)
                break
            except BufferFullError:
                await producer.wait_for_buffer()
        tally.sent += 1


def send_rows(bootstrap: str, batches: Iterable[Iterable[Row]], producer_config: tuple = ()) -> Tally:
    """Send every row of ``batches`` (one loop call per batch) and wait until all are
    acknowledged; raises the first failure. ``producer_config``: the producer's keywords
    (the sink's ``kafka.*`` options) as pairs."""
    thread = client_pool.loop_thread()
    producer = client_pool.producer(bootstrap, **dict(producer_config))
    tally = Tally()
    for rows in batches:
        thread.run(send_some(producer, rows, tally))
    thread.run(producer.flush())
    if tally.error is not None:
        error = tally.error
        raise error if isinstance(error, KafkaError) else KafkaError(str(error))
    if tally.acked != tally.sent:
        raise KafkaError(f"{tally.sent - tally.acked} of {tally.sent} records were not acknowledged")
    return tally


def staged(rows: Iterable[Row], staging_topic: str, staging_partition: int, tag: str) -> Iterator[Row]:
    """``rows`` readdressed to the staging partition, tagged with the attempt and target."""
    stage = (STAGE_HEADER, tag.encode())
    for topic, partition, key, value, headers in rows:
        target = (TARGET_HEADER, f"{-1 if partition is None else partition}/{topic}".encode())
        yield staging_topic, staging_partition, key, value, headers + (stage, target)
