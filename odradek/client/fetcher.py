"""Fetching for a consumer: one Fetch request per leader for all its partitions, kept ahead
of the application, and turning the answers into records.

Sending (``send_fetches``): every fetchable partition (assigned, not paused, position known)
that has no answer waiting to be consumed is wanted from its leader, at most one Fetch in
flight per leader. The consumer calls this before it returns records, so the next answers
travel while the application works on the last ones. From Fetch v13 topics are named by id,
so a topic whose id is unknown is fetched with v12.

Fetch sessions (KIP-227, Kafka's ``AbstractFetch`` with one ``FetchSessionHandler`` per
broker, ``protocol/fetch_session_handler.py``): from Fetch v7 the first request to a broker is
full at epoch 0 and makes a session; later ones carry only the partitions added or whose
fetch offset, leader epoch or max bytes changed, and ``forgotten_topics_data`` for those no
longer wanted. A partition with an answer still buffered is not wanted, so it leaves the
session and comes back, at its new position, once consumed (as in Kafka: kept in, the broker
would answer it again from the old offset). An answer holds only partitions with news; those
not in it stay in the session untouched. Every session partition's position is remembered
with the request, and an answer's partition that was not in the session is ignored.
The session starts over with a full fetch after FETCH_SESSION_ID_NOT_FOUND (a new session),
after INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR or a failed request (closing
the old one), on a new connection to the broker (it restarted, or the old connection was
lost) and when the request switches between topic names and ids; a broker that answers with
session id 0 keeps none, and full fetches go on (each asking again). ``close`` sends each
session's id at epoch -1 over the connection still open, which closes it on the broker; a
broker not connected is not dialled (its session expires there). As in Kafka, an assignment
that empties (``unsubscribe``) sends nothing: the session keeps its partitions until the next
fetch to that broker forgets them, ``close`` closes it, or the broker evicts it.

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
from odradek.client.preferred_read_replica import PreferredReadReplicas
from odradek.client.subscription_state import NONE, PartitionState, SubscriptionState
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.fetch_session_handler import FINAL_EPOCH, INVALID_SESSION_ID, FetchSessionHandler
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
_SESSIONS_FROM = 7  # Fetch v7+ carries session_id and session_epoch (KIP-227)
# Top-level errors of the session itself: the handler starts over, the next fetch goes at once.
_SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                             ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR})
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


class BrokerSession:
    """The fetch session with one broker: its handler, the connection it was made on and
    whether its requests name topics by id; a change of either starts the session over."""

    __slots__ = ("conn", "handler", "uses_topic_ids")

    def __init__(self, conn, uses_topic_ids: bool) -> None:
        self.handler = FetchSessionHandler()
        self.conn = conn
        self.uses_topic_ids = uses_topic_ids


class Fetcher:
    def __init__(self, cluster: ClusterClient, subscriptions: SubscriptionState, *, min_bytes: int,
                 max_wait_ms: int, max_bytes: int, max_partition_bytes: int, isolation_level: int,
                 client_rack: str = "") -> None:
        self.cluster = cluster
        self.subs = subscriptions
        self.min_bytes = min_bytes
        self.max_wait_ms = max_wait_ms
        self.max_bytes = max_bytes
        self.max_partition_bytes = max_partition_bytes
        self.isolation_level = isolation_level
        # KIP-392: client.rack goes in each Fetch; where each partition is read
        self.client_rack = client_rack
        self.read_replicas = PreferredReadReplicas(cluster.metadata_max_age)
        self.completed: deque[CompletedFetch] = deque()
        self._in_flight: dict[int, asyncio.Future] = {}
        self._signal: asyncio.Future | None = None
        self.sessions: dict[int, BrokerSession] = {}  # node id -> its fetch session
        self._closed = False

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
        if self._closed:
            return
        cluster = self.cluster
        meta = cluster.metadata
        buffered = {c.tp for c in self.completed}
        by_node: dict[int, list[TopicPartition]] = {}
        need_update = False
        for tp in self.subs.fetchable(cluster.loop.time()):
            if tp in buffered:
                continue
            # the leader, or the replica it named for client.rack (client/preferred_read_replica.py)
            leader = self.read_replicas.node_for(tp, meta.leader(tp.topic, tp.partition), meta, cluster.loop.time())
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
        """One Fetch to ``node`` for ``tps`` (every partition wanted from it): through its
        session from v7, else sessionless (session 0, epoch -1)."""
        meta = self.cluster.metadata
        version = conn.api_version(ApiKey.FETCH)
        if version >= _TOPIC_IDS_FROM and any(meta.topic_id(tp.topic) == ZERO_UUID for tp in tps):
            version = _TOPIC_IDS_FROM - 1
        topics, positions = self._wanted(tps, version >= _TOPIC_IDS_FROM)
        handler = None
        session_id, epoch, forgotten = INVALID_SESSION_ID, FINAL_EPOCH, []
        if version >= _SESSIONS_FROM:
            handler = self._session(node, conn, version >= _TOPIC_IDS_FROM)
            built = handler.build(topics)
            session_id, epoch, forgotten = built.session_id, built.epoch, built.forgotten
            topics = built.topics
        request = FetchRequest(
            replica_id=-1, rack_id=self.client_rack, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
            max_bytes=self.max_bytes, isolation_level=self.isolation_level, session_id=session_id,
            session_epoch=epoch, topics=topics, forgotten_topics_data=forgotten,
        )
        names = {meta.topic_id(tp.topic): tp.topic for tp in tps}
        future = conn.send(ApiKey.FETCH, request, version=version,
                           timeout=self.cluster.request_timeout + self.max_wait_ms / 1000)
        self._in_flight[node] = future
        future.add_done_callback(partial(self._on_fetch, node, handler, positions, names))

    def _session(self, node: int, conn, uses_topic_ids: bool) -> FetchSessionHandler:
        """The session handler for ``node``; started over (its old session closed by the
        next, full, request) when the connection or the topic naming changed."""
        session = self.sessions.get(node)
        if session is None:
            session = self.sessions[node] = BrokerSession(conn, uses_topic_ids)
        elif session.conn is not conn or session.uses_topic_ids != uses_topic_ids:
            session.handler.handle_error()
            session.conn, session.uses_topic_ids = conn, uses_topic_ids
        return session.handler

    def _wanted(self, tps: list[TopicPartition], by_id: bool) -> tuple[list[FetchTopic], dict[TopicPartition, int]]:
        """The request topics for ``tps`` at their positions, and those positions. Topic ids
        only when the request names topics ``by_id``: a session by name must not see a topic
        change identity when its id becomes known (it would be forgotten and added at once)."""
        meta = self.cluster.metadata
        topics: dict[str, FetchTopic] = {}
        positions: dict[TopicPartition, int] = {}
        for tp in tps:
            state = self.subs.assignment[tp]
            topic = topics.get(tp.topic)
            if topic is None:
                topic = topics[tp.topic] = FetchTopic(
                    topic=tp.topic, topic_id=meta.topic_id(tp.topic) if by_id else ZERO_UUID, partitions=[])
            info = meta.partition(tp.topic, tp.partition)
            topic.partitions.append(FetchPartition(
                partition=tp.partition, current_leader_epoch=info.leader_epoch if info else -1,
                fetch_offset=state.position, log_start_offset=-1,
                partition_max_bytes=self.max_partition_bytes,
            ))
            positions[tp] = state.position
        return list(topics.values()), positions

    # --- answers -------------------------------------------------------------------------
    def _on_fetch(self, node: int, handler: FetchSessionHandler | None, positions: dict, names: dict,
                  future: asyncio.Future) -> None:
        self._in_flight.pop(node, None)
        self.wake()
        if future.cancelled():
            if handler is not None:
                handler.handle_error()
            return
        error = future.exception()
        if error is not None:
            _log.debug("fetch from broker %d failed: %s", node, error)
            self.read_replicas.on_failure(positions)
            if handler is not None:
                handler.handle_error()
            self._back_off(positions)
            self.cluster.request_update()
            return
        response = future.result()
        if handler is not None and not handler.handle_response(response) and response.error_code in _SESSION_ERRORS:
            _log.debug("fetch session with broker %d: %s; starting over", node, ErrorCode(response.error_code).name)
            if response.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR:
                self.cluster.request_update()
            return
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
        if self.read_replicas.on_answer(tp, p, self.cluster.loop.time()):
            return  # OFFSET_OUT_OF_RANGE from a preferred replica: the leader is asked next
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

    # --- closing -------------------------------------------------------------------------
    async def close(self, timeout: float) -> None:
        """Close every fetch session (Kafka's ``prepareCloseFetchSessionRequests``): its id at
        epoch -1, no partitions, over the connection it lives on if that is still open (a
        closed one is not replaced: the broker evicts the session in time), waiting up to
        ``timeout`` seconds for the answers. No fetch is sent afterwards."""
        self._closed = True
        sessions, self.sessions = self.sessions, {}
        closing = []
        for session in sessions.values():
            request = session.handler.close()
            conn = session.conn
            if request is None or conn.closed:
                continue
            future = conn.send(ApiKey.FETCH, FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=self.max_bytes,
                isolation_level=self.isolation_level, session_id=request.session_id,
                session_epoch=request.epoch, topics=[], forgotten_topics_data=[],
            ), version=conn.api_version(ApiKey.FETCH), timeout=timeout)
            future.add_done_callback(_log_close_failure)
            closing.append(future)
        if closing:
            await asyncio.wait(closing, timeout=timeout)

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


def _log_close_failure(future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        _log.debug("closing a fetch session failed: %s", future.exception())
