"""Mirroring topics from one cluster to another, exactly once.

Kafka's design: "the mirror cluster simply acts as a consumer of the source cluster". Here
one process reads the source with odradek's consumer and writes the target with a
transactional producer, as MirrorMaker 2's exactly-once source tasks do (KIP-618):

    source partition p ──poll──▶ MirrorMaker ──send(partition=p)──▶ target partition p
                                     │ every commit_interval_ms, in the same transaction:
                                     └─ TxnOffsetCommit: group G on the TARGET, source positions

Each record keeps its key, value, headers and timestamp (sent as the target record's
CreateTime) and goes to the partition with the source's number, so the target partition holds
the source partition's records in the source's order (offsets differ: the target's also hold
transaction markers).

Exactly once, and resuming: the records of a transaction and the source positions up to which
they were read commit together on the target (``send_offsets_to_transaction`` with the group
``group_id``). On start the mirror first fences any earlier instance of itself
(``init_transactions`` with the same transactional id, which aborts that instance's open
transaction), then reads its committed positions from the target (OffsetFetch with
``require_stable``, waiting out UNSTABLE_OFFSET_COMMIT), and seeks the source consumer there;
partitions without a committed position start at the source's earliest offset. So a mirror
killed at any moment and started again copies every source record to the target once: what
the killed one committed is behind the positions, what it had not committed was aborted.
Source partitions are assigned by the mirror (``assign``), never through a source-side group,
so the target's committed positions are the only record of progress.

The source is read at read_committed: records of aborted source transactions are not copied,
and an open source transaction holds the mirror back at the last stable offset.

Errors: a transaction that fails (a record refused, a leader lost for longer than the
producer retries) is aborted and the source consumer rewound to the committed positions, so
its records are copied again. A fenced producer (another mirror with the same group id took
over) is fatal: ``run`` raises MirrorError.

Housekeeping runs between polls: every ``refresh_topics_interval_s`` the ``TopicSync`` creates
new topics and partitions on the target (then they are assigned), and every
``reporting_interval_ms`` the lag is logged per topic (``mirror_lag``).
"""

from __future__ import annotations

import asyncio
import logging
import math

from odradek.client.admin import AsyncAdminClient
from odradek.client.consumer import AsyncConsumer
from odradek.client.errors import BrokerError, BufferFullError, KafkaError, KafkaTimeoutError
from odradek.client.producer import AsyncProducer
from odradek.client.topic_partition import OffsetAndMetadata, TopicPartition
from odradek.mirror.mirror_config import MirrorConfig
from odradek.mirror.mirror_lag import MirrorProgress
from odradek.mirror.topic_sync import TopicSync
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["MirrorError", "MirrorMaker"]

_log = logging.getLogger("odradek.mirror")

_POLL_AT_MOST_S = 1.0  # how long a poll may wait: the longest a stop request waits too
_STABLE_WAIT_S = 60.0  # how long to wait for the target's committed positions to be stable
_TARGET_METADATA_WAIT_S = 30.0  # for the target's metadata to show partitions just created
_COMMIT_ATTEMPTS = 3  # commits that time out are resumed this many times before giving up
_FATAL_STATE = "FatalError"
_COMMITTING_STATE = "CommittingTransaction"


class MirrorError(Exception):
    """The mirror cannot go on (fenced by another mirror with the same group id)."""


