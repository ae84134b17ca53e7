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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["PersisterStateBatch", "ShareGroupState", "Persister"]


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


class Persister(Protocol):
    """Kafka's Persister; the key is ``(group_id, topic_id, partition)``."""

    async def initialize_state(self, group_id: str, topic_id: UUID, partition: int,
                               state_epoch: int, start_offset: int) -> ErrorCode: ...

    async def read_state(self, group_id: str, topic_id: UUID, partition: int,
                         leader_epoch: int) -> ShareGroupState: ...

    async def write_state(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
                          leader_epoch: int, start_offset: int,
                          batches: Sequence[PersisterStateBatch]) -> ErrorCode: ...

    async def delete_state(self, group_id: str, topic_id: UUID, partition: int) -> ErrorCode: ...

    async def read_summary(self, group_id: str, topic_id: UUID, partition: int,
                           leader_epoch: int) -> tuple[ErrorCode, int, int]:
        """Answer ``(error, state_epoch, start_offset)``."""
        ...

