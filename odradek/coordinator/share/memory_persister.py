"""An in-memory Persister for unit tests (no coordinator, no topic, no network).

It keeps Kafka's share coordinator semantics that a share partition can observe:
- an uninitialized share-partition reads as state epoch 0, start offset -1, no batches;
- ``initialize_state`` replaces the state (new state epoch and start offset, no batches);
- ``write_state`` paints its batches over the stored ones (``state_batch_combiner.py``) and
  trims below the start offset; a state epoch below the stored one is FENCED_STATE_EPOCH;
- a read or write whose leader epoch is below the stored one is FENCED_LEADER_EPOCH; a newer
  leader epoch is remembered (``-1`` skips the check and keeps the stored epoch);
- ``delete_state`` forgets the share-partition.

``fail_next`` lets a test inject an error for the next call of a named operation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from odradek.coordinator.share.persister import PersisterStateBatch, ShareGroupState
from odradek.coordinator.share.state_batch_combiner import combine_state_batches
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["InMemoryPersister"]

_Key = tuple[str, UUID, int]


@dataclass(slots=True)
class _Entry:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[PersisterStateBatch, ...] = ()


@dataclass
class InMemoryPersister:
    """A Persister over a dict; ``states`` is open to tests for inspection."""

    states: dict[_Key, _Entry] = field(default_factory=dict)
    failures: dict[str, list[ErrorCode]] = field(default_factory=dict)
    calls: list[tuple[str, _Key]] = field(default_factory=list)

    def fail_next(self, operation: str, error: ErrorCode) -> None:
        """Answer the next ``operation`` (e.g. "write_state") with ``error``, changing nothing."""
        self.failures.setdefault(operation, []).append(error)

    def _injected(self, operation: str, key: _Key) -> ErrorCode | None:
        self.calls.append((operation, key))
        queue = self.failures.get(operation)
        return queue.pop(0) if queue else None

    async def initialize_state(self, group_id: str, topic_id: UUID, partition: int,
                               state_epoch: int, start_offset: int) -> ErrorCode:
        key = (group_id, topic_id, partition)
        if (err := self._injected("initialize_state", key)) is not None:
            return err
        old = self.states.get(key)
        if old is not None and state_epoch < old.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        self.states[key] = _Entry(state_epoch, -1, start_offset)
        return ErrorCode.NONE

    async def read_state(self, group_id: str, topic_id: UUID, partition: int,
                         leader_epoch: int) -> ShareGroupState:
        key = (group_id, topic_id, partition)
        if (err := self._injected("read_state", key)) is not None:
            return ShareGroupState(err, 0, -1, ())
        entry = self.states.get(key)
        if entry is None:
            return ShareGroupState(ErrorCode.NONE, 0, -1, (), -1)
        if leader_epoch != -1 and leader_epoch < entry.leader_epoch:
            return ShareGroupState(ErrorCode.FENCED_LEADER_EPOCH, 0, -1, ())
        if leader_epoch != -1:
            entry.leader_epoch = leader_epoch
        return ShareGroupState(ErrorCode.NONE, entry.state_epoch, entry.start_offset,
                               entry.batches, entry.leader_epoch)

    async def write_state(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
                          leader_epoch: int, start_offset: int,
                          batches: Sequence[PersisterStateBatch]) -> ErrorCode:
        key = (group_id, topic_id, partition)
        if (err := self._injected("write_state", key)) is not None:
            return err
        entry = self.states.get(key)
        if entry is None:
            self.states[key] = _Entry(state_epoch, leader_epoch, start_offset,
                                      combine_state_batches((), batches, start_offset))
            return ErrorCode.NONE
        if leader_epoch != -1 and leader_epoch < entry.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if state_epoch < entry.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        new_start = start_offset if start_offset != -1 else entry.start_offset
        entry.batches = combine_state_batches(entry.batches, batches, new_start)
        entry.start_offset = new_start
        entry.state_epoch = state_epoch
        if leader_epoch != -1:
            entry.leader_epoch = leader_epoch
        return ErrorCode.NONE

    async def delete_state(self, group_id: str, topic_id: UUID, partition: int) -> ErrorCode:
        key = (group_id, topic_id, partition)
        if (err := self._injected("delete_state", key)) is not None:
            return err
        self.states.pop(key, None)
        return ErrorCode.NONE

    async def read_summary(self, group_id: str, topic_id: UUID, partition: int,
                           leader_epoch: int) -> tuple[ErrorCode, int, int]:
        key = (group_id, topic_id, partition)
        if (err := self._injected("read_summary", key)) is not None:
            return err, 0, -1
        entry = self.states.get(key)
        if entry is None:
            return ErrorCode.NONE, 0, -1
        if leader_epoch != -1 and leader_epoch < entry.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, 0, -1
        return ErrorCode.NONE, entry.state_epoch, entry.start_offset
