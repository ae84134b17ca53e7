"""The Persister: how a share partition reads and writes its durable state (Kafka's Persister).

A share-partition is identified by ``(group_id, topic_id, partition)``; its state lives with
the share coordinator that owns the ``__share_group_state`` partition for the key
``"group_id:topic_id:partition"`` (FindCoordinator key type 2). The broker holds one Persister
(Kafka's DefaultStatePersister): a local call when this broker hosts that coordinator, the
state RPCs (InitializeShareGroupState 83, ReadShareGroupState 84, WriteShareGroupState 85,
DeleteShareGroupState 86, ReadShareGroupStateSummary 87) to the coordinator otherwise.

Contract:
- ``start_offset == -1`` in a read answer means the share-partition was never initialized
  (the reader applies the group's ``share.auto.offset.reset``).
- ``write_state`` with a state epoch older than the stored one is refused with
  FENCED_STATE_EPOCH; a read or write with a leader epoch older than the stored one with
  FENCED_LEADER_EPOCH (``-1`` means "do not check").
- Batches are inclusive offset runs ``[first_offset, last_offset]``, non-overlapping in an
  answer, ordered by first offset, none below the start offset.
- ``delivery_complete_count`` (KIP-1226, WriteShareGroupState v1 / ReadShareGroupStateSummary
  v1): how many records at or above the start offset are ACKNOWLEDGED or ARCHIVED, as the
  share-partition leader last wrote it; -1 when unknown (never written, or a v0 writer). An
  initialize with a start offset of 0 or more sets it to 0 (nothing delivered from there yet).
- ``read_summary`` answers a ``ShareStateSummary``; it unpacks as the old
  ``(error, state_epoch, start_offset)`` triple, so callers that unpack three still work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["PersisterStateBatch", "ShareGroupState", "ShareStateSummary", "Persister"]


@dataclass(frozen=True, slots=True)
class PersisterStateBatch:
    """A run of offsets ``[first_offset, last_offset]`` with one state (Kafka's PersisterStateBatch).

    ``delivery_state`` uses Kafka's RecordState ids: 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED.
    """

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareGroupState:
    """What ReadShareGroupState answers for one share-partition.

    ``error`` is NONE, or e.g. COORDINATOR_NOT_AVAILABLE, FENCED_STATE_EPOCH,
    FENCED_LEADER_EPOCH. ``start_offset`` -1: not initialized.
    """

    error: ErrorCode
    state_epoch: int
    start_offset: int
    batches: tuple[PersisterStateBatch, ...]
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True, eq=False)
class ShareStateSummary:
    """What ReadShareGroupStateSummary answers for one share-partition (Kafka's
    PartitionStateSummaryData). ``start_offset`` -1: not initialized;
    ``delivery_complete_count`` -1: unknown. As a sequence (unpacking, indexing, equality
    with a tuple) it is ``(error, state_epoch, start_offset)``, the summary's earlier form."""

    error: ErrorCode
    state_epoch: int
    start_offset: int
    leader_epoch: int = -1
    delivery_complete_count: int = -1

    def _triple(self) -> tuple:
        return self.error, self.state_epoch, self.start_offset

    def _all(self) -> tuple:
        return (*self._triple(), self.leader_epoch, self.delivery_complete_count)

    def __iter__(self):
        return iter(self._triple())

    def __getitem__(self, index):
        return self._triple()[index]

    def __eq__(self, other) -> bool:
        if isinstance(other, ShareStateSummary):
            return self._all() == other._all()
        if isinstance(other, tuple):
            return self._triple() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._all())


class Persister(Protocol):
    """Kafka's Persister; the key is ``(group_id, topic_id, partition)``."""

    async def initialize_state(self, group_id: str, topic_id: UUID, partition: int,
                               state_epoch: int, start_offset: int) -> ErrorCode: ...

    async def read_state(self, group_id: str, topic_id: UUID, partition: int,
                         leader_epoch: int) -> ShareGroupState: ...

    async def write_state(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
                          leader_epoch: int, start_offset: int,
                          batches: Sequence[PersisterStateBatch],
                          delivery_complete_count: int = -1) -> ErrorCode: ...

    async def delete_state(self, group_id: str, topic_id: UUID, partition: int) -> ErrorCode: ...

    async def read_summary(self, group_id: str, topic_id: UUID, partition: int,
                           leader_epoch: int) -> ShareStateSummary: ...

