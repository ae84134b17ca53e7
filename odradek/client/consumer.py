"""The asyncio consumer: assign partitions (or subscribe as a group member), seek, and fetch.

    async with AsyncConsumer("127.0.0.1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("events", 0), TopicPartition("events", 1)])
        batch = await consumer.poll(timeout_ms=1000)   # {TopicPartition: [Record, ...]}
        async for record in consumer:                  # ConsumerRecord, one at a time
            ...

``poll`` returns at once when answers are buffered, else waits up to ``timeout_ms`` for one;
before returning it sends the next Fetch requests (see ``fetcher``), so the network works
while the application does. One Fetch per leader carries every assigned partition it leads.

Positions: ``seek`` sets one; ``seek_to_beginning``/``seek_to_end`` ask for a lookup the next
``poll`` (or ``position``) makes. A partition without a position starts at the group's
committed offset when a ``group_id`` is given and has one, else by ``auto_offset_reset``
("earliest", "latest", or "none": ``NoOffsetForPartitionError``); the same policy handles a
position that falls out of the log (OFFSET_OUT_OF_RANGE), "none" raising
``OffsetOutOfRangeError`` from ``poll``. These lookups are ``fetch_positions``'s.

Groups: with ``group_id`` the consumer commits (``commit``) and reads (``committed``) offsets
through a ``GroupCoordinatorClient``. After ``assign`` it does so as a standalone member of
the group (generation -1), committing only when asked. After ``subscribe(topics=...)`` or
``subscribe(pattern=...)`` it is a member of the group (``group_membership``): the group
divides the topics' partitions among its members (``partition_assignment_strategy``, by
default Kafka's "range" then "roundrobin"), rebalancing as members come and go; commits carry
the member's generation; ``enable_auto_commit`` commits what ``poll`` returned every
``auto_commit_interval_ms``, before partitions are revoked and on ``close``; a ``listener``
hears of revoked and assigned partitions (``rebalance_listener``). ``assign`` and
``subscribe`` exclude each other (``unsubscribe`` first). ``group_protocol="consumer"``
(Kafka's ``group.protocol``) joins with Kafka 4's consumer group protocol instead (KIP-848,
``consumer_group_membership``): the coordinator assigns (``group_remote_assignor``, Kafka's
``group.remote.assignor``), rebalances are incremental, commits carry the member epoch, and
``session_timeout_ms``, ``heartbeat_interval_ms`` and ``partition_assignment_strategy`` are
the broker's (``group.consumer.*``), not the member's.

A partition assigned but missing from the cluster's metadata (its topic does not exist, or
has fewer partitions) gets no position: ``poll`` returns nothing for it within its timeout,
as Kafka's consumer does on UNKNOWN_TOPIC_OR_PARTITION, names it in one warning, and looks
for it again on each ``poll`` (it is read once created); ``position`` raises
UNKNOWN_TOPIC_OR_PARTITION for it.

Offsets committed without arguments are those of records handed to the application: the
position, or for records still waiting in the iteration buffer the first of them.

Transactions: ``isolation_level="read_committed"`` fetches (and looks up "latest" offsets) up
to the last stable offset only, and drops the records of aborted transactions and every
control batch (see ``fetcher``); ``group_metadata()`` is what a transactional producer's
``send_offsets_to_transaction`` takes to commit this member's offsets in its transaction.
"""

from __future__ import annotations

from collections import deque
from typing import Self

