"""An in-memory Persister for unit tests (no topic, no network).

It runs the share coordinator's own state machine (``ShareCoordinatorShard``) and replays
its records at once, so a share partition sees Kafka's semantics (see the shard's module):
an uninitialized share-partition reads as state epoch 0, start offset -1, no batches;
``write_state`` paints its batches over the stored ones and trims below the start offset;
FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH for older epochs; a read with a newer leader epoch
records it; ``delete_state`` forgets the share-partition.

``states`` maps ``(group_id, topic_id, partition)`` to the shard's ``ShareGroupOffset``
(``state_epoch``, ``leader_epoch``, ``start_offset``, ``batches``); ``fail_next`` injects an
error for the next call of a named operation; ``calls`` records every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from odradek.coordinator.share.persister import PersisterStateBatch, ShareGroupState, ShareStateSummary
from odradek.coordinator.share.share_coordinator_config import ShareCoordinatorConfig
from odradek.coordinator.share.share_coordinator_shard import ShareCoordinatorShard
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["InMemoryPersister"]

_Key = tuple[str, UUID, int]


class _WallClock:
    @staticmethod
    def milliseconds() -> int:
        import time
        return int(time.time() * 1000)


class InMemoryPersister:
    def __init__(self, config: ShareCoordinatorConfig | None = None, clock=None) -> None:
        self.shard = ShareCoordinatorShard(0, config or ShareCoordinatorConfig(), clock or _WallClock())
        self.failures: dict[str, list[ErrorCode]] = {}
        self.calls: list[tuple[str, _Key]] = []

    @property
    def states(self):
        return self.shard.states

    def fail_next(self, operation: str, error: ErrorCode) -> None:
        """Answer the next ``operation`` (e.g. "write_state") with ``error``, changing nothing."""
        self.failures.setdefault(operation, []).append(error)

    def _injected(self, operation: str, key: _Key) -> ErrorCode | None:
        self.calls.append((operation, key))
        queue = self.failures.get(operation)
        return queue.pop(0) if queue else None

    def _apply(self, result):
        for record in result.records:
            self.shard.replay(record)
        return result.response

    async def initialize_state(self, group_id: str, topic_id: UUID, partition: int,
                               state_epoch: int, start_offset: int) -> ErrorCode:
        key = (group_id, topic_id, partition)
        if (err := self._injected("initialize_state", key)) is not None:
            return err
        return self._apply(self.shard.initialize(key, state_epoch, start_offset))

    async def read_state(self, group_id: str, topic_id: UUID, partition: int,
                         leader_epoch: int) -> ShareGroupState:
        key = (group_id, topic_id, partition)
        if (err := self._injected("read_state", key)) is not None:
            return ShareGroupState(err, 0, -1, ())
        return self._apply(self.shard.read(key, leader_epoch))

    async def write_state(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
                          leader_epoch: int, start_offset: int,
                          batches: Sequence[PersisterStateBatch],
                          delivery_complete_count: int = -1) -> ErrorCode:
        key = (group_id, topic_id, partition)
        if (err := self._injected("write_state", key)) is not None:
            return err
        return self._apply(self.shard.write(key, state_epoch, leader_epoch, start_offset, batches,
                                            delivery_complete_count))

    async def delete_state(self, group_id: str, topic_id: UUID, partition: int) -> ErrorCode:
        key = (group_id, topic_id, partition)
        if (err := self._injected("delete_state", key)) is not None:
            return err
        return self._apply(self.shard.delete(key))

    async def read_summary(self, group_id: str, topic_id: UUID, partition: int,
                           leader_epoch: int) -> ShareStateSummary:
        key = (group_id, topic_id, partition)
        if (err := self._injected("read_summary", key)) is not None:
            return ShareStateSummary(err, 0, -1)
        return self.shard.read_summary(key)
