"""The asyncio share consumer (KIP-932, Kafka's ``KafkaShareConsumer``).

    async with AsyncShareConsumer("127.0.0.1:9092", group_id="jobs",
                                  share_acknowledgement_mode="explicit") as consumer:
        consumer.subscribe(["jobs"])
        for record in await consumer.poll(1.0):        # ShareConsumerRecord, with delivery_count
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)   # or RELEASE, REJECT
        await consumer.commit_sync()

Members of a share group read the same partitions together: each record is acquired by one
member at a time (for group.share.record.lock.duration.ms), and the member tells the share
partition what became of it. The group coordinator assigns the partitions
(``share_membership``); records are fetched from the leaders in share sessions
(``share_fetcher``, ``share_session``).

Acknowledgement modes (``share_acknowledgement_mode``, Kafka's share.acknowledgement.mode):

- "implicit" (default): every record a ``poll`` returned is accepted by the next ``poll``,
  ``commit_sync``, ``commit_async`` or ``close``.
- "explicit": the application acknowledges each record (``acknowledge``: ACCEPT, RELEASE to have
  it delivered again, REJECT to have it never delivered again), and must have acknowledged all
  of one ``poll``'s records before the next ``poll`` (else ``ShareStateError``, Kafka's
  IllegalStateException). Records it never acknowledges before ``close`` are released.

Acknowledgements travel with the next ShareFetch to the leader, or with ShareAcknowledge on
``commit_sync`` (which waits for the answers and returns each partition's error or None) and
``commit_async``. Every outcome goes to ``acknowledgement_commit_callback(offsets, error)``
(Kafka's ``AcknowledgementCommitCallback.onComplete``: ``{TopicIdPartition: {offsets}}`` and an
exception or None), called from within ``poll``, ``commit_sync``, ``commit_async`` and ``close``.

``close``: acknowledgements made are sent as the share sessions close (ShareAcknowledge at epoch
-1, which releases whatever this member still holds, so other members get those records at
once), then the member leaves the group (ShareGroupHeartbeat at epoch -1).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Self

from odradek.client.client_security import connection_settings
from odradek.client.cluster import ClusterClient
from odradek.client.coordinator import GroupCoordinatorClient
from odradek.client.errors import ClientClosedError, KafkaError
from odradek.client.share_acknowledgements import Acknowledgements, AcknowledgeType, TopicIdPartition
from odradek.client.share_consumer_record import ShareConsumerRecord
from odradek.client.share_fetcher import AckResult, ShareFetcher
from odradek.client.share_membership import ShareMembership
from odradek.client.share_session import FetchParams

__all__ = ["AsyncShareConsumer", "ShareStateError"]

_log = logging.getLogger("odradek.client.share_consumer")
_MODES = ("implicit", "explicit")


class ShareStateError(KafkaError):
    """A call the acknowledgement state does not allow (Kafka's IllegalStateException)."""


@dataclass(slots=True)
class _Delivered:
    """One partition's records of the last poll: offset → type acknowledged (None: not yet)."""
    node: int
    tip: TopicIdPartition
    offsets: dict[int, int | None] = field(default_factory=dict)


class AsyncShareConsumer:
    def __init__(
        self,
        bootstrap_servers,
        *,
        group_id: str,
        client_id: str = "odradek-share-consumer",
        share_acknowledgement_mode: str = "implicit",
        max_poll_records: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52_428_800,
        max_partition_fetch_bytes: int = 1_048_576,
        key_deserializer=None,
        value_deserializer=None,
        client_rack: str | None = None,
        acknowledgement_commit_callback=None,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        metadata_max_age_ms: int = 300_000,
        security=None,  # security.protocol, ssl.*, sasl.* (client/client_security.py)
    ) -> None:
        if share_acknowledgement_mode not in _MODES:
            raise ValueError(f"share_acknowledgement_mode must be one of {_MODES}")
        if max_poll_records <= 0:
            raise ValueError("max_poll_records must be positive")
        self._cluster = ClusterClient(
            bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms, retry_backoff_max_ms=retry_backoff_max_ms,
            metadata_max_age_ms=metadata_max_age_ms, **connection_settings(security),
        )
        self.explicit = share_acknowledgement_mode == "explicit"
        self._membership = ShareMembership(GroupCoordinatorClient(self._cluster, group_id), rack_id=client_rack,
                                           wake=self._wake)
        params = FetchParams(max_wait_ms=fetch_max_wait_ms, min_bytes=fetch_min_bytes, max_bytes=fetch_max_bytes,
                             max_records=max_poll_records, partition_max_bytes=max_partition_fetch_bytes)
        self._fetcher = ShareFetcher(self._cluster, group_id, self._membership.member_id, params)
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._callback = acknowledgement_commit_callback
        self._delivered: dict[tuple[str, int], _Delivered] = {}
        self._subscription: frozenset[str] = frozenset()
        self._closed = False

    @property
    def member_id(self) -> str:
        return self._membership.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """The leaders' group.share.record.lock.duration.ms, once an answer told it."""
        return self._fetcher.acquisition_lock_timeout_ms

    def _wake(self) -> None:
        self._fetcher.wake()

    async def start(self) -> Self:
        await self._cluster.start()
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- subscription -----------------------------------------------------------------------
    def subscribe(self, topics) -> None:
        """Join the share group for ``topics`` (names; replaces the subscription). An empty
        list unsubscribes at the next poll."""
        self._check_open()
        if isinstance(topics, str):
            raise TypeError("subscribe takes a list of topic names")
        self._subscription = frozenset(topics)
        if self._subscription:
            self._membership.subscribe(self._subscription)

    def subscription(self) -> set[str]:
        return set(self._subscription)

    async def unsubscribe(self) -> None:
        """Commit the acknowledgements made, leave the group, fetch nothing more."""
        self._check_open()
        await self.commit_sync()
        self._subscription = frozenset()
        self._fetcher.assignment = frozenset()
        await self._membership.leave()
        self._fetcher.send(fetch=False)

    # --- polling ----------------------------------------------------------------------------
    async def poll(self, timeout: float = 0.0) -> list[ShareConsumerRecord]:
        """Records acquired for this member, waiting up to ``timeout`` seconds for some. The
        previous poll's records are acknowledged first (see the module doc)."""
        self._check_open()
        self._settle_previous(require_all=self.explicit)
        loop = self._cluster.loop
        deadline = loop.time() + timeout
        try:
            while True:
                self._raise_fatal()
                self._fetcher.assignment = await self._membership.assigned() if self._subscription else frozenset()
                self._fetcher.send()
                answers = self._fetcher.take()
                if answers or loop.time() >= deadline:
                    return self._deliver(answers)
                await self._fetcher.wait(deadline - loop.time())
        finally:
            self._run_callbacks()

    def _deliver(self, answers) -> list[ShareConsumerRecord]:
        out: list[ShareConsumerRecord] = []
        for node, tip, records in answers:
            held = self._delivered.get((tip.topic, tip.partition))
            if held is None:
                held = self._delivered[tip.topic, tip.partition] = _Delivered(node, tip)
            for r in records:
                held.offsets[r.offset] = None
            out.extend(records)
        if self._key_deserializer is not None or self._value_deserializer is not None:
            kd, vd = self._key_deserializer, self._value_deserializer
            out = [r._replace(key=kd(r.key) if kd and r.key is not None else r.key,
                              value=vd(r.value) if vd and r.value is not None else r.value) for r in out]
        return out

    def _raise_fatal(self) -> None:
        if self._membership.fatal is not None:
            raise self._membership.fatal

    # --- acknowledging ----------------------------------------------------------------------
    def acknowledge(self, record, ack_type: int = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge a record of the last poll (explicit mode): ACCEPT, RELEASE or REJECT.
        Sent with the next poll, commit or close; until then it may be acknowledged again."""
        self.acknowledge_offset(record.topic, record.partition, record.offset, ack_type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int, ack_type: int = AcknowledgeType.ACCEPT) -> None:
        """``acknowledge`` by topic, partition and offset (Kafka's acknowledge(topic, partition,
        offset, type))."""
        self._check_open()
        if not self.explicit:
            raise ShareStateError("acknowledge needs share_acknowledgement_mode='explicit'")
        ack_type = AcknowledgeType(ack_type)
        if ack_type == AcknowledgeType.GAP:
            raise ValueError("GAP is not an application's acknowledgement")
        held = self._delivered.get((topic, partition))
        if held is None or offset not in held.offsets:
            raise ShareStateError(f"{topic}-{partition} offset {offset} is not a record of the last poll "
                                  "that waits for an acknowledgement")
        held.offsets[offset] = ack_type

    def _settle_previous(self, *, require_all: bool) -> None:
        """Hand the acknowledgements of the last poll's records to the sessions: implicit
        mode accepts them all; explicit mode sends those acknowledged, and with
        ``require_all`` refuses to go on while some are not."""
        if require_all and any(t is None for held in self._delivered.values() for t in held.offsets.values()):
            raise ShareStateError("all records of the previous poll must be acknowledged in explicit mode")
        for key in list(self._delivered):
            held = self._delivered[key]
            acks = Acknowledgements()
            for offset, ack_type in list(held.offsets.items()):
                if ack_type is None and not self.explicit:
                    ack_type = AcknowledgeType.ACCEPT
                if ack_type is not None:
                    acks.add(offset, ack_type)
                    del held.offsets[offset]
            self._fetcher.acknowledge(held.node, held.tip, acks)
            if not held.offsets:
                del self._delivered[key]

    # --- commits ----------------------------------------------------------------------------
    async def commit_sync(self, timeout: float | None = None) -> dict[TopicIdPartition, KafkaError | None]:
        """Send the acknowledgements made (implicit mode: the last poll's records, accepted)
        and wait for the answers: each partition's error, or None."""
        self._check_open()
        self._settle_previous(require_all=False)
        fetcher = self._fetcher
        before = len(fetcher.results)
        if timeout is None:
            await fetcher.commit()
        else:
            await asyncio.wait_for(fetcher.commit(), timeout)
        outcome: dict[TopicIdPartition, KafkaError | None] = {}
        for result in list(fetcher.results)[before:]:
            if outcome.get(result.partition) is None:
                outcome[result.partition] = result.error
        self._run_callbacks()
        return outcome

    async def commit_async(self) -> None:
        """Send the acknowledgements made without waiting: their outcome goes to the
        acknowledgement commit callback (from a later call)."""
        self._check_open()
        self._settle_previous(require_all=False)
        self._fetcher.commit_nowait()
        self._run_callbacks()

    def set_acknowledgement_commit_callback(self, callback) -> None:
        self._callback = callback

    def _run_callbacks(self) -> None:
        results = self._fetcher.results
        while results:
            result: AckResult = results.popleft()
            if result.error is not None:
                _log.info("acknowledgement of %s offsets %s failed: %s", result.partition,
                          sorted(result.offsets)[:10], result.error)
            if self._callback is not None:
                try:
                    self._callback({result.partition: set(result.offsets)}, result.error)
                except Exception:  # noqa: BLE001 - the application's callback must not break the consumer
                    _log.exception("acknowledgement commit callback raised")

    # --- closing ----------------------------------------------------------------------------
    async def close(self) -> None:
        """Close the share sessions (sending the acknowledgements made; what remains acquired
        is released), leave the group, close the connections. Errors are logged."""
        if self._closed:
            return
        self._closed = True
        try:
            self._settle_previous(require_all=False)
            self._delivered.clear()
            await self._membership.stop()
            await self._fetcher.close()
            self._run_callbacks()
            await self._membership.leave()
        except Exception as e:  # noqa: BLE001 - closing always finishes
            _log.warning("share consumer close: %r", e)
        finally:
            await self._cluster.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the share consumer is closed")
