"""``GroupCoordinator``: the group coordinator's runtime on the broker's event loop.

It owns one ``GroupCoordinatorShard`` per ``__consumer_offsets`` partition this broker leads
(the slots, leadership and loading of ``coordinator_runtime.CoordinatorRuntime``, shared with
the transaction coordinator) and does for them what they cannot do themselves:

- **load**: a shard is built by replaying its partition (``loader``) in a worker thread; until
  that is done its groups answer COORDINATOR_LOAD_IN_PROGRESS. Partitions are loaded at start,
  when this broker becomes their leader (``on_leadership_change``, from LeaderAndIsr), when
  FindCoordinator names them, and whenever a request finds this broker leading a partition
  it has no shard for (or a shard of an older leader epoch). A partition this broker no
  longer leads is unloaded (``on_leadership_change``, or when a request finds it so): its
  waiting requests get NOT_COORDINATOR.
- **write**: the records of a ``CoordinatorResult`` become one v2 batch per ``Write``
  (key and value bytes of ``coordinator_record``, CreateTime now), appended through the replica
  manager; records marked for replay are replayed into the shard right after the local append;
  ``on_written`` runs once the high watermark passes the batch (at once with one replica), or
  with REQUEST_TIMED_OUT after ``offsets.commit.timeout.ms``. The writes are acks=all, as
  Kafka's coordinator appends with ``requiredAcks = -1``: nothing is appended while the
  partition's ISR is smaller than its ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS), and a
  write whose high watermark passed after the ISR shrank below it ends
  NOT_ENOUGH_REPLICAS_AFTER_APPEND (``ReplicaManager.replication_error``); a commit answers
  both COORDINATOR_NOT_AVAILABLE, a group write too (``coordinator_result``'s mappings, Kafka's).
- **time**: one ``loop.call_at`` per shard, armed for the shard's next timer deadline, runs the
  due timers and writes what they return; a task expires offsets every
  ``offsets.retention.check.interval.ms``.

Share groups (KIP-932): their heartbeats, descriptions and share-group state calls are
``ShareGroupRuntime``'s (coordinator/group/share/share_group_runtime.py), mixed in here.

Transactions: TxnOffsetCommit's records are written as one transactional batch of the
producer (``Write.producer_id``; the partition fences older epochs) and replayed as pending;
``complete_transaction`` applies the marker that the WriteTxnMarkers handler has just appended
(a marker appended while the partition loads is applied once the load is done, unless the
load replayed it).

Simplification against Kafka: a record is replayed when it is appended locally, not when the
replicas have it, so with several replicas an offset can be visible before it is committed
(Kafka keeps it pending until then). With one replica (today's clusters) the two are the same.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from odradek.coordinator.coordinator_runtime import CoordinatorError, CoordinatorRuntime, CoordinatorSlot
from odradek.coordinator.group.consumer.consumer_group_heartbeat import HeartbeatResult
from odradek.coordinator.group.coordinator_result import (
    CoordinatorResult,
    group_write_error,
    offset_write_error,
)
from odradek.coordinator.group.group_config import OFFSETS_TOPIC, GroupConfig
from odradek.coordinator.group.group_coordinator_shard import GroupCoordinatorShard
from odradek.coordinator.group.group_results import (
    GroupDescription,
    JoinResult,
    SyncResult,
)
from odradek.coordinator.group.loader import load_shard
from odradek.coordinator.group.share.share_group_runtime import ShareGroupRuntime
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.builder import BatchBuilder, BatchSpec

log = logging.getLogger("odradek.coordinator.group")


@dataclass(eq=False)
class _Slot(CoordinatorSlot):
    shard: GroupCoordinatorShard
    timer: asyncio.TimerHandle | None = None
    timer_deadline: int | None = None
    # Markers applied while loading: (the log end offset then, producer id, committed).
    ended_while_loading: list = field(default_factory=list)


class GroupCoordinator(ShareGroupRuntime, CoordinatorRuntime):
    TOPIC = OFFSETS_TOPIC
    CONFIG = GroupConfig
    ROLE = "group coordinator"
    LEADERSHIP_LOG_LEVEL = logging.DEBUG  # one line per __consumer_offsets partition: quiet
    log = log

    def _periodic(self) -> list[tuple[int, object]]:
        return [(self.config.offsets_retention_check_interval_ms, self.expire_offsets)]

    # --- the runtime's hooks ------------------------------------------------------------------
    def _new_slot(self, p: int, leader_epoch: int) -> _Slot:
        shard = GroupCoordinatorShard(p, self.config, self.clock, self.broker.metadata_image)
        group_configs = getattr(self.broker, "group_configs", None)  # server/group_configs.py
        if group_configs is not None:  # the groups' session and heartbeat overrides
            shard.consumer.group_config = shard.share.group_config = group_configs.get
        return _Slot(p, leader_epoch, shard)

    def _load_shard(self, shard, plog):
        return load_shard(shard, plog)

    def _loaded(self, slot: _Slot, stats) -> None:
        """Apply the markers appended while loading that the load did not replay; arm the timers."""
        slot.loading = False
        for log_end, producer_id, committed in slot.ended_while_loading:
            if stats is None or log_end > stats.end_offset:  # the load stopped short of it
                slot.shard.replay_end_transaction(producer_id, committed)
        slot.ended_while_loading.clear()
        slot.shard.on_loaded()
        self._arm(slot)
        if stats is not None:
            log.info("loaded %s-%d: %d records up to offset %d, %d groups", OFFSETS_TOPIC, slot.partition,
                     stats.records, stats.end_offset, len(slot.shard.groups.groups))

    def _on_unload(self, slot: _Slot) -> None:
        """Waiting requests get NOT_COORDINATOR; the shard's timers stop."""
        if slot.timer is not None:
            slot.timer.cancel()
        slot.shard.unload()

    def _track(self, task: asyncio.Task) -> None:
        self.broker.track(task)

    # --- writing ------------------------------------------------------------------------------
    def _apply(self, slot: _Slot, result: CoordinatorResult | None) -> list[asyncio.Future]:
        """Write ``result``'s records; one future per write, giving its error once replicated."""
        done = []
        for write in result.writes if result is not None else ():
            error, last_offset = self._append(slot, write)
            if error == ErrorCode.NONE and write.replay:
                first = last_offset - len(write.records) + 1
                for i, record in enumerate(write.records):
                    slot.shard.replay(record, write.producer_id, first + i)
            future = self.loop.create_future()
            done.append(future)
            if error == ErrorCode.NONE:
                error = self._replication_error(slot, last_offset)
            if error is not None:
                self._written(slot, write, error, future)
            else:
                self._spawn(self._await_replication(slot, write, last_offset, future), slot)
        self._arm(slot)
        return done

    def _append(self, slot: _Slot, write) -> tuple[ErrorCode, int]:
        records = write.records
        if not records:
            return ErrorCode.NONE, -1
        part = self._led_partition(slot)
        if part is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        now = self.clock.milliseconds()
        spec = BatchSpec()
        if write.producer_id >= 0:
            spec = BatchSpec(producer_id=write.producer_id, producer_epoch=write.producer_epoch, transactional=True)
        builder = BatchBuilder(spec)
        for record in records:
            builder.append(now, record.key_bytes(), record.value_bytes())
        return self._append_to(slot, part, builder.build(), ErrorCode.KAFKA_STORAGE_ERROR)

    def _replication_error(self, slot: _Slot, last_offset: int) -> ErrorCode | None:
        """How the acks=all write ending at ``last_offset`` stands (``ReplicaManager.replication_error``:
        NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER; None while it
        waits); NONE for a write of no records."""
        if last_offset < 0:
            return ErrorCode.NONE
        return self.broker.replica_manager.replication_error(OFFSETS_TOPIC, slot.partition, last_offset)

    async def _await_replication(self, slot: _Slot, write, last_offset: int, future: asyncio.Future) -> None:
        waits = [(OFFSETS_TOPIC, slot.partition, last_offset, None)]
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER  # unless answered: cancelled means unloaded
        try:
            await self.broker.replica_manager.wait_for_replication(waits, self.config.commit_timeout_ms / 1000)
            error = self._replication_error(slot, last_offset)
            if error is None:
                error = ErrorCode.REQUEST_TIMED_OUT
        finally:
            self._written(slot, write, error, future)
            self._arm(slot)

    def _written(self, slot: _Slot, write, error: ErrorCode, future: asyncio.Future) -> None:
        if write.on_written is not None:
            follow = write.on_written(error)
            if follow is not None and follow.writes and self._slots.get(slot.partition) is slot:
                self._apply(slot, follow)
        if not future.done():
            future.set_result(error)

    # --- timers -------------------------------------------------------------------------------
    def _arm(self, slot: _Slot) -> None:
        """Make sure the loop wakes the shard at its next timer deadline."""
        deadline = slot.shard.next_deadline()
        if deadline == slot.timer_deadline and slot.timer is not None:
            return
        if slot.timer is not None:
            slot.timer.cancel()
            slot.timer = None
        slot.timer_deadline = deadline
        if deadline is not None and self._slots.get(slot.partition) is slot:
            delay = max(deadline - self.clock.milliseconds(), 0) / 1000
            slot.timer = self.loop.call_later(delay, self._fire, slot)

    def _fire(self, slot: _Slot) -> None:
        slot.timer = None
        slot.timer_deadline = None
        if self._slots.get(slot.partition) is not slot or slot.loading:
            return
        for result in slot.shard.run_due_timers(self.clock.milliseconds()):
            self._apply(slot, result)
        self._arm(slot)

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Expire offsets (and dead empty groups) of every loaded shard; return the number of
        records written. ``now_ms`` lets tests look into the future."""
        now = self.clock.milliseconds() if now_ms is None else now_ms
        written = 0
        for slot in list(self._slots.values()):
            if not slot.loading:
                result = slot.shard.expire_offsets(now)
                written += sum(len(w.records) for w in result.writes)
                self._apply(slot, result)
        return written

    def on_topics_deleted(self, topics) -> int:
        """Remove every group's committed offsets of the deleted ``topics`` in the loaded
        shards; return the number of records written. (A shard still loading keeps them:
        its load finishes after the topic is gone, as in Kafka.)"""
        written = 0
        for slot in list(self._slots.values()):
            if not slot.loading:
                result = slot.shard.on_topics_deleted(set(topics))
                written += sum(len(w.records) for w in result.writes)
                self._apply(slot, result)
        return written

    # --- the group APIs -------------------------------------------------------------------------
    async def join_group(self, req) -> JoinResult:
        if not req.group_id:
            return JoinResult.failed(req.member_id, ErrorCode.INVALID_GROUP_ID)
        try:
            slot = self._slot_for(req.group_id)
        except CoordinatorError as e:
            return JoinResult.failed(req.member_id, e.error)
        answer = self.loop.create_future()
        self._apply(slot, slot.shard.join_group(req, _answer_once(answer)))
        return await answer

    async def sync_group(self, req) -> SyncResult:
        if not req.group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        try:
            slot = self._slot_for(req.group_id)
        except CoordinatorError as e:
            return SyncResult(e.error)
        answer = self.loop.create_future()
        self._apply(slot, slot.shard.sync_group(req, _answer_once(answer)))
        return await answer

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        try:
            slot = self._slot_for(group_id)
        except CoordinatorError as e:
            # While loading, Kafka answers heartbeats blindly: the member's state is not known yet.
            return ErrorCode.NONE if e.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else e.error
        result = slot.shard.heartbeat(group_id, member_id, instance_id, generation_id)
        self._apply(slot, result)
        return result.response

    def leave_group(self, group_id: str, leaving) -> tuple[ErrorCode, list[ErrorCode]]:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        try:
            slot = self._slot_for(group_id)
        except CoordinatorError as e:
            return e.error, []
        result = slot.shard.leave_group(group_id, leaving)
        self._apply(slot, result)
        return result.response

    async def commit_offsets(self, req) -> dict:
        """``{(topic, partition): error}``, answered once the offsets are written and replicated."""
        try:
            slot = self._slot_for(req.group_id)
        except CoordinatorError as e:
            return {(p.topic, p.partition): e.error for p in req.partitions}
        result = slot.shard.commit_offsets(req)
        return await self._answer_commit(slot, result)

    async def commit_transactional_offsets(self, req) -> dict:
        """TxnOffsetCommit: ``{(topic, partition): error}``, answered once written and
        replicated; the offsets stay pending until ``complete_transaction``."""
        if not req.group_id:
            return {(p.topic, p.partition): ErrorCode.INVALID_GROUP_ID for p in req.partitions}
        try:
            slot = self._slot_for(req.group_id)
        except CoordinatorError as e:
            return {(p.topic, p.partition): e.error for p in req.partitions}
        result = slot.shard.commit_transactional_offsets(req)
        return await self._answer_commit(slot, result)

    async def _answer_commit(self, slot: _Slot, result) -> dict:
        errors = [await f for f in self._apply(slot, result)]
        failed = next((e for e in errors if e != ErrorCode.NONE), None)
        if failed is None:
            return result.response
        mapped = offset_write_error(failed)
        return {k: mapped if e == ErrorCode.NONE else e for k, e in result.response.items()}

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT (``commit``) or ABORT marker of ``producer_id`` was appended to
        ``offsets_partition``: its pending offsets there become committed or are dropped. A
        no-op when this broker has no shard of that partition (a later load replays the marker)."""
        slot = self._slots.get(offsets_partition)
        if slot is None:
            return
        if slot.loading:
            part = self.broker.replica_manager.get(OFFSETS_TOPIC, offsets_partition)
            log_end = part.log_end_offset if part is not None else 2**63 - 1
            slot.ended_while_loading.append((log_end, producer_id, commit))
            return
        slot.shard.replay_end_transaction(producer_id, commit)

    def fetch_offsets(self, group_id: str, wanted, require_stable: bool = False, member_id: str | None = None,
                      member_epoch: int = -1) -> tuple[ErrorCode, list]:
        """``member_id``/``member_epoch`` (OffsetFetch v9+): checked against a consumer group's
        member (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID)."""
        try:
            slot = self._slot_for(group_id)
        except CoordinatorError as e:
            return e.error, []
        error = slot.shard.offsets.fetch_error(group_id, member_id, member_epoch)
        if error is not None:
            return error, []
        return ErrorCode.NONE, slot.shard.fetch_offsets(group_id, wanted, require_stable)

    async def delete_offsets(self, group_id: str, partitions) -> tuple[ErrorCode, dict]:
        try:
            slot = self._slot_for(group_id)
        except CoordinatorError as e:
            return e.error, {}
        result = slot.shard.delete_offsets(group_id, partitions)
        errors = [await f for f in self._apply(slot, result)]
        failed = next((e for e in errors if e != ErrorCode.NONE), None)
        if failed is not None:
            return offset_write_error(failed), {}
        return result.response

    # --- KIP-848 consumer groups ------------------------------------------------------------------
    async def consumer_group_heartbeat(self, req) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: answered once the records it writes are replicated (an
        error writing them answers the member as Kafka maps it: ``group_write_error``)."""
        try:
            slot = self._slot_for(req.group_id)
        except CoordinatorError as e:
            return HeartbeatResult(e.error, None, req.member_id or None, req.member_epoch)
        result = slot.shard.consumer_group_heartbeat(req)
        errors = [await f for f in self._apply(slot, result)]
        failed = next((e for e in errors if e != ErrorCode.NONE), None)
        if failed is not None:
            return HeartbeatResult(group_write_error(failed), None, req.member_id or None, req.member_epoch)
        return result.response

    def consumer_group(self, group_id: str):
        """``(error, ConsumerGroup or None)`` for ConsumerGroupDescribe (read on the loop)."""
        try:
            slot = self._slot_for(group_id)
        except CoordinatorError as e:
            return e.error, None
        return ErrorCode.NONE, slot.shard.consumer_group(group_id)

    def list_consumer_groups(self, state_names=None) -> list:
        groups = []
        for slot in self._slots.values():
            if not slot.loading:
                groups += slot.shard.list_consumer_groups(state_names)
        return groups

    def describe_group(self, group_id: str) -> GroupDescription:
        try:
            slot = self._slot_for(group_id)
        except CoordinatorError as e:
            return GroupDescription(group_id, e.error, state="")
        return slot.shard.describe_group(group_id)

    def list_groups(self, states=None, types=None) -> tuple[ErrorCode, list]:
        self.refresh()
        groups = []
        for slot in self._slots.values():
            if not slot.loading:
                groups += slot.shard.list_groups(states, types)
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.is_loading() else ErrorCode.NONE), groups

    def committed_offsets(self):
        """``(group, topic, partition, offset)`` for every offset committed in the shards loaded
        here (read-only, on the event loop: the broker's consumer-lag metrics)."""
        for slot in list(self._slots.values()):
            if not slot.loading:
                for group, offsets in slot.shard.offsets.offsets.items():
                    for (topic, partition), committed in offsets.items():
                        yield group, topic, partition, committed.offset

    def group_member_counts(self):
        """``(group, members)`` for every group in the shards loaded here (read-only, on the
        event loop: the broker's ``kafka_consumergroup_members``)."""
        for slot in list(self._slots.values()):
            if not slot.loading:
                for group_id, group in slot.shard.groups.groups.items():
                    yield group_id, len(group.members)
                for group_id, group in slot.shard.consumer.groups.items():
                    yield group_id, len(group.members)
                for group_id, group in slot.shard.share.groups.items():
                    yield group_id, len(group.members)

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        errors: dict[str, ErrorCode] = {}
        by_slot: dict[int, tuple[_Slot, list[str]]] = {}
        for group_id in group_ids:
            try:
                slot = self._slot_for(group_id)
            except CoordinatorError as e:
                errors[group_id] = e.error
                continue
            by_slot.setdefault(slot.partition, (slot, []))[1].append(group_id)
        for slot, ids in by_slot.values():
            result = slot.shard.delete_groups(ids)
            written = [await f for f in self._apply(slot, result)]
            failed = next((e for e in written if e != ErrorCode.NONE), None)
            self._spawn_share_state_calls(slot, failed is None)
            for group_id, error in result.response.items():
                errors[group_id] = offset_write_error(failed) if failed is not None and error == ErrorCode.NONE else error
        return errors


def _answer_once(future: asyncio.Future):
    def answer(result) -> None:
        if not future.done():
            future.set_result(result)

    return answer
