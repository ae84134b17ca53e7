"""The partitions this broker hosts, their roles, and the operations that wait on them.

``ReplicaManager`` maps ``(topic, partition)`` to a ``Partition``, creates and removes their
logs through the log manager, appends as leader, and lets fetches wait for data: a long-poll
fetch that has fewer than ``fetch.min.bytes`` waits in ``wait_for_appends`` until an append to
one of its partitions (or its ``max.wait.ms``) wakes it, then reads again (Kafka's delayed
fetch, without a purgatory timer wheel: one future per waiting fetch).

``notify(key)`` is the one signal that something a fetcher sees of a partition changed: an
append, the high watermark, the last stable offset or the log start offset, the leader epoch
or the role, the partition leaving. Besides the one-shot waiters of ``wait_for_appends``,
long-lived watchers (KIP-227 fetch sessions, ``server/fetch_session_changes.py``) ``watch`` the
keys they hold and are told of each change through ``partition_changed(key)``, so that an idle
session costs nothing per partition.

Appends whose records must be checked off the event loop (``Partition.CheckOffLoop``: they
decompress to more than ``INLINE_DECOMPRESSED``) go through ``append_off_loop``: the check
runs on one of ``RECORD_CHECK_THREADS`` worker threads, the append back on the loop. Each
check holds at most one batch's decompression bound (``records/log_validator.py``: 32 MiB at
the default ``max.message.bytes``), so these threads hold at most that many of them. While a partition has such an append
pending, every later append to it queues behind it (``checking_off_loop``; the produce fast
path hands those to the generic path), so a partition's appends keep their arrival order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.high_watermark_checkpoint import (
    initial_high_watermark,
    read_high_watermarks,
    write_high_watermarks,
)
from odradek.replication.partition import CheckOffLoop, Partition, ProduceResult
from odradek.replication.produce_validation import ProduceError
from odradek.replication.producer_snapshot import restore_producer_state, snapshot_path, write_producer_snapshot
from odradek.replication.producer_state_reload import reload_producer_state, reset_producer_state
from odradek.replication.transactions import cleanable_limit

log = logging.getLogger("odradek.replication")

# Worker threads checking records off the event loop: bounds their memory (see above).
RECORD_CHECK_THREADS = 2


def _no_min_insync_replicas(topic: str) -> int:
    return 1


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager, clock, replica_lag_time_max_ms: int = 30_000,
                 min_insync_replicas: Callable[[str], int] = _no_min_insync_replicas) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.clock = clock
        self.replica_lag_time_max_ms = replica_lag_time_max_ms  # replica.lag.time.max.ms
        # A topic's effective min.insync.replicas (its override, else the broker's dynamic or
        # static value: ``server/topics.TopicManager.min_insync_replicas``), read when an
        # acks=all wait completes or a coordinator appends, so a change applies at once.
        self.min_insync_replicas = min_insync_replicas
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._waiters: dict[tuple[str, int], list[asyncio.Future]] = {}
        # key -> the watchers (fetch sessions) told of each notify(key): see the module docstring.
        self._watchers: dict[tuple[str, int], set] = {}
        # Partitions with appends queued by append_off_loop: (how many, the lock they take in turn).
        self.off_loop_appends: dict[tuple[str, int], list] = {}
        self._record_checks: ThreadPoolExecutor | None = None  # made on first use
        # The high watermarks checkpointed by the previous run, consumed as partitions appear.
        self.checkpointed_high_watermarks = read_high_watermarks(getattr(log_manager, "log_dirs", ()))
        # (log dirs, entries) of the last checkpoint written whole: the same again is not rewritten.
        self._last_checkpoint: tuple | None = None
        # A partition notified, hosted or removed since high_watermarks_if_changed last looked.
        self._changed_since_checkpoint = True
        # Kafka's ReplicaManager.controllerEpoch: the highest controller epoch seen in a
        # LeaderAndIsr, StopReplica or UpdateMetadata (0 before any); older ones are refused.
        self.controller_epoch = 0
        # Kafka's replicaStateChangeLock: the controller's requests are carried out one at a
        # time, in arrival order, though log creation awaits a worker thread
        # (``replication/state_change.py``).
        self.state_change_lock = asyncio.Lock()
        # LeaderAndIsr partition states (``controller.commands.LeaderAndIsrPartition``) whose log could not be
        # created (a full disk), by key: ``state_change.retry_unhosted_roles`` tries again.
        self.unhosted_roles: dict[tuple[str, int], object] = {}
        # Kafka's IsrShrinksPerSec / IsrExpandsPerSec counts: ISR changes of led partitions
        # once durable (``count_isr_change``); read by the broker's metrics.
        self.isr_shrinks = 0
        self.isr_expands = 0

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    # --- roles ------------------------------------------------------------------------------
    def make_leader(
        self, topic: str, index: int, topic_id: uuid.UUID, replicas, isr, leader_epoch: int,
        config, zk_version: int | None = None,
    ) -> Partition:
        """Become (or stay) leader of a partition, creating its log when it has none.
        ``zk_version``: the partition state's znode version from LeaderAndIsr (None: kept)."""
        part = self.hosted_partition(topic, index, topic_id, config)
        part.become_leader(self.broker_id, leader_epoch, replicas, isr, self.clock.milliseconds(), zk_version)
        self.notify(part.key)  # a new epoch, maybe a new high watermark: fetch sessions answer it
        return part

    def make_follower(
        self, topic: str, index: int, topic_id: uuid.UUID, replicas, isr, leader_id: int,
        leader_epoch: int, config, zk_version: int | None = None,
    ) -> Partition:
        """Become (or stay) a follower of ``leader_id`` (-1: none yet), creating the log when
        the partition has none (``Partition.become_follower``: the high watermark is kept,
        produces are refused from now on). Operations waiting on the partition are woken, so
        that an acks=all produce or a fetch waiting here sees it is no longer the leader.
        Fetching from the leader is the caller's to start (the replica fetcher manager)."""
        part = self.hosted_partition(topic, index, topic_id, config)
        part.become_follower(leader_id, leader_epoch, replicas, isr, zk_version)
        self.notify(part.key)
        return part

    def new_partition(self, topic: str, index: int, topic_id: uuid.UUID, config, is_new: bool = False) -> Partition:
        """A partition object for a partition not hosted yet: its log opened or created
        (with ``config``), its producer state restored (a snapshot read, batches replayed).
        It is hosted once given to ``host`` (``make_leader`` / ``make_follower`` do that
        themselves). Touches nothing else of this manager, so it may run on a worker thread:
        that is where the broker's state changes make the many of a start-up. Raises
        OSError / StorageError when the log cannot be had; OfflineLogDirsError when it is
        absent, some log directory is offline and the replica is not new (LeaderAndIsr's
        ``is_new``; see ``LogManager.get_or_create_log``)."""
        plog = self.log_manager.get_or_create_log(topic, index, config, topic_id, is_new=is_new)
        part = Partition(topic, index, topic_id, plog)
        restore_producer_state(part)
        plog.cleanable_limit = lambda: cleanable_limit(part)  # the cleaner stays below the LSO
        part.clock = self.clock
        part.replica_lag_time_max_ms = self.replica_lag_time_max_ms
        # The high watermark the previous run checkpointed (a dict pop: safe off the loop).
        part.high_watermark = initial_high_watermark(self.checkpointed_high_watermarks.pop(part.key, None),
                                                     plog.log_start_offset, plog.log_end_offset)
        return part

    def host(self, part: Partition) -> Partition:
        """Host ``part`` (from ``new_partition``) unless its key is hosted already; the
        hosted one."""
        self._changed_since_checkpoint = True
        return self.partitions.setdefault(part.key, part)

    def hosted_partition(self, topic: str, index: int, topic_id: uuid.UUID, config) -> Partition:
        """The partition, made (``new_partition``) and hosted when this broker did not host
        it yet, leader or follower. Creating a log touches the disk: the state changes call
        ``new_partition`` off the event loop first (``replication/state_change.py``)."""
        part = self.partitions.get((topic, index))
        if part is None:
            part = self.host(self.new_partition(topic, index, topic_id, config))
        return part

    def truncate_to(self, part: Partition, offset: int) -> bool:
        """Truncate a follower's log to ``offset`` (``replication/truncation.py`` decides
        where), with what depends on the log: the recovery point checkpointed at once
        (``LogManager.truncate_to``), the leader epoch cache (the log's own), the producer
        state rebuilt from a snapshot and the log (``producer_state_reload``) and the high
        watermark cut to the new log end offset. Whether anything changed."""
        changed = self.log_manager.truncate_to(part.topic, part.index, offset)
        if changed:
            end = part.log_end_offset
            reload_producer_state(part, snapshot_path(part))
            part.high_watermark = min(part.high_watermark, end)
            self.notify(part.key)
        return changed

    def truncate_fully(self, part: Partition, offset: int) -> None:
        """Empty a follower's log and restart it at ``offset`` (the leader's log start offset,
        when the follower's fetch offset fell below it: Kafka's ``truncateFullyAndStartAt``);
        the producer state and the high watermark start there too."""
        self.log_manager.truncate_fully(part.topic, part.index, offset)
        reset_producer_state(part, offset, snapshot_path(part))
        part.high_watermark = offset
        self.notify(part.key)

    def count_isr_change(self, before, after) -> None:
        """A led partition's ISR went from ``before`` to ``after``: a shrink when it lost a
        member, an expansion when it gained one (both, if the controller answered so)."""
        self.isr_shrinks += any(r not in after for r in before)
        self.isr_expands += any(r not in before for r in after)

    def maybe_shrink_isrs(self, now_ms: int) -> list[Partition]:
        """The led partitions whose ISR just lost followers lagging by more than
        ``replica.lag.time.max.ms`` (``Partition.maybe_shrink_isr``, which made the change
        pending): send each to the alter-partition manager (Kafka's ``maybeShrinkIsr``).
        Also moves (and notifies) a high watermark that only time held back."""
        changed = []
        for key, part in list(self.partitions.items()):
            if not part.followers or not part.is_leader(self.broker_id):
                continue
            if part.maybe_shrink_isr(now_ms) is not None:
                changed.append(part)
            elif part.high_watermark < part.log_end_offset and part.maybe_advance_high_watermark(now_ms):
                # A follower outside the ISR that was caught up held the high watermark
                # (``isr.high_watermark_bound``, Kafka's shouldWaitForReplicaToJoinIsr) until its
                # replica.lag.time.max.ms ran out. Kafka sees that at the next fetch of any
                # follower; a fetch session reads only changed partitions, so nothing else
                # would look again, and acks=all produces would wait until they time out.
                self.notify(key)
        return changed

    def high_watermarks(self) -> list[tuple[tuple[str, int], str, int]]:
        """``(key, log_dir, high_watermark)`` of every hosted partition, for
        ``high_watermark_checkpoint.write_high_watermarks`` (read on the event loop)."""
        return [(key, os.path.dirname(part.log.directory), part.high_watermark)
                for key, part in list(self.partitions.items())]

    def high_watermarks_if_changed(self) -> list[tuple[tuple[str, int], str, int]] | None:
        """``high_watermarks()`` for the periodic checkpoint, or None when no partition was
        notified, hosted or removed since the last call: every high watermark move is
        followed by a ``notify`` (the produce and fetch paths, ISR commits, role changes,
        truncations, the follower's fetcher), so an idle broker's pass reads nothing."""
        if not self._changed_since_checkpoint:
            return None
        self._changed_since_checkpoint = False
        return self.high_watermarks()

    def checkpoint_high_watermarks(self, entries=None) -> None:
        """Write ``replication-offset-checkpoint`` in every log directory, from ``entries``
        (``high_watermarks()``, taken on the loop when this runs on a worker thread)."""
        channel = getattr(self.log_manager, "failure_channel", None)
        offline = set(channel.offline_log_dirs) if channel is not None else set()
        entries = self.high_watermarks() if entries is None else entries
        dirs = [d for d in getattr(self.log_manager, "log_dirs", ()) if d not in offline]  # Kafka's liveLogDirs
        entries = [e for e in entries if e[1] not in offline]
        if (dirs, entries) == self._last_checkpoint:
            # The files already say exactly this: an idle broker rewrites (and fsyncs) nothing.
            return
        failures = write_high_watermarks(dirs, entries)
        for log_dir, error in failures.items():
            # Kafka's OffsetCheckpointFile: a checkpoint that cannot be written fails its
            # directory (a disk that lost the high watermarks must not keep leading).
            if channel is not None:
                channel.report(log_dir, "writing its high watermark checkpoint", error)
        if failures:
            raise next(iter(failures.values()))
        self._last_checkpoint = (dirs, entries)

    def remove(self, topic: str, index: int, delete: bool) -> None:
        part = self.partitions.pop((topic, index), None)
        self._changed_since_checkpoint = True
        if part is not None:
            if delete:
                self.log_manager.delete_log(topic, index)
            self.notify(part.key)

    def update_config(self, topic: str, config) -> None:
        for (name, _), part in self.partitions.items():
            if name == topic:
                part.log.update_config(config)

    def expire_producers(self, now_ms: int, producer_id_expiration_ms: int) -> int:
        """Forget, in every partition, the producers silent for ``producer_id_expiration_ms``
        (Kafka's ``producer.id.expiration.ms``); how many entries went. A producer that comes
        back is then unknown, and accepted with any sequence (KIP-360)."""
        return sum(len(part.producer_state.expire(now_ms, producer_id_expiration_ms))
                   for part in list(self.partitions.values()))

    # --- produce ----------------------------------------------------------------------------
    def append(self, part: Partition, records) -> ProduceResult:
        result = part.append_records_as_leader(records, self.clock.milliseconds())
        self.notify(part.key)
        return result

    def checking_off_loop(self, key: tuple[str, int]) -> bool:
        """True while appends to ``key`` queue behind one checked off the event loop."""
        return key in self.off_loop_appends

    def append_off_loop(self, part: Partition, records, heavy: bool, verifying=None) -> asyncio.Task:
        """Queue an append behind the partition's other off-loop ones (now, so that appends
        arriving meanwhile queue behind it); the task that makes it gives the result, or
        raises ProduceError. ``heavy``: the records are known to need the worker thread
        (else they are first tried on the loop: they may have queued only for order).
        ``verifying``: a future awaited in turn before appending (a transaction's
        verification, ``server/txn_verification.py``), whose ProduceError refuses it."""
        key = part.key
        entry = self.off_loop_appends.get(key)
        if entry is None:
            entry = self.off_loop_appends[key] = [0, asyncio.Lock()]
        entry[0] += 1
        # A copy: the request's bytes may lie in a receive buffer the connection reuses.
        task = asyncio.ensure_future(self._append_in_turn(part, memoryview(bytearray(records)), heavy, entry[1],
                                                          verifying))
        task.add_done_callback(lambda _: self._off_loop_done(key, entry))  # even if cancelled unstarted
        return task

    def _off_loop_done(self, key: tuple[str, int], entry: list) -> None:
        entry[0] -= 1
        if entry[0] == 0 and self.off_loop_appends.get(key) is entry:
            del self.off_loop_appends[key]

    async def _append_in_turn(self, part: Partition, records, heavy: bool, lock: asyncio.Lock,
                              verifying=None) -> ProduceResult:
        async with lock:  # FIFO: the partition's queued appends in arrival order
            if verifying is not None:
                await verifying
            if self.partitions.get(part.key) is not part or not part.is_leader(self.broker_id):
                raise ProduceError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{part.topic}-{part.index} moved")
            checked = await self._check_off_loop(part, records) if heavy else None
            try:
                result = part.append_records_as_leader(records, self.clock.milliseconds(), checked)
            except CheckOffLoop:
                checked = await self._check_off_loop(part, records)
                result = part.append_records_as_leader(records, self.clock.milliseconds(), checked)
            self.notify(part.key)
            return result

    async def _check_off_loop(self, part: Partition, records):
        if self._record_checks is None:
            self._record_checks = ThreadPoolExecutor(RECORD_CHECK_THREADS, thread_name_prefix="odradek-record-check")
        return await asyncio.get_running_loop().run_in_executor(
            self._record_checks, part.check_records_off_loop, records)

    def append_as_coordinator(self, part: Partition, batch) -> ProduceResult:
        """Append a batch built by a coordinator on this broker (see ``Partition``).
        Coordinators write with acks=all (Kafka's ``requiredAcks = -1``), so, as for a
        client's acks=all produce, nothing is appended while the ISR is smaller than the
        topic's ``min.insync.replicas``: ProduceError(NOT_ENOUGH_REPLICAS). The write is then
        done once ``replication_error`` says NONE."""
        min_isr = self.min_insync_replicas(part.topic)
        if len(part.isr) < min_isr:
            raise ProduceError(ErrorCode.NOT_ENOUGH_REPLICAS, f"{len(part.isr)} in-sync replica(s) of "
                               f"{part.topic}-{part.index}, min.insync.replicas is {min_isr}")
        result = part.append_as_coordinator(batch, self.clock.milliseconds())
        self.notify(part.key)
        return result

    def flushes_due_by_messages(self, appended) -> list[tuple[object, int, object]]:
        """``(log, up_to_offset, tag)`` for the ``(topic, index, tag)`` among ``appended``
        whose unflushed offsets reached ``flush.messages``: Kafka flushes those before it
        acknowledges the append. (The ``flush.ms`` policy and rolled segments are flushed by
        the background task.)"""
        due = []
        for topic, index, tag in appended:
            part = self.partitions.get((topic, index))
            if part is None:
                continue
            plog = part.log
            if plog.log_end_offset - plog.recovery_point >= plog.config.flush_messages:
                due.append((plog, plog.log_end_offset, tag))
        return due

    def replication_error(self, topic: str, index: int, last_offset: int) -> ErrorCode | None:
        """How an acks=all wait for ``last_offset`` ends (``Partition.check_enough_replicas_reach_offset``,
        Kafka's ``checkEnoughReplicasReachOffset``): NONE once the high watermark passed it
        with the ISR at ``min.insync.replicas`` or more, NOT_ENOUGH_REPLICAS_AFTER_APPEND when
        it passed it with fewer (the ISR shrank meanwhile), NOT_LEADER_OR_FOLLOWER once this
        broker no longer leads the partition (the records may be truncated by the new leader:
        the producer must retry there), None while it still waits. Every acks=all answer
        goes through here: the produce handler's, the coordinators', the markers'."""
        part = self.partitions.get((topic, index))
        if part is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return part.check_enough_replicas_reach_offset(self.broker_id, last_offset, self.min_insync_replicas)

    def all_replicated(self, waits) -> bool:
        """Whether every ``(topic, index, last_offset, _)`` wait ended with NONE
        (``replication_error``; else the answer needs its codes)."""
        return all(self.replication_error(t, i, last) == ErrorCode.NONE for t, i, last, _ in waits)

    def replication_over(self, waits) -> bool:
        """Whether every wait is over: the high watermark passed it, or its leadership was
        lost. (Its answer is ``replication_error``'s; this, asked at each wake-up of a
        waiting request, reads no config.)"""
        partitions = self.partitions
        broker_id = self.broker_id
        for t, i, last, _ in waits:
            part = partitions.get((t, i))
            if part is not None and part.leader_id == broker_id and part.high_watermark <= last:
                return False
        return True

    async def wait_for_replication(self, waits, timeout_s: float) -> bool:
        """Wait until every ``(topic, index, last_offset, _)`` wait is over
        (``replication_over``); False when ``timeout_s`` passed first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        keys = {(t, i) for t, i, _, _ in waits}
        while not self.replication_over(waits):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await self.wait_for_appends(keys, remaining)
        return True

    # --- waiting ----------------------------------------------------------------------------
    def notify(self, key: tuple[str, int]) -> None:
        self._changed_since_checkpoint = True
        waiters = self._waiters.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
        watchers = self._watchers.get(key)
        if watchers:
            for watcher in tuple(watchers):  # (a watcher may unwatch while told)
                watcher.partition_changed(key)

    def watch(self, key: tuple[str, int], watcher) -> None:
        """Tell ``watcher.partition_changed(key)`` of every ``notify(key)`` until ``unwatch``."""
        self._watchers.setdefault(key, set()).add(watcher)

    def unwatch(self, key: tuple[str, int], watcher) -> None:
        watchers = self._watchers.get(key)
        if watchers is not None:
            watchers.discard(watcher)
            if not watchers:
                del self._watchers[key]

    def follower_fetched_unchanged(self, key: tuple[str, int], replica_id: int, fetch_time_ms: int) -> None:
        """Follower ``replica_id`` fetched ``key`` at ``fetch_time_ms`` through a fetch session
        that did not read it, because nothing of it had changed since the follower's last fetch
        the leader recorded (the same fetch offset, the same leader log end offset): record
        that fetch now, as Kafka's ``updateFollowerFetchState`` would have at the time. Called
        when the partition changes (``notify``), before its next read: without it, an append
        after a long quiet spell would find the follower's ``last_caught_up_time_ms`` as old
        as the spell, and the ISR check could drop a follower that was caught up all along
        (``FollowerState.is_caught_up``).

        Only a fetch that extends one the leader recorded in its current leadership is
        replayed. ``become_leader`` resets the followers (Kafka's ``resetReplicaState``) and
        notifies, so a session's fetches after the reset read the partition; a session's last
        fetch older than the reset belongs to the leadership before and is dropped, as Kafka
        drops it: a new leader's follower has no offsets (-1); an ISR member's state says it
        fetched at the reset (``last_fetch_time_ms``, newer); one outside the ISR has no fetch
        at all (``last_fetch_time_ms`` 0). Replaying that last case revived a follower the
        controller had just taken out of the ISR (a controlled shutdown): "caught up" within
        ``replica.lag.time.max.ms``, its stale log end held the high watermark of the
        remaining ISR, and acks=all produces waited until they timed out."""
        part = self.partitions.get(key)
        if part is None or not part.followers:
            return
        follower = part.followers.get(replica_id)
        if (follower is None or follower.log_end_offset < 0 or follower.last_fetch_leader_log_end_offset < 0
                or follower.last_fetch_time_ms <= 0 or follower.last_fetch_time_ms >= fetch_time_ms):
            return
        part.followers[replica_id] = follower.after_fetch(
            follower.log_end_offset, follower.log_start_offset, fetch_time_ms,
            follower.last_fetch_leader_log_end_offset)

    async def wait_for_appends(self, keys, timeout_s: float) -> None:
        """Return after an append to any of ``keys``, or after ``timeout_s`` seconds."""
        if timeout_s <= 0:
            return
        fut = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, []).append(fut)
        try:
            async with asyncio.timeout(timeout_s):  # (not wait_for: it can drop a cancel, see replica_fetcher)
                await fut
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters and fut in waiters:
                    waiters.remove(fut)
                    if not waiters:
                        del self._waiters[key]

    # --- lifecycle ----------------------------------------------------------------------------
    def wake_all(self) -> None:
        """Wake every waiting operation (the broker is stopping)."""
        for key in set(self._waiters) | set(self._watchers):
            self.notify(key)

    def shutdown(self) -> None:
        """Snapshot producer state next to each log (the log manager closes the logs).

        The snapshots are written first and made durable together, by one ``os.sync()``
        (file contents and their renames): an fsync per file made a clean stop of 10,000
        partitions take 10-15 s, one journal commit each."""
        self.wake_all()
        try:
            self.checkpoint_high_watermarks()
        except OSError as e:  # the next start begins those partitions from their checkpoint of before
            log.warning("could not write %s: %s", "replication-offset-checkpoint", e)
        if self._record_checks is not None:
            self._record_checks.shutdown(wait=True, cancel_futures=True)  # before the logs close
        written = 0
        failed = []
        for part in self.partitions.values():
            try:
                written += write_producer_snapshot(part)
            except OSError as e:
                failed.append(f"{part.topic}-{part.index} ({e.strerror or e})")
        if failed:  # one line, however many (a full disk fails them all): rebuilt from the logs
            log.warning("could not snapshot the producer state of %d partition(s), rebuilt from "
                        "their logs at the next start: %s", len(failed), ", ".join(failed[:5]))
        if written:
            os.sync()
