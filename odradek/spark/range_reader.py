"""Executor side: fetch one ``OffsetRange`` from its partition's leader and yield Arrow
record batches.

Fetch requests go through the process's shared ``ClusterClient`` (``client_pool``): leader
lookup, connections, version negotiation and metadata refresh are the client's. The next
Fetch is sent before the current answer is decoded, so the broker and the network work
while this process decodes (``record_columns``). Each answer becomes one Arrow batch (up to
``max_partition_bytes`` of records: about 70k rows of 100 bytes at the 8 MiB default; Spark
moves big batches much faster than small ones).

Errors:
- a leader that moved, an unknown topic or a broken connection: metadata refresh and retry,
  with backoff, for up to ``retry_timeout_ms`` (the ``kafkaConsumer.pollTimeoutMs`` option);
  a process's first client waits as long for the cluster to accept a connection
  (``reachability``);
- the range starts below the log start offset (retention deleted it) or the log ends before
  the range does: data loss, raised as ``DataLossError`` with ``failOnDataLoss=true``, else
  logged, and the range continues from what is left;
- a single batch larger than the fetch size: the size doubles up to 256 MiB.

Isolation (``kafka.isolation.level``): read_uncommitted fetches up to the high watermark and
returns every data record. read_committed asks the broker for records below the last stable
offset only (Fetch ``isolation_level`` 1) and drops the batches of the aborted transactions
the answer lists (``record_columns.decode_fetched``); the driver's ranges then end at the
last stable offset too (``offset_reader``), so a range is all below it and reads the same
records every time. Either way a range's rows may have gaps in their offsets (control
batches, aborted records) and the range is read by offset, not by counting rows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from odradek.client.cluster import STALE_METADATA
from odradek.client.errors import BrokerError, KafkaError, KafkaTimeoutError
from odradek.client.metadata import ZERO_UUID
from odradek.client.offset_fetcher import EARLIEST, LATEST, OffsetFetcher
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.fetch_request import FetchPartition, FetchRequest, FetchTopic
from odradek.spark import client_pool
from odradek.spark.offset_range import OffsetRange
from odradek.spark.record_columns import RecordColumns, decode_fetched, next_offset_after
from odradek.spark.schema import arrow_schema

__all__ = ["FetchConfig", "read_range", "to_record_batch", "DataLossError"]

_log = logging.getLogger("odradek.spark")
_TOPIC_IDS_FROM = 13  # Fetch v13+ names topics by id
_MAX_FETCH = 256 << 20


class DataLossError(RuntimeError):
    """Records a query was meant to read are gone (see the ``failOnDataLoss`` option)."""


@dataclass(frozen=True)
class FetchConfig:
    bootstrap: str
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_partition_bytes: int = 8 << 20
    max_wait_ms: int = 100
    retry_timeout_ms: int = 120_000     # kafkaConsumer.pollTimeoutMs
    cluster_config: tuple = ()          # ClusterClient keywords (kafka.* options), sorted pairs
    isolation_level: int = 0            # 0 read_uncommitted, 1 read_committed


def read_range(config: FetchConfig, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``rng`` as Arrow batches of ``arrow_schema(config.include_headers)``."""
    reader = _RangeReader(config, rng)
    schema = arrow_schema(config.include_headers)
    for columns in reader:
        yield to_record_batch(rng.topic, rng.partition, columns, schema)


