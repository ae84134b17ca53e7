"""``ShareCoordinator``: the share coordinator's runtime on the broker's event loop.

Kafka's ShareCoordinatorService over ``coordinator_runtime.CoordinatorRuntime`` (the slots,
leadership and loading the group and transaction coordinators share): one
``ShareCoordinatorShard`` per ``__share_group_state`` partition this broker leads, loaded by
replaying the partition (``loader``) when this broker becomes its leader, unloaded when it no
longer is. Until loaded, its keys answer COORDINATOR_LOAD_IN_PROGRESS; keys of partitions led
elsewhere NOT_COORDINATOR; after shutdown COORDINATOR_NOT_AVAILABLE.

A write (initialize, write, a read that records a newer leader epoch, delete) appends the
shard's records as one v2 batch with acks=all (``ReplicaManager.append_as_coordinator``:
refused NOT_ENOUGH_REPLICAS while the ISR is short of min.insync.replicas), replays them into
the shard right after the local append, and answers once the high watermark passed them, or
REQUEST_TIMED_OUT after share.coordinator.write.timeout.ms. A failed append is answered as
Kafka's ShareCoordinatorService maps it: NOT_LEADER_OR_FOLLOWER / NOT_ENOUGH_REPLICAS /
REQUEST_TIMED_OUT and the like become COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, so the
caller's Persister finds the coordinator again and retries.

Simplification (as ``group_coordinator``): records are replayed at the local append, before the
replicas have them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from uuid import UUID

from odradek.coordinator.coordinator_runtime import CoordinatorError, CoordinatorRuntime, CoordinatorSlot
from odradek.coordinator.share.loader import load_shard
from odradek.coordinator.share.persister import PersisterStateBatch, ShareGroupState, ShareStateSummary
from odradek.coordinator.share.share_coordinator_config import ShareCoordinatorConfig
from odradek.coordinator.share.share_coordinator_shard import ShareCoordinatorResult, ShareCoordinatorShard
from odradek.coordinator.share.share_partition_key import SHARE_GROUP_STATE_TOPIC, format_key
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.builder import BatchBuilder, BatchSpec

log = logging.getLogger("odradek.coordinator.share")
E = ErrorCode

# Kafka's ShareCoordinatorService: append failures become errors a Persister retries on.
_WRITE_ERRORS = {
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
}


def write_error(error: ErrorCode) -> ErrorCode:
    """The answer for a failed append of ``error``."""
    return _WRITE_ERRORS.get(error, E.UNKNOWN_SERVER_ERROR if error != E.NONE else E.NONE)


class ShareCoordinator(CoordinatorRuntime):
    TOPIC = SHARE_GROUP_STATE_TOPIC
    CONFIG = ShareCoordinatorConfig
    ROLE = "share coordinator"
    LEADERSHIP_LOG_LEVEL = logging.DEBUG  # one line per partition: quiet
    log = log

    # --- the runtime's hooks ------------------------------------------------------------------
    def _new_slot(self, p: int, leader_epoch: int) -> CoordinatorSlot:
        return CoordinatorSlot(p, leader_epoch, ShareCoordinatorShard(p, self.config, self.clock))

    def _load_shard(self, shard, plog):
        return load_shard(shard, plog)

    def _loaded(self, slot: CoordinatorSlot, stats) -> None:
        slot.loading = False
        if stats is not None:
            log.info("loaded %s-%d: %d records up to offset %d, %d share-partitions", self.TOPIC, slot.partition,
                     stats.records, stats.end_offset, len(slot.shard.states))

    def _track(self, task: asyncio.Task) -> None:
        self.broker.track(task)

    # --- the state operations -------------------------------------------------------------------
    def slot_for(self, group_id: str, topic_id: UUID, partition: int) -> CoordinatorSlot:
        """The loaded slot of the share-partition's key, or CoordinatorError."""
        return self._slot_for(format_key(group_id, topic_id, partition))

    async def initialize_state(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
                               start_offset: int) -> ErrorCode:
        return await self._write(group_id, topic_id, partition,
                                 lambda shard, key: shard.initialize(key, state_epoch, start_offset))

    async def write_state(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int, leader_epoch: int,
                          start_offset: int, batches: Sequence[PersisterStateBatch],
                          delivery_complete_count: int = -1) -> ErrorCode:
        return await self._write(group_id, topic_id, partition,
                                 lambda shard, key: shard.write(key, state_epoch, leader_epoch, start_offset, batches,
                                                                delivery_complete_count))

    async def delete_state(self, group_id: str, topic_id: UUID, partition: int) -> ErrorCode:
        return await self._write(group_id, topic_id, partition, lambda shard, key: shard.delete(key))

    async def read_state(self, group_id: str, topic_id: UUID, partition: int, leader_epoch: int) -> ShareGroupState:
        try:
            slot = self.slot_for(group_id, topic_id, partition)
        except CoordinatorError as e:
            return ShareGroupState(e.error, 0, -1, ())
        result = slot.shard.read((group_id, topic_id, partition), leader_epoch)
        error = await self._append(slot, result)
        if error != E.NONE:
            return ShareGroupState(write_error(error), 0, -1, ())
        return result.response

    async def read_summary(self, group_id: str, topic_id: UUID, partition: int,
                           leader_epoch: int) -> ShareStateSummary:
        try:
            slot = self.slot_for(group_id, topic_id, partition)
        except CoordinatorError as e:
            return ShareStateSummary(e.error, 0, -1)
        return slot.shard.read_summary((group_id, topic_id, partition))

    async def _write(self, group_id: str, topic_id: UUID, partition: int, operation) -> ErrorCode:
        try:
            slot = self.slot_for(group_id, topic_id, partition)
        except CoordinatorError as e:
            return e.error
        result = operation(slot.shard, (group_id, topic_id, partition))
        error = await self._append(slot, result)
        return result.response if error == E.NONE else write_error(error)

    # --- appending ------------------------------------------------------------------------------
    async def _append(self, slot: CoordinatorSlot, result: ShareCoordinatorResult) -> ErrorCode:
        """Append and replay ``result``'s records, then wait for the replicas: the error."""
        if not result.records:
            return E.NONE
        part = self._led_partition(slot)
        if part is None:
            return E.NOT_LEADER_OR_FOLLOWER
        builder = BatchBuilder(BatchSpec())
        now = self.clock.milliseconds()
        for record in result.records:
            builder.append(now, record.key_bytes(), record.value_bytes())
        error, last_offset = self._append_to(slot, part, builder.build(), E.KAFKA_STORAGE_ERROR)
        if error != E.NONE:
            return error
        for record in result.records:
            slot.shard.replay(record)
        return await self._replicated(slot, last_offset)

    async def _replicated(self, slot: CoordinatorSlot, last_offset: int) -> ErrorCode:
        rm = self.broker.replica_manager
        error = rm.replication_error(self.TOPIC, slot.partition, last_offset)
        if error is not None:
            return error
        waits = [(self.TOPIC, slot.partition, last_offset, None)]
        await rm.wait_for_replication(waits, self.config.write_timeout_ms / 1000)
        error = rm.replication_error(self.TOPIC, slot.partition, last_offset)
        return E.REQUEST_TIMED_OUT if error is None else error