class MirrorMaker:
    def __init__(self, config: MirrorConfig) -> None:
        self.config = config
        self.progress = MirrorProgress()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stop_requested = False
        self._consumer: AsyncConsumer | None = None
        self._producer: AsyncProducer | None = None
        self._target_admin: AsyncAdminClient | None = None
        self._sync: TopicSync | None = None
        self._in_txn = False
        self._txn_deadline = math.inf
        self._pending: dict[TopicPartition, int] = {}  # records per partition in the open transaction

    def stop(self) -> None:
        """Ask ``run`` to commit what it copied and return: from any thread or a signal handler."""
        self._stop_requested = True
        loop = self._loop
        if loop is not None and self._stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # closed meanwhile: ``run`` has returned (fenced, failed) already
                pass

    async def run(self) -> MirrorProgress:
        """Mirror until ``stop()``; returns the progress (also ``self.progress``)."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self._stop_requested:
            self._stop.set()
        cfg = self.config
        async with (
            AsyncAdminClient(cfg.source, client_id="odradek-mirror-source") as source_admin,
            AsyncAdminClient(cfg.target, client_id="odradek-mirror-target") as target_admin,
            AsyncConsumer(cfg.source, **self._consumer_config()) as consumer,
            AsyncProducer(cfg.target, **self._producer_config()) as producer,
        ):
            self._consumer, self._producer, self._target_admin = consumer, producer, target_admin
            self._sync = TopicSync(source_admin, target_admin, cfg)
            # Fence an earlier instance first: its open transaction (records and positions) is
            # aborted, so the positions read next are exactly what reached the target.
            await producer.init_transactions()
            _log.info("mirroring topics %r from %s to %s (group %s, transactional id %s)",
                      cfg.topics, cfg.source, cfg.target, cfg.group_id, cfg.transactional_id)
            await self._refresh()
            await self._mirror()
        return self.progress

    def _consumer_config(self) -> dict:
        cfg = self.config
        return {"client_id": "odradek-mirror", "auto_offset_reset": "earliest",
                "max_poll_records": cfg.max_poll_records, **cfg.consumer_config,
                "group_id": None, "isolation_level": "read_committed", "enable_auto_commit": False}

    def _producer_config(self) -> dict:
        cfg = self.config
        # Big batches: records arrive in bursts of a poll, all bound for a few partitions.
        return {"client_id": "odradek-mirror", "batch_size": 262_144, "linger_ms": 5, **cfg.producer_config,
                "transactional_id": cfg.transactional_id, "allow_auto_create_topics": False}

    # --- the loop ------------------------------------------------------------------------
    async def _mirror(self) -> None:
        cfg, loop = self.config, self._loop
        next_refresh = loop.time() + cfg.refresh_topics_interval_s
        next_report = loop.time() + cfg.reporting_interval_ms / 1000
        while not self._stop.is_set():
            wake = min(next_refresh, next_report, self._txn_deadline)
            await self._poll_and_send(min(max(wake - loop.time(), 0), _POLL_AT_MOST_S))
            now = loop.time()
            if now >= self._txn_deadline:
                await self._commit()
            if now >= next_report:
                if not self._in_txn:
                    await self._commit()  # positions may have moved past markers alone
                await self._report()
                next_report = loop.time() + cfg.reporting_interval_ms / 1000
            if now >= next_refresh:
                await self._refresh_later()
                next_refresh = loop.time() + cfg.refresh_topics_interval_s
        await self._commit()
        await self._report()

    async def _poll_and_send(self, timeout_s: float) -> None:
        records = await self._consumer.poll(timeout_ms=timeout_s * 1000)
        if not records:
            return
        self._begin()
        producer = self._producer
        send = producer.send
        pending = self._pending
        for tp, batch in records.items():
            topic, partition = tp
            for r in batch:
                try:
                    send(topic, r.value, r.key, r.headers or None, partition, r.timestamp)
                except BufferFullError:
                    await self._send_when_room(topic, partition, r)
            pending[tp] = pending.get(tp, 0) + len(batch)

    async def _send_when_room(self, topic: str, partition: int, r) -> None:
        while True:
            await self._producer.wait_for_buffer()
            try:
                self._producer.send(topic, r.value, r.key, r.headers or None, partition, r.timestamp)
                return
            except BufferFullError:
                continue

    # --- transactions --------------------------------------------------------------------
    def _begin(self) -> None:
        if not self._in_txn:
            self._producer.begin_transaction()
            self._in_txn = True
            self._txn_deadline = self._loop.time() + self.config.commit_interval_ms / 1000

    async def _positions(self) -> dict[TopicPartition, int]:
        """Source positions that moved since the last commit."""
        moved = {}
        for tp in self._consumer.assignment():
            try:
                position = await self._consumer.position(tp)
            except BrokerError as e:  # its topic was deleted on the source: the next refresh drops it
                _log.debug("no position for %s: %s", tp, e)
                continue
            if position is not None and position != self.progress.position(tp):
                moved[tp] = position
        return moved

    async def _commit(self) -> None:
        """Commit the open transaction with the source positions it reached (or, with none
        open, a transaction of positions alone when they moved past records not copied)."""
        positions = await self._positions()
        if not self._in_txn and not positions:
            return
        self._begin()
        producer = self._producer
        try:
            if positions:
                await producer.send_offsets_to_transaction(
                    {tp: OffsetAndMetadata(p) for tp, p in positions.items()}, self.config.group_id)
            await self._commit_transaction()
        except KafkaError as e:
            await self._abort(e)
            return
        self.progress.committed(positions, self._pending)
        self._pending = {}
        self._in_txn, self._txn_deadline = False, math.inf

    async def _commit_transaction(self) -> None:
        for attempt in range(1, _COMMIT_ATTEMPTS + 1):
            try:
                await self._producer.commit_transaction()
                return
            except KafkaTimeoutError:
                # The commit resumes where it stopped (Java's producer allows the same retry).
                if attempt == _COMMIT_ATTEMPTS or self._producer.transaction_state != _COMMITTING_STATE:
                    raise
                _log.warning("commit of the mirror's transaction timed out, trying again")

    async def _abort(self, error: KafkaError) -> None:
        producer = self._producer
        if producer.transaction_state == _FATAL_STATE:
            raise MirrorError(f"the mirror's producer cannot go on ({error}): is another mirror running "
                              f"with group id {self.config.group_id}?") from error
        _log.warning("aborting the mirror's transaction (%d records will be copied again): %s",
                     sum(self._pending.values()), error)
        await producer.abort_transaction()
        for tp in self._consumer.assignment():
            self._consumer.seek(tp, self.progress.position(tp))
        self._pending = {}
        self._in_txn, self._txn_deadline = False, math.inf

    # --- topics and positions ------------------------------------------------------------
    async def _refresh(self) -> None:
        """Sync the target's topics, then read the source partitions they are ready for."""
        await self._commit()  # a new assignment drops what the consumer fetched ahead
        counts = await self._sync.sync()
        if not counts:
            _log.info("no topic on the source matches %r yet", self.config.topics)
        wanted = {TopicPartition(t, p) for t, n in counts.items() for p in range(n)}
        current = self._consumer.assignment()
        new, gone = sorted(wanted - current), current - wanted
        if not new and not gone:
            return
        for topic in sorted({tp.topic for tp in new}):
            await self._await_target_partitions(topic, counts[topic])
        self._consumer.assign(sorted(wanted))
        for tp in gone:
            self.progress.forget(tp)
        if new:
            await self._start_positions(new)

    async def _refresh_later(self) -> None:
        """A periodic refresh: a cluster that does not answer now is asked again next time,
        while the partitions already assigned keep flowing."""
        await self._commit()  # outside the guard: a failed commit is not a refresh's to forgive
        try:
            await self._refresh()
        except KafkaError as e:
            _log.warning("could not look for new topics and partitions (next try in %s s): %s",
                         self.config.refresh_topics_interval_s, e)

    async def _await_target_partitions(self, topic: str, count: int) -> None:
        """Wait until the producer's metadata shows ``count`` partitions of the target topic:
        a record for a partition it does not know yet would be refused."""
        cluster = self._producer.cluster
        deadline = self._loop.time() + _TARGET_METADATA_WAIT_S
        while True:
            meta = await cluster.refresh([topic], allow_auto_create=False)
            if meta.partition_count(topic) >= count:
                return
            if self._loop.time() > deadline:
                raise KafkaTimeoutError(f"topic {topic} on the target has no {count} partitions "
                                        f"after {_TARGET_METADATA_WAIT_S:.0f} s")
            await asyncio.sleep(0.1)

    async def _start_positions(self, partitions: list[TopicPartition]) -> None:
        committed = await self._committed(partitions)
        consumer = self._consumer
        for tp in partitions:
            if tp in committed:
                consumer.seek(tp, committed[tp].offset)
            else:
                consumer.seek_to_beginning(tp)
        for tp in partitions:
            self.progress.start(tp, await consumer.position(tp))
        resumed = sum(1 for tp in partitions if tp in committed)
        _log.info("reading %d source partitions: %d from positions committed on the target, %d from the start",
                  len(partitions), resumed, len(partitions) - resumed)

    async def _committed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """The positions committed on the target for the mirror's group; waits while an
        offset is pending in a transaction that is still being completed."""
        deadline = self._loop.time() + _STABLE_WAIT_S
        while True:
            try:
                return await self._target_admin.list_group_offsets(
                    self.config.group_id, partitions, require_stable=True)
            except BrokerError as e:
                if e.code != ErrorCode.UNSTABLE_OFFSET_COMMIT or self._loop.time() > deadline:
                    raise
            await asyncio.sleep(0.1)

    # --- lag -----------------------------------------------------------------------------
    async def _report(self) -> None:
        partitions = list(self.progress.partitions)
        if not partitions:
            return
        try:
            self.progress.ends(await self._consumer.end_offsets(partitions))
        except KafkaError as e:
            _log.warning("could not look up the source's end offsets: %s", e)
        for topic in self.progress.topics().values():
            _log.info("mirror lag: %s", topic.line())