def to_record_batch(topic: str, partition: int, columns: RecordColumns, schema: pa.Schema) -> pa.RecordBatch:
    n = len(columns)
    name = topic.encode()
    topics = pa.Array.from_buffers(pa.string(), n, [
        None, pa.py_buffer(np.arange(0, (n + 1) * len(name), len(name), dtype=np.int32)), pa.py_buffer(name * n)])
    arrays = [
        columns.keys, columns.values, topics,
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(columns.offsets),
        pa.array(columns.timestamps * 1000).view(pa.timestamp("us", tz="UTC")),
        pa.array(columns.timestamp_types.astype(np.int32, copy=False)),
    ]
    if columns.headers is not None:
        arrays.append(columns.headers)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class _RangeReader:
    """Iterates ``RecordColumns`` of one range, one per Fetch answer."""

    def __init__(self, config: FetchConfig, rng: OffsetRange) -> None:
        self.config = config
        self.rng = rng
        self.thread = client_pool.loop_thread()
        self.cluster = client_pool.cluster(config.bootstrap, config.cluster_config,
                                           (config.retry_timeout_ms, "kafkaConsumer.pollTimeoutMs"))
        self.max_bytes = config.max_partition_bytes

    def __iter__(self) -> Iterator[RecordColumns]:
        rng = self.rng
        position = rng.start
        pending = self._send(position) if position < rng.end else None
        stalled_since = None
        while pending is not None:
            records, high_watermark, aborted, moved_to = self._answer(pending, position)
            if moved_to is not None:  # out of range, and the data-loss policy moved on
                position = moved_to
                pending = self._send(position) if position < rng.end else None
                continue
            ahead = next_offset_after(records, position)
            if ahead > position:
                pending = self._send(ahead) if ahead < rng.end else None  # before decoding
                columns, _ = decode_fetched(records, position, rng.end, self.config.include_headers, aborted)
                position, stalled_since = ahead, None
                if columns is not None:
                    yield columns
                continue
            if len(records):
                self.max_bytes = self._grow()  # one batch bigger than the fetch size
            elif high_watermark <= position:
                position = self._log_ends_early(position, high_watermark)
            else:
                stalled_since = self._stalled(stalled_since, position, high_watermark)
            pending = self._send(position) if position < rng.end else None

    def _send(self, position: int):
        """Start a Fetch at ``position`` on the loop; returns a concurrent future."""
        return asyncio.run_coroutine_threadsafe(self._fetch(position), self.thread.loop)

    async def _fetch(self, position: int):
        cluster = self.cluster
        deadline = cluster.loop.time() + self.config.retry_timeout_ms / 1000
        return await cluster.retry(lambda: self._fetch_once(position), deadline)

    async def _fetch_once(self, position: int):
        """``(error_code, records, high_watermark, aborted transactions)`` of one Fetch; raises
        retriable errors for ``ClusterClient.retry`` (which refreshes metadata on them)."""
        cluster, rng = self.cluster, self.rng
        cluster.add_topics([rng.topic])
        meta = cluster.metadata
        leader = meta.leader(rng.topic, rng.partition)
        if leader is None:
            await cluster.refresh([rng.topic])
            leader = cluster.metadata.leader(rng.topic, rng.partition)
            if leader is None:
                raise BrokerError(ErrorCode.LEADER_NOT_AVAILABLE, subject=f"{rng.topic}-{rng.partition}")
            meta = cluster.metadata
        conn = await cluster.connection(leader)
        version = conn.api_version(ApiKey.FETCH)
        topic_id = meta.topic_id(rng.topic)
        if version >= _TOPIC_IDS_FROM and topic_id == ZERO_UUID:
            version = _TOPIC_IDS_FROM - 1
        info = meta.partition(rng.topic, rng.partition)
        request = FetchRequest(
            replica_id=-1, max_wait_ms=self.config.max_wait_ms, min_bytes=1, max_bytes=self.max_bytes,
            isolation_level=self.config.isolation_level, session_id=0, session_epoch=-1,
            topics=[FetchTopic(topic=rng.topic, topic_id=topic_id, partitions=[FetchPartition(
                partition=rng.partition, current_leader_epoch=info.leader_epoch if info else -1,
                fetch_offset=position, log_start_offset=-1, partition_max_bytes=self.max_bytes)])])
        response = await conn.send(ApiKey.FETCH, request, version=version,
                                   timeout=cluster.request_timeout + self.config.max_wait_ms / 1000)
        if response.error_code:
            raise BrokerError(response.error_code, subject=f"{rng.topic}-{rng.partition}")
        for topic in response.responses:
            for p in topic.partitions:
                if p.partition_index != rng.partition:
                    continue
                if p.error_code in STALE_METADATA or (p.error_code and BrokerError(p.error_code).retriable):
                    raise BrokerError(p.error_code, subject=f"{rng.topic}-{rng.partition}")
                aborted = p.aborted_transactions if self.config.isolation_level else None
                return p.error_code, p.records or b"", p.high_watermark, aborted
        raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, subject=f"{rng.topic}-{rng.partition}")

    def _answer(self, pending, position: int):
        """``(records, high_watermark, aborted, None)`` of a finished Fetch, or ``(b"", -1,
        None, new_position)`` when the position was out of range and the data-loss policy
        moved it. ``aborted``: the answer's aborted transactions (read_committed), else None."""
        code, records, high_watermark, aborted = pending.result()
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            return b"", -1, None, self._out_of_range(position)
        if code:
            raise BrokerError(code, subject=f"{self.rng.topic}-{self.rng.partition}")
        return records, high_watermark, aborted, None

    def _stalled(self, since: float | None, position: int, high_watermark: int) -> float:
        """An empty answer below the high watermark: retried until ``retry_timeout_ms``."""
        now = time.monotonic()
        if since is not None and now - since > self.config.retry_timeout_ms / 1000:
            raise KafkaTimeoutError(f"{self.rng.topic}-{self.rng.partition}: no records at offset {position} "
                                    f"for {self.config.retry_timeout_ms} ms though the high watermark is "
                                    f"{high_watermark}")
        return now if since is None else since

    def _out_of_range(self, position: int) -> int:
        earliest, latest = self._log_bounds()
        rng = self.rng
        if position < earliest:
            self._data_loss(f"offsets {position}..{min(earliest, rng.end) - 1} of {rng.topic}-{rng.partition} "
                            f"were deleted (the log now starts at {earliest})")
            return max(earliest, position)
        return self._log_ends_early(position, latest)

    def _log_ends_early(self, position: int, end_of_log: int) -> int:
        rng = self.rng
        self._data_loss(f"{rng.topic}-{rng.partition} ends at offset {end_of_log}, before the range's end "
                        f"{rng.end} (records {position}..{rng.end - 1} are missing)")
        return rng.end

    def _data_loss(self, message: str) -> None:
        if self.config.fail_on_data_loss:
            raise DataLossError(message + ". Set failOnDataLoss=false to skip lost records instead.")
        _log.warning("%s; skipping them (failOnDataLoss=false)", message)

    def _log_bounds(self) -> tuple[int, int]:
        """The partition's log start offset and high watermark, asked of its leader."""
        tp = TopicPartition(self.rng.topic, self.rng.partition)
        offsets = OffsetFetcher(self.cluster, self.config.isolation_level)
        timeout = self.config.retry_timeout_ms / 1000
        earliest = self.thread.run(offsets.list_offsets({tp: EARLIEST}, timeout))[tp]
        latest = self.thread.run(offsets.list_offsets({tp: LATEST}, timeout))[tp]
        return earliest.offset, latest.offset

    def _grow(self) -> int:
        if self.max_bytes >= _MAX_FETCH:
            raise KafkaError(f"a record batch of {self.rng.topic}-{self.rng.partition} at offset "
                             f"{self.rng.start}.. is larger than {_MAX_FETCH} bytes")
        return min(self.max_bytes * 2, _MAX_FETCH)
