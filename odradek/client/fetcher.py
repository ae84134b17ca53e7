"""Fetching for a consumer: one Fetch request per leader for all its partitions, kept ahead
of the application, and turning the answers into records.

Sending (``send_fetches``): every fetchable partition (assigned, not paused, position known)
that has no answer waiting to be consumed goes into the next Fetch to its leader, at most one
Fetch in flight per leader. The consumer calls this before it returns records, so the next
answers travel while the application works on the last ones. Requests are sessionless full
fetches (``session_id`` 0, epoch -1); from Fetch v13 topics are named by id, so a topic whose
id is unknown is fetched with v12.

Answers (``_on_fetch``) are kept as ``CompletedFetch``es: the partition, the position they
were fetched at, and the records bytes (a memoryview into the response frame, not copied).
Errors: a partition whose leader moved or whose metadata is stale is retried after a metadata
refresh and a backoff; OFFSET_OUT_OF_RANGE resets the position by ``auto_offset_reset`` (or is
raised by poll with ``"none"``); other errors are raised by the next poll.

Consuming (``collect``): batches are checked (CRC-32C) as they are walked, and the walked
ones decoded together by ``odradek.records.record_spans`` (vectorised; at least
``_DECODE_AT_LEAST`` records or ``max_records`` at a time, or the rest of the answer);
records not yet returned wait for the next call. Records before the position (the first batch
of an answer starts at or before it) are dropped; control batches are skipped, and under
read_committed so are the batches of aborted transactions. An answer fetched at a position
that has since changed (seek, reset, reassignment) is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from functools import partial

from odradek.client.cluster import STALE_METADATA, ClusterClient
from odradek.client.errors import BrokerError, KafkaError, OffsetOutOfRangeError
from odradek.client.metadata import ZERO_UUID
from odradek.client.subscription_state import NONE, PartitionState, SubscriptionState
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
)
from odradek.records.errors import CorruptRecordError
from odradek.records.reader import iter_batches
from odradek.records.record_spans import PendingRecords, decode_batches

_log = logging.getLogger("odradek.client.consumer")
_TOPIC_IDS_FROM = 13  # Fetch v13+ names topics by id
_ABORT = 0  # control record type of an abort marker
# Batches are decoded together until this many records: numpy's per-call cost spread thin.
_DECODE_AT_LEAST = 8192


class CompletedFetch:
    """One partition's answer, consumed incrementally."""

    __slots__ = ("aborted", "aborting", "batches", "end", "leftover", "more", "position", "tp")

    def __init__(self, tp: TopicPartition, position: int, records, aborted) -> None:
        self.tp = tp
        self.position = position
        self.batches = iter_batches(records)
        self.more = True  # batches not yet walked may remain
        self.leftover = PendingRecords([])  # decoded records not yet returned
        self.end = position  # the position once the leftover is returned
        self.aborted = deque(sorted(aborted, key=lambda a: a.first_offset)) if aborted else None
        self.aborting: set[int] = set()