from odradek.client.client_security import connection_settings
from odradek.client.cluster import ClusterClient
from odradek.client.consumer_group_membership import ConsumerGroupMembership
from odradek.client.consumer_record import consumer_records
from odradek.client.coordinator import GroupCoordinatorClient
from odradek.client.errors import BrokerError, ClientClosedError
from odradek.client.fetch_positions import FetchPositions
from odradek.client.fetcher import Fetcher
from odradek.client.group_membership import GroupMembership, MembershipConfig
from odradek.client.offset_fetcher import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    OffsetFetcher,
)
from odradek.client.subscription_state import SubscriptionState
from odradek.client.topic_filter import topic_filter
from odradek.client.transactions import ConsumerGroupMetadata
from odradek.client.topic_partition import (
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.record import Record

__all__ = ["AsyncConsumer"]

_ISOLATION = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


class AsyncConsumer:
    def __init__(
        self,
        bootstrap_servers,
        *,
        client_id: str = "odradek-consumer",
        group_id: str | None = None,
        auto_offset_reset: str = "latest",
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52_428_800,
        max_partition_fetch_bytes: int = 1_048_576,
        max_poll_records: int = 500,
        isolation_level: str = "read_uncommitted",
        key_deserializer=None,
        value_deserializer=None,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        metadata_max_age_ms: int = 300_000,
        default_api_timeout_ms: int = 60_000,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        partition_assignment_strategy=("range", "roundrobin"),
        group_protocol: str = "classic",
        group_remote_assignor: str | None = None,
        security=None,  # security.protocol, ssl.*, sasl.* (client/client_security.py)
        client_rack: str = "",  # client.rack: KIP-392, read from a replica in this rack
    ) -> None:
        if isolation_level not in _ISOLATION:
            raise ValueError(f"isolation_level must be one of {sorted(_ISOLATION)}")
        if max_poll_records <= 0:
            raise ValueError("max_poll_records must be positive")
        self._cluster = ClusterClient(
            bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms, retry_backoff_max_ms=retry_backoff_max_ms,
            metadata_max_age_ms=metadata_max_age_ms, **connection_settings(security),
        )
        self._subs = SubscriptionState(auto_offset_reset)
        self._fetcher = Fetcher(
            self._cluster, self._subs, min_bytes=fetch_min_bytes, max_wait_ms=fetch_max_wait_ms,
            max_bytes=fetch_max_bytes, max_partition_bytes=max_partition_fetch_bytes,
            isolation_level=_ISOLATION[isolation_level], client_rack=client_rack,
        )
        self._offsets = OffsetFetcher(self._cluster, _ISOLATION[isolation_level])
        self._coordinator = GroupCoordinatorClient(self._cluster, group_id) if group_id else None
        if group_instance_id is not None and not group_id:
            raise ValueError("group_instance_id needs a group_id")
        self._membership_config = MembershipConfig(
            session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=max_poll_interval_ms,
            heartbeat_interval_ms=heartbeat_interval_ms, group_instance_id=group_instance_id,
            assignors=tuple(partition_assignment_strategy), enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms, metadata_max_age_ms=metadata_max_age_ms,
        )
        self._group_protocol = _group_protocol(group_protocol, group_remote_assignor)
        self._remote_assignor = group_remote_assignor
        self._membership: GroupMembership | ConsumerGroupMembership | None = None
        self._max_poll_records = max_poll_records
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._api_timeout = default_api_timeout_ms / 1000
        # committed offset, then auto_offset_reset, for partitions without a position
        self._positions = FetchPositions(self._cluster, self._subs, self._offsets, self._coordinator, self._api_timeout)
        self._iterating: deque = deque()
        self._closed = False

    @property
    def cluster(self) -> ClusterClient:
        return self._cluster

    @property
    def coordinator(self) -> GroupCoordinatorClient | None:
        return self._coordinator

    async def start(self) -> Self:
        await self._cluster.start()
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop; a group member first commits (auto commit), hears of its revoked partitions
        and leaves the group (dynamic members); then the fetch sessions are closed on the
        brokers (``fetcher``)."""
        if self._closed:
            return
        self._closed = True
        self._fetcher.wake()
        if self._membership is not None:
            await self._membership.close()
        if self._coordinator is not None:
            await self._coordinator.close()
        await self._fetcher.close(self._cluster.request_timeout)
        await self._cluster.close()

    # --- assignment and positions --------------------------------------------------------
    def assign(self, partitions) -> None:
        """Read exactly ``partitions`` (``TopicPartition``s or ``(topic, partition)`` pairs)."""
        self._check_open()
        if self._membership is not None and self._membership.subscribed:
            raise ValueError("the consumer is subscribed: unsubscribe() before assign()")
        self._set_assignment(partitions)

    def _set_assignment(self, partitions) -> None:
        self._subs.assign(partitions)
        self._positions.committed_checked &= set(self._subs.assignment)
        self._fetcher.clear()
        self._iterating.clear()
        if self._cluster.add_topics(self._subs.topics()):
            self._cluster.request_update()

    def _change_assignment(self, partitions) -> None:
        """An incremental change (the consumer group protocol): the partitions kept keep
        their positions and buffered records."""
        kept = {TopicPartition(*tp) for tp in partitions}
        for tp in set(self._subs.assignment) - kept:
            self._forget_buffered(tp)
        self._subs.assign(kept)
        self._positions.committed_checked &= kept
        if self._cluster.add_topics(self._subs.topics()):
            self._cluster.request_update()

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.assignment)

    # --- group membership ----------------------------------------------------------------
    def subscribe(self, topics=None, pattern=None, listener=None) -> None:
        """Join ``group_id`` to read its share of ``topics`` (a list, or one name) or of the
        topics ``pattern`` lets through (a regex, or a ``TopicFilter`` such as
        ``Blacklist``), now and as topics come; ``listener`` hears of rebalances (see
        ``ConsumerRebalanceListener``). The group is joined by the next ``poll``."""
        self._check_open()
        subscription = topic_filter(topics, pattern)
        coordinator = self._require_group()
        if self._subs.assignment and (self._membership is None or not self._membership.subscribed):
            raise ValueError("the consumer has assigned partitions: unsubscribe() before subscribe()")
        if self._membership is None and self._group_protocol == "consumer":
            self._membership = ConsumerGroupMembership(
                coordinator, self._membership_config, assign=self._change_assignment,
                consumed=self._consumed_offsets, wake=self._fetcher.wake, server_assignor=self._remote_assignor)
        elif self._membership is None:
            self._membership = GroupMembership(
                coordinator, self._membership_config, assign=self._set_assignment,
                consumed=self._consumed_offsets, wake=self._fetcher.wake)
        self._membership.subscribe(subscription, listener)

    async def unsubscribe(self) -> None:
        """Stop reading: a group member gives up its partitions (auto commit, revoked
        callback) and leaves the group; assigned partitions are dropped."""
        if self._membership is not None and self._membership.subscribed:
            await self._membership.unsubscribe()
        self._set_assignment([])

    def subscription(self) -> set[str]:
        """The topics subscribed to (for a pattern: those it matched last)."""
        if self._membership is None or not self._membership.subscribed:
            return set()
        return set(self._membership.topics)

    def _consumed_offsets(self, unread=()) -> dict[TopicPartition, OffsetAndMetadata]:
        """What the application has been handed: positions, less the records still waiting in
        the iteration buffer (and ``unread``, records another buffer still holds)."""
        offsets = {tp: OffsetAndMetadata(s.position) for tp, s in self._subs.assignment.items()
                   if s.position is not None}
        for records in (unread, self._iterating):
            for r in records:
                tp = TopicPartition(r.topic, r.partition)
                if tp in offsets and r.offset < offsets[tp].offset:
                    offsets[tp] = OffsetAndMetadata(r.offset)
        return offsets

    def _unread(self, records) -> None:
        """Put records handed out but not yet seen by the application back in front of the
        iteration buffer (the synchronous consumer's buffer, before it closes)."""
        self._iterating.extendleft(reversed(list(records)))

    def seek(self, tp, offset: int) -> None:
        """Read ``tp`` from ``offset`` on at the next poll."""
        tp = TopicPartition(*tp)
        self._subs.seek(tp, offset)
        self._positions.committed_checked.add(tp)
        self._forget_buffered(tp)

    def seek_to_beginning(self, *partitions) -> None:
        """Move to the log start of ``partitions`` (all assigned when none are given)."""
        self._request_reset(partitions, "earliest")

    def seek_to_end(self, *partitions) -> None:
        """Move to the end (the high watermark) of ``partitions`` (all when none are given)."""
        self._request_reset(partitions, "latest")

    def _request_reset(self, partitions, how: str) -> None:
        for tp in partitions or list(self._subs.assignment):
            tp = TopicPartition(*tp)
            self._subs.request_reset(tp, how)
            self._positions.committed_checked.add(tp)
            self._forget_buffered(tp)

    def _forget_buffered(self, tp: TopicPartition) -> None:
        self._fetcher.clear(tp)
        if self._iterating:
            self._iterating = deque(r for r in self._iterating if (r.topic, r.partition) != tp)

    async def position(self, tp) -> int:
        """The offset of the next record ``poll`` returns for ``tp`` (looked up if needed)."""
        tp = TopicPartition(*tp)
        state = self._subs.state(tp)
        if state.position is None:
            await self._positions.update()
        if state.position is None and tp in self._positions.absent:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, subject=tp)
        return state.position

    def highwater(self, tp) -> int | None:
        """The high watermark the last fetch of ``tp`` reported (None before one)."""
        hw = self._subs.state(TopicPartition(*tp)).high_watermark
        return hw if hw >= 0 else None

    def pause(self, *partitions) -> None:
        """Stop returning records of ``partitions`` (their buffered answers are kept)."""
        self._subs.pause(partitions)

    def resume(self, *partitions) -> None:
        self._subs.resume(partitions)
        self._fetcher.wake()

    def paused(self) -> set[TopicPartition]:
        return self._subs.paused()

    # --- polling -------------------------------------------------------------------------
    async def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> dict[TopicPartition, list[Record]]:
        """Records of the assigned partitions, ``{TopicPartition: [Record, ...]}``: at most
        ``max_records`` (default ``max_poll_records``), waiting up to ``timeout_ms`` for the
        first. Raises a partition's pending error (e.g. OffsetOutOfRangeError)."""
        self._check_open()
        loop = self._cluster.loop
        deadline = loop.time() + timeout_ms / 1000
        limit = max_records or self._max_poll_records
        fetcher = self._fetcher
        membership = self._membership
        while True:
            if membership is not None:
                await membership.poll(deadline)
            self._raise_partition_errors()
            await self._positions.update()
            records = fetcher.collect(limit)
            fetcher.send_fetches()
            if records:
                return self._deserialize(records)
            self._raise_partition_errors()
            remaining = deadline - loop.time()
            if remaining <= 0 or self._closed:
                return {}
            await fetcher.wait(min(remaining, fetcher.retry_delay()))
            self._cluster.maybe_update()

    def _raise_partition_errors(self) -> None:
        for state in self._subs.assignment.values():
            if state.error is not None:
                error, state.error = state.error, None
                raise error

    def _deserialize(self, records: dict) -> dict:
        kd, vd = self._key_deserializer, self._value_deserializer
        if kd is None and vd is None:
            return records
        out = {}
        for tp, recs in records.items():
            out[tp] = [
                Record(r.offset, r.timestamp,
                       kd(r.key) if kd is not None and r.key is not None else r.key,
                       vd(r.value) if vd is not None and r.value is not None else r.value,
                       r.headers)
                for r in recs
            ]
        return out

    def __aiter__(self) -> AsyncConsumer:
        return self

    async def __anext__(self):
        """The next ``ConsumerRecord``; waits as long as it takes (ends when closed)."""
        while not self._iterating:
            if self._closed:
                raise StopAsyncIteration
            for tp, records in (await self.poll(timeout_ms=1000)).items():
                self._iterating.extend(consumer_records(tp, records))
        return self._iterating.popleft()

    # --- offsets -------------------------------------------------------------------------
    async def beginning_offsets(self, partitions) -> dict[TopicPartition, int]:
        found = await self._offsets.list_offsets({TopicPartition(*tp): EARLIEST for tp in partitions}, self._api_timeout)
        return {tp: v.offset for tp, v in found.items()}

    async def end_offsets(self, partitions) -> dict[TopicPartition, int]:
        """The high watermark (last stable offset under read_committed) of each partition."""
        found = await self._offsets.list_offsets({TopicPartition(*tp): LATEST for tp in partitions}, self._api_timeout)
        return {tp: v.offset for tp, v in found.items()}

    async def offsets_for_times(self, timestamps: dict) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each ``TopicPartition -> timestamp`` (ms): the first offset whose record has a
        timestamp at or after it, with that timestamp; None when there is none."""
        for ts in timestamps.values():
            if ts < 0:
                raise ValueError(f"timestamp {ts} is negative")
        return await self._offsets.list_offsets(timestamps, self._api_timeout)

    async def partitions_for_topic(self, topic: str) -> list[int]:
        self._cluster.add_topics([topic])
        meta = await self._cluster.wait_for_topics([topic], self._cluster.loop.time() + self._api_timeout)
        return list(range(meta.partition_count(topic)))

    async def topics(self) -> set[str]:
        """Every topic's name, internal ones included."""
        meta = await self._cluster.refresh(None)
        return set(meta.topics)

    async def commit(self, offsets: dict | None = None) -> None:
        """Commit ``offsets`` (``TopicPartition -> int | OffsetAndMetadata``), by default the
        offsets of the records handed out so far, for ``group_id``. A group member commits
        as one of its generation (CommitFailedError when the group has moved on)."""
        coordinator = self._require_group()
        if offsets is None:
            offsets = self._consumed_offsets()
        offsets = {TopicPartition(*tp): o for tp, o in offsets.items()}
        if not offsets:
            return
        if self._membership is not None and self._membership.subscribed:
            await self._membership.commit(offsets)
        else:
            await coordinator.commit_offsets(offsets)

    async def committed(self, tp) -> OffsetAndMetadata | None:
        """The committed offset of ``tp`` for ``group_id`` (None when there is none)."""
        tp = TopicPartition(*tp)
        found = await self._require_group().fetch_offsets([tp])
        return found.get(tp)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member id to pass to a transactional producer's
        ``send_offsets_to_transaction`` (generation -1 outside a subscribed group)."""
        group_id = self._require_group().group_id
        membership = self._membership
        if membership is None or not membership.subscribed:
            return ConsumerGroupMetadata(group_id)
        generation = membership.generation
        return ConsumerGroupMetadata(group_id, generation.generation_id, generation.member_id,
                                     membership.config.group_instance_id)

    def _require_group(self) -> GroupCoordinatorClient:
        if self._coordinator is None:
            raise ValueError("this consumer has no group_id")
        return self._coordinator

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("consumer is closed")


def _group_protocol(name: str, remote_assignor: str | None) -> str:
    """``group.protocol``: "classic" (JoinGroup/SyncGroup, client-side assignors) or
    "consumer" (KIP-848, ``consumer_group_membership``), case-insensitive as Kafka's
    ``GroupProtocol``; ``group.remote.assignor`` only means something to the latter."""
    protocol = str(name).lower()
    if protocol not in ("classic", "consumer"):
        raise ValueError(f"group_protocol must be 'classic' or 'consumer', not {name!r}")
    if remote_assignor is not None and protocol != "consumer":
        raise ValueError("group_remote_assignor is only used with group_protocol='consumer'")
    return protocol

