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

Cycles (``replication_policy``): target topics keep their source names, so a mirror whose
source and target are one cluster (the same cluster id in Metadata) is refused when it starts,
with MirrorError; the source positions are committed with the source's cluster id as offset
metadata, and a source topic that another mirror copies in from this mirror's target is left
out (``TopicSync``).

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

During a commit the source is still read: the source consumer is polled while EndTxn (and
the coordinator's PrepareCommit) travels, and what it returns is held, not sent (a
transactional producer cannot send between ``commit_transaction`` and the next
``begin_transaction``). The held records open the next transaction as soon as the commit is
done. Exactly once is kept: the positions committed are those read *before* the commit began,
the held records lie after them and are sent, and their positions committed, in the next
transaction; a commit that fails drops the held records with the rest (the consumer is
rewound to the committed positions). A commit that comes while records are held (of
positions alone, or a refresh's) commits a partition's position only up to its first held
record. At most ``_HOLD_POLLS`` polls' worth of records is held;
then the consumer keeps one fetched answer per partition buffered until the commit is done.
The source consumer belongs to no group (see above), so a slow commit cannot make it miss
``max.poll.interval.ms`` or a heartbeat and cost a rebalance: what a slow commit would cost
without the read-ahead is an idle source (no Fetch at all while EndTxn is delayed: the one
in flight when the commit begins is all).

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
from odradek.mirror.replication_policy import cluster_id, provenance, same_cluster
from odradek.mirror.topic_sync import TopicSync
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["MirrorError", "MirrorMaker"]

_log = logging.getLogger("odradek.mirror")

_POLL_AT_MOST_S = 1.0  # how long a poll may wait: the longest a stop request waits too
_STABLE_WAIT_S = 60.0  # how long to wait for the target's committed positions to be stable
_TARGET_METADATA_WAIT_S = 30.0  # for the target's metadata to show partitions just created
_COMMIT_ATTEMPTS = 3  # commits that time out are resumed this many times before giving up
# Records read ahead during a commit, in polls of max_poll_records: 4 x 5000 records of ~1 KiB
# hold ~20 MiB, more than a long commit's worth at the rate one producer sends.
_HOLD_POLLS = 4
_FATAL_STATE = "FatalError"
_COMMITTING_STATE = "CommittingTransaction"


class MirrorError(Exception):
    """The mirror cannot go on (fenced by another mirror with the same group id), or cannot
    start (the source and the target are one cluster)."""


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
        self._provenance = ""  # the metadata of the committed positions (replication_policy)
        self._in_txn = False
        self._txn_deadline = math.inf
        self._pending: dict[TopicPartition, int] = {}  # records per partition in the open transaction
        self._held: dict[TopicPartition, list] = {}  # read during a commit, for the next transaction
        self._held_count = 0
        self._read_ahead_error: Exception | None = None  # a poll's error during a commit, raised next

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
            source_id, target_id = await cluster_id(source_admin), await cluster_id(target_admin)
            refusal = same_cluster(source_id, target_id)
            if refusal is not None:
                raise MirrorError(refusal)
            self._provenance = provenance(source_id)
            self._sync = TopicSync(source_admin, target_admin, cfg, target_id)
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
        if self._read_ahead_error is not None:
            error, self._read_ahead_error = self._read_ahead_error, None
            raise error
        records = self._take_held() or await self._consumer.poll(timeout_ms=timeout_s * 1000)
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

    def _take_held(self) -> dict[TopicPartition, list]:
        """The records read during the last commit, of partitions still assigned."""
        held, self._held, self._held_count = self._held, {}, 0
        assigned = self._consumer.assignment()
        return {tp: batch for tp, batch in held.items() if tp in assigned}

    async def _read_ahead(self, commit: asyncio.Future) -> None:
        """Poll the source into ``_held`` until ``commit`` is done (or enough is held). A
        poll still waiting when the commit ends is cancelled: ``AsyncConsumer.poll`` takes
        records from its buffer and returns them without awaiting in between, so a cancelled
        poll has taken none."""
        consumer, limit = self._consumer, self.config.max_poll_records * _HOLD_POLLS
        while not commit.done() and self._held_count < limit and self._read_ahead_error is None:
            poll = asyncio.ensure_future(consumer.poll(
                timeout_ms=_POLL_AT_MOST_S * 1000, max_records=min(self.config.max_poll_records, limit - self._held_count)))
            await asyncio.wait((commit, poll), return_when=asyncio.FIRST_COMPLETED)
            if not poll.done():
                poll.cancel()
                await asyncio.wait((poll,))
            if poll.cancelled():
                return
            if poll.exception() is not None:  # raised where a poll's error would be: next
                self._read_ahead_error = poll.exception()
                return
            for tp, batch in poll.result().items():
                self._held.setdefault(tp, []).extend(batch)
                self._held_count += len(batch)

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
        """Source positions that moved since the last commit: the consumer's, or where records
        read ahead and not yet sent begin (they are not on the target yet)."""
        moved = {}
        for tp in self._consumer.assignment():
            held = self._held.get(tp)
            try:
                position = held[0].offset if held else await self._consumer.position(tp)
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
                    {tp: OffsetAndMetadata(p, self._provenance) for tp, p in positions.items()}, self.config.group_id)
            commit = asyncio.ensure_future(self._commit_transaction())
            try:
                if not self._stop.is_set():  # else the last commit: nothing more will be sent
                    await self._read_ahead(commit)
                await commit
            except asyncio.CancelledError:
                commit.cancel()
                raise
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
        self._pending, self._held, self._held_count, self._read_ahead_error = {}, {}, 0, None
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