class Fetcher:
    def __init__(self, cluster: ClusterClient, subscriptions: SubscriptionState, *, min_bytes: int,
                 max_wait_ms: int, max_bytes: int, max_partition_bytes: int, isolation_level: int) -> None:
        self.cluster = cluster
        self.subs = subscriptions
        self.min_bytes = min_bytes
        self.max_wait_ms = max_wait_ms
        self.max_bytes = max_bytes
        self.max_partition_bytes = max_partition_bytes
        self.isolation_level = isolation_level
        self.completed: deque[CompletedFetch] = deque()
        self._in_flight: dict[int, asyncio.Future] = {}
        self._signal: asyncio.Future | None = None

    # --- waiting -------------------------------------------------------------------------
    def wake(self) -> None:
        signal = self._signal
        if signal is not None and not signal.done():
            signal.set_result(None)

    async def wait(self, timeout: float) -> None:
        """Until an answer arrives, ``wake`` is called, or ``timeout`` seconds pass."""
        self._signal = signal = self.cluster.loop.create_future()
        try:
            await asyncio.wait_for(signal, timeout)
        except TimeoutError:
            pass
        finally:
            self._signal = None

    def retry_delay(self) -> float:
        """Seconds until a backed-off partition may be fetched again (inf when none is)."""
        now = self.cluster.loop.time()
        waits = [s.retry_at - now for s in self.subs.assignment.values() if s.retry_at > now]
        if not self.subs.assignment:
            return self.cluster.retry_backoff
        return min(waits) if waits else float("inf")

    def clear(self, tp: TopicPartition | None = None) -> None:
        """Drop buffered answers (of one partition, or all)."""
        if tp is None:
            self.completed.clear()
        else:
            self.completed = deque(c for c in self.completed if c.tp != tp)

    # --- sending -------------------------------------------------------------------------
    def send_fetches(self) -> None:
        cluster = self.cluster
        meta = cluster.metadata
        buffered = {c.tp for c in self.completed}
        by_node: dict[int, list[TopicPartition]] = {}
        need_update = False
        for tp in self.subs.fetchable(cluster.loop.time()):
            if tp in buffered:
                continue
            leader = meta.leader(tp.topic, tp.partition)
            if leader is None:
                need_update = True
            elif leader not in self._in_flight:
                by_node.setdefault(leader, []).append(tp)
        if need_update:
            cluster.request_update().add_done_callback(lambda _: self.wake())
        for node, tps in by_node.items():
            conn = cluster.connection_nowait(node)
            if conn is None:
                waiting = cluster.connecting(node)
                if waiting is not None:
                    cluster.after_connect(waiting, self.wake)
                continue
            self._send(node, conn, tps)

    def _send(self, node: int, conn, tps: list[TopicPartition]) -> None:
        meta = self.cluster.metadata
        version = conn.api_version(ApiKey.FETCH)
        if version >= _TOPIC_IDS_FROM and any(meta.topic_id(tp.topic) == ZERO_UUID for tp in tps):
            version = _TOPIC_IDS_FROM - 1
        topics: dict[str, FetchTopic] = {}
        positions: dict[TopicPartition, int] = {}
        for tp in tps:
            state = self.subs.assignment[tp]
            topic = topics.get(tp.topic)
            if topic is None:
                topic = topics[tp.topic] = FetchTopic(topic=tp.topic, topic_id=meta.topic_id(tp.topic), partitions=[])
            info = meta.partition(tp.topic, tp.partition)
            topic.partitions.append(FetchPartition(
                partition=tp.partition, current_leader_epoch=info.leader_epoch if info else -1,
                fetch_offset=state.position, log_start_offset=-1,
                partition_max_bytes=self.max_partition_bytes,
            ))
            positions[tp] = state.position
        request = FetchRequest(
            replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
            max_bytes=self.max_bytes, isolation_level=self.isolation_level, session_id=0,
            session_epoch=-1, topics=list(topics.values()),
        )
        names = {t.topic_id: t.topic for t in topics.values()}
        future = conn.send(ApiKey.FETCH, request, version=version,
                           timeout=self.cluster.request_timeout + self.max_wait_ms / 1000)
        self._in_flight[node] = future
        future.add_done_callback(partial(self._on_fetch, node, positions, names))

    # --- answers -------------------------------------------------------------------------
    def _on_fetch(self, node: int, positions: dict, names: dict, future: asyncio.Future) -> None:
        self._in_flight.pop(node, None)
        self.wake()
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            _log.debug("fetch from broker %d failed: %s", node, error)
            self._back_off(positions)
            self.cluster.request_update()
            return
        response = future.result()
        if response.error_code:
            _log.debug("fetch from broker %d: %s", node, ErrorCode(response.error_code).name)
            self._back_off(positions)
            return
        for topic in response.responses:
            name = topic.topic or names.get(topic.topic_id)
            for p in topic.partitions:
                tp = TopicPartition(name, p.partition_index)
                fetched_at = positions.get(tp)
                state = self.subs.assignment.get(tp)
                if state is None or fetched_at is None or state.position != fetched_at:
                    continue  # reassigned or moved since
                self._partition_answer(tp, state, fetched_at, p)

    def _partition_answer(self, tp: TopicPartition, state: PartitionState, fetched_at: int, p) -> None:
        code = p.error_code
        if code == ErrorCode.NONE:
            state.high_watermark = p.high_watermark
            state.log_start_offset = p.log_start_offset
            state.last_stable_offset = p.last_stable_offset
            if p.records:
                aborted = p.aborted_transactions if self.isolation_level else None
                self.completed.append(CompletedFetch(tp, fetched_at, p.records, aborted))
        elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.subs.default_reset == NONE:
                state.error = OffsetOutOfRangeError({tp: fetched_at})
            else:
                _log.info("%s: offset %d out of range, resetting to %s", tp, fetched_at, self.subs.default_reset)
                self.subs.request_reset(tp, self.subs.default_reset)
        elif code in STALE_METADATA or code in (ErrorCode.NOT_LEADER_OR_FOLLOWER,):
            self._back_off({tp: fetched_at})
            self.cluster.request_update()
        else:
            error = BrokerError(code, subject=tp)
            if error.retriable:
                self._back_off({tp: fetched_at})
            else:
                state.error = error

    def _back_off(self, positions: dict) -> None:
        until = self.cluster.loop.time() + self.cluster.retry_backoff
        for tp in positions:
            state = self.subs.assignment.get(tp)
            if state is not None:
                state.retry_at = until

    # --- consuming -----------------------------------------------------------------------
    def collect(self, max_records: int) -> dict[TopicPartition, list]:
        """Up to ``max_records`` records from the buffered answers, by partition, advancing
        positions. Raises the error of a partition whose answer is corrupt."""
        out: dict[TopicPartition, list] = {}
        completed = self.completed
        assignment = self.subs.assignment
        held = []
        left = max_records
        while completed and left > 0:
            fetch = completed[0]
            state = assignment.get(fetch.tp)
            if state is None or state.position != fetch.position:
                completed.popleft()
                continue
            if state.paused:
                held.append(completed.popleft())
                continue
            records, exhausted = self._drain(fetch, state, left)
            if records:
                have = out.get(fetch.tp)
                if have is None:
                    out[fetch.tp] = records
                else:
                    have.extend(records)
                left -= len(records)
            if exhausted:
                completed.popleft()
        if held:
            completed.extendleft(reversed(held))
        return out

    def _drain(self, fetch: CompletedFetch, state: PartitionState, limit: int) -> tuple[list, bool]:
        """Records of ``fetch`` from the position on, at most ``limit``; and whether the fetch
        has nothing more."""
        if not fetch.leftover and fetch.more:
            fetch.leftover, fetch.end, error = self._decode_more(fetch, max(limit, _DECODE_AT_LEAST))
            if error is not None:
                state.error = KafkaError(f"corrupt record batch in {fetch.tp} at or after offset {fetch.end}: {error}")
                fetch.more = False
        records = fetch.leftover.take(limit)
        position = fetch.leftover.next_offset()
        state.position = fetch.position = fetch.end if position is None else position
        return records, position is None and not fetch.more

    def _decode_more(self, fetch: CompletedFetch, want: int) -> tuple[PendingRecords, int, CorruptRecordError | None]:
        """Walk the answer's batches from the position on until at least ``want`` records
        (or the end); decode them together. Returns the records, the position after them
        (the last walked batch's next offset), and the error that stopped the walk, if any:
        the records of the batches before a corrupt one are still returned."""
        position = fetch.position
        walked, count, error = [], 0, None
        try:
            for batch in fetch.batches:
                if batch.next_offset <= position:
                    continue
                if not self._skip(fetch, batch):
                    walked.append(batch)
                    count += batch.next_offset - max(batch.base_offset, position)
                position = batch.next_offset
                if count >= want:
                    break
            else:
                fetch.more = False
        except CorruptRecordError as e:
            error = e
        if not walked:  # nothing but control batches and aborted transactions: move past them
            return PendingRecords([]), position, error
        records, good_until, decode_error = decode_batches(walked, fetch.position)
        if decode_error is not None:
            return records, good_until, decode_error
        return records, position, error

    def _skip(self, fetch: CompletedFetch, batch) -> bool:
        """Control batches, and (read_committed) batches of aborted transactions."""
        is_control = getattr(batch, "is_control", False)
        aborted = fetch.aborted
        if aborted is None:
            return is_control
        while aborted and aborted[0].first_offset <= batch.last_offset:
            fetch.aborting.add(aborted.popleft().producer_id)
        if is_control:
            if batch.producer_id in fetch.aborting:
                try:
                    if batch.end_txn_marker().type == _ABORT:
                        fetch.aborting.discard(batch.producer_id)
                except (CorruptRecordError, AttributeError):
                    pass
            return True
        return batch.is_transactional and batch.producer_id in fetch.aborting
