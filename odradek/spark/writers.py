"""The Spark writers of the ``odradek`` format: batch (``df.write``) and streaming
(``df.writeStream``), in one of three modes (the ``exactlyOnce`` option, ``options.SINK_MODES``):

- ``transactional`` (streaming default): each task writes its rows in a Kafka transaction and
  prepares it; the driver's ``commit`` decides the batch and commits every task's
  transaction (``txn_sink``). Exactly once for read_committed readers.
- ``staged``: tasks stage their rows in a staging topic, the driver's ``commit`` publishes
  what Spark committed, each record tagged (``exactly_once``). Exactly once for any reader,
  at the cost of a second copy and of the driver re-sending every record.
- ``direct`` (``false``; batch default): tasks send straight to the targets with the pooled
  idempotent producer (``record_writer``), at least once, as Spark's Kafka sink.

When no bootstrap server accepts a connection, the write fails after ``kafka.max.block.ms``
(60 s, as long as Kafka's producer waits for metadata) with one line naming the servers
(``reachability``): on the driver, which creates the sink's topics, in the transactional
and staged modes; on the executors, whose producers send the rows, in all three.

What reaches the driver's ``commit`` from a task is only its commit message (Spark calls
``streamWriter()`` anew for each commit), so a task's message carries everything: query id
and batch id (from the task's local properties ``sql.streaming.queryId`` and
``streaming.sql.batchId``; a batch write uses an id drawn when the job is planned and
batch 0) and what the task wrote.
"""

from __future__ import annotations

import logging
import uuid
from typing import Iterator

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter
from pyspark.sql.types import StructType

from odradek.client import AdminClient, NewTopic
from odradek.spark import exactly_once, failpoints, txn_sink
from odradek.spark.options import DIRECT, STAGED, TRANSACTIONAL, SinkOptions
from odradek.spark.reachability import wait_reachable
from odradek.spark.record_writer import DirectWrite, StagedWrite, rows_of, send_rows, staged
from odradek.spark.schema import check_write_schema
from odradek.spark.sink_log import SinkLog, ensure_topic

__all__ = ["BatchWriter", "StreamWriter"]

_log = logging.getLogger("odradek.spark")
STAGING_PARTITIONS = 8
STAGING_RETENTION_MS = 7 * 24 * 3600 * 1000


def _staging_partitions(options: SinkOptions) -> int:
    """Create the staging topic unless it exists; its partition count."""
    with AdminClient(options.bootstrap, client_id="odradek-spark-sink") as admin:
        ensure_topic(admin, NewTopic(options.staging_topic, STAGING_PARTITIONS, -1,
                                     configs={"retention.ms": str(STAGING_RETENTION_MS)}))
        return len(admin.describe_topics([options.staging_topic])[options.staging_topic].partitions)


class _Writer:
    def __init__(self, options: SinkOptions, schema: StructType, mode: str, job_id: str | None) -> None:
        check_write_schema(schema, options.topic)
        self.options = options
        self.mode = mode
        self.job_id = job_id
        if mode != DIRECT:  # the driver writes the sink's topics itself: first wait for the cluster
            wait_reachable(options.bootstrap, options.max_block_ms, "kafka.max.block.ms")
        self.staging_partitions = _staging_partitions(options) if mode == STAGED else 0
        if mode == TRANSACTIONAL:  # tasks read the sink log: it must exist before they start
            SinkLog(options.bootstrap, options.commit_topic)

    def _ids(self) -> tuple[str, int]:
        context = TaskContext.get()
        query_id = context.getLocalProperty("sql.streaming.queryId") if context else None
        batch_id = context.getLocalProperty("streaming.sql.batchId") if context else None
        if query_id is None:
            return f"batch-{self.job_id}", 0
        return query_id, int(batch_id)

    def _write(self, iterator: Iterator[pa.RecordBatch]):
        o = self.options
        rows = (rows_of(batch, o.topic) for batch in iterator)
        if self.mode == DIRECT:
            return DirectWrite(send_rows(o.bootstrap, rows, o.producer).acked)
        context = TaskContext.get()
        query_id, batch_id = self._ids()
        task = context.partitionId()
        if self.mode == TRANSACTIONAL:
            return txn_sink.write_task(o, rows, query_id, batch_id, task)
        tag = f"{query_id}/{batch_id}/{context.taskAttemptId()}"
        partition = task % self.staging_partitions
        tally = send_rows(o.bootstrap, (staged(r, o.staging_topic, partition, tag) for r in rows), o.producer)
        failpoints.hit(o.failpoint, "write.after_stage", batch_id)
        return StagedWrite(query_id, batch_id, task, tag, partition, tally.first, tally.last, tally.acked)

    def _commit(self, messages: list, batch_id: int) -> None:
        if self.mode == TRANSACTIONAL:
            txn_sink.commit_batch(self.options, messages, batch_id)
        elif self.mode == STAGED:
            exactly_once.commit_batch(self.options, messages, batch_id)

    def _abort(self, messages: list, batch_id: int) -> None:
        if self.mode == TRANSACTIONAL:
            txn_sink.abort_batch(self.options, messages, batch_id)
            return
        what = "staged rows stay unpublished" if self.mode == STAGED else "rows already sent stay in their topics"
        _log.warning("write of batch %d aborted: %s", batch_id, what)


class BatchWriter(_Writer, DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        mode = options.mode or DIRECT
        super().__init__(options, schema, mode, uuid.uuid4().hex if mode != DIRECT else None)

    def write(self, iterator):
        return self._write(iterator)

    def commit(self, messages) -> None:
        self._commit(messages, 0)

    def abort(self, messages) -> None:
        self._abort(messages, 0)


class StreamWriter(_Writer, DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        super().__init__(options, schema, options.mode or TRANSACTIONAL, None)

    def write(self, iterator):
        return self._write(iterator)

    def commit(self, messages, batchId: int) -> None:
        self._commit(messages, batchId)

    def abort(self, messages, batchId: int) -> None:
        self._abort(messages, batchId)
