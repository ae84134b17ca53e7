"""``ShareCoordinatorShard``: the share-partition states of one ``__share_group_state`` partition.

A sans-I/O state machine (Kafka's ShareCoordinatorShard). Operations never change the state:
they answer a ``ShareCoordinatorResult`` (the records to append, the response); the state
changes only by ``replay`` of records, the same path a load takes after a restart or failover
(``loader.py``), so the state after writing and after replaying the log are the same by
construction.

Per share-partition key ``(group_id, topic_id, partition)`` it keeps a ``ShareGroupOffset``
(snapshot epoch, state epoch, leader epoch, start offset, state batches, delivery complete
count), plus, as Kafka:

- the fencing epochs: the highest leader epoch and state epoch any record of the key carried
  (``leader_epochs``, ``state_epochs``). A read whose leader epoch is below the leader epoch
  answers FENCED_LEADER_EPOCH; a write whose leader epoch (unless -1) is below it likewise; a
  write or initialize whose state epoch (unless -1) is below the state epoch answers
  FENCED_STATE_EPOCH;
- ``update_counts``: ShareUpdate records replayed since the last ShareSnapshot. A write while
  the count has reached share.coordinator.snapshot.update.records.per.snapshot writes a full
  ShareSnapshot (snapshot epoch + 1, batches merged) instead of a ShareUpdate, which resets it.

Operations (one share-partition each, as Kafka's requests carry one by design):
- ``initialize``: a ShareSnapshot with the new state epoch and start offset, leader epoch 0
  and no batches (InitializeShareGroupState: a fresh start, nothing merged); its delivery
  complete count is 0 for a start offset of 0 or more, else -1 (Kafka 4.2, KIP-1226);
- ``write``: a ShareUpdate of the request's batches (merged among themselves), start offset
  (-1: unchanged), delivery complete count (WriteShareGroupState v1's, -1 from v0: unknown,
  stored as sent, as Kafka 4.2) and the stored leader epoch; the replay paints them over the
  stored batches and trims below the start offset (``state_batch_combiner``);
- ``read``: the merged state; a newer leader epoch than stored is recorded with a ShareUpdate
  of no batches (Kafka's readStateAndMaybeUpdateLeaderEpoch);
- ``read_summary``: a ``ShareStateSummary``: state epoch, leader epoch, start offset and
  delivery complete count (no fencing, as Kafka);
- ``delete``: a tombstone under the ShareSnapshot key (nothing for an unknown key).

Differences from Kafka 4.2, kept for the project's Persister contract
(``persister.py``): reading an uninitialized share-partition answers NONE with state epoch 0
and start offset -1 (Kafka 4.2: INVALID_REQUEST), and writing one creates its state with a
ShareSnapshot (Kafka 4.0's behaviour; Kafka 4.2: INVALID_REQUEST).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from odradek.coordinator.share.persister import PersisterStateBatch, ShareGroupState, ShareStateSummary
from odradek.coordinator.share.share_coordinator_config import ShareCoordinatorConfig
from odradek.coordinator.share.share_coordinator_record import (
    SNAPSHOT_TYPE,
    UPDATE_TYPE,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateValue,
)
from odradek.coordinator.share.state_batch_combiner import combine_state_batches
from odradek.protocol.generated.error_codes import ErrorCode

Key = tuple[str, UUID, int]
UNINITIALIZED_EPOCH = 0  # Kafka's ShareGroupOffset.UNINITIALIZED_EPOCH: an initialized state's leader epoch


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """The state of one share-partition (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[PersisterStateBatch, ...]
    create_timestamp: int = -1
    write_timestamp: int = -1
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareCoordinatorResult:
    """What an operation answers: ``records`` to append (then replay), ``response`` once they
    are written (the operation's error is NONE only if the append succeeds too)."""

    records: tuple[ShareStateRecord, ...]
    response: object


class ShareCoordinatorShard:
    def __init__(self, partition: int, config: ShareCoordinatorConfig, clock) -> None:
        self.partition = partition
        self.config = config
        self.clock = clock
        self.states: dict[Key, ShareGroupOffset] = {}
        self.leader_epochs: dict[Key, int] = {}
        self.state_epochs: dict[Key, int] = {}
        self.update_counts: dict[Key, int] = {}

    # --- replay -------------------------------------------------------------------------------
    def replay(self, record: ShareStateRecord) -> None:
        """Apply one record of the partition (written here, or read back by the loader)."""
        key = record.key
        value = record.value
        if value is None:
            if record.record_type == SNAPSHOT_TYPE:
                for table in (self.states, self.leader_epochs, self.state_epochs, self.update_counts):
                    table.pop(key, None)
            return
        if record.record_type == SNAPSHOT_TYPE:
            self._raise(self.leader_epochs, key, value.leader_epoch)
            self._raise(self.state_epochs, key, value.state_epoch)
            self.states[key] = ShareGroupOffset(value.snapshot_epoch, value.state_epoch, value.leader_epoch,
                                                value.start_offset, value.state_batches,
                                                value.create_timestamp, value.write_timestamp,
                                                value.delivery_complete_count)
            if self.update_counts.get(key, 0) >= self.config.snapshot_update_records_per_snapshot:
                self.update_counts[key] = 0
        elif record.record_type == UPDATE_TYPE:
            self._raise(self.leader_epochs, key, value.leader_epoch)
            self.states[key] = _merge(self.states.get(key), value)
            self.update_counts[key] = self.update_counts[key] + 1 if key in self.update_counts else 0

    @staticmethod
    def _raise(table: dict[Key, int], key: Key, epoch: int) -> None:
        if key not in table or table[key] < epoch:
            table[key] = epoch

    # --- operations -----------------------------------------------------------------------------
    def initialize(self, key: Key, state_epoch: int, start_offset: int) -> ShareCoordinatorResult:
        """InitializeShareGroupState: ``response`` an ErrorCode."""
        error = self._check(key, None, state_epoch)
        if error is not None:
            return ShareCoordinatorResult((), error)
        current = self.states.get(key)
        now = self.clock.milliseconds()
        value = ShareSnapshotValue(current.snapshot_epoch + 1 if current is not None else 0, state_epoch,
                                   UNINITIALIZED_EPOCH, start_offset, now, now, (),
                                   0 if start_offset >= 0 else -1)
        return ShareCoordinatorResult((ShareStateRecord(SNAPSHOT_TYPE, *key, value),), ErrorCode.NONE)

    def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: Sequence[PersisterStateBatch],
              delivery_complete_count: int = -1) -> ShareCoordinatorResult:
        """WriteShareGroupState: ``response`` an ErrorCode."""
        current = self.states.get(key)
        if current is None:  # uninitialized: the write creates the state (see the module)
            now = self.clock.milliseconds()
            value = ShareSnapshotValue(0, state_epoch, leader_epoch, start_offset, now, now,
                                       combine_state_batches((), batches, start_offset),
                                       delivery_complete_count)
            return ShareCoordinatorResult((ShareStateRecord(SNAPSHOT_TYPE, *key, value),), ErrorCode.NONE)
        error = self._check(key, leader_epoch, state_epoch)
        if error is not None:
            return ShareCoordinatorResult((), error)
        record = self._state_record(key, current, start_offset, current.leader_epoch, batches,
                                    delivery_complete_count)
        return ShareCoordinatorResult((record,), ErrorCode.NONE)

    def read(self, key: Key, leader_epoch: int) -> ShareCoordinatorResult:
        """ReadShareGroupState: ``response`` a ShareGroupState."""
        current = self.states.get(key)
        if current is None:
            return ShareCoordinatorResult((), ShareGroupState(ErrorCode.NONE, 0, -1, (), -1))
        fence = self.leader_epochs.get(key)
        if fence is not None and fence > leader_epoch:
            return ShareCoordinatorResult((), ShareGroupState(ErrorCode.FENCED_LEADER_EPOCH, 0, -1, ()))
        answer = ShareGroupState(ErrorCode.NONE, current.state_epoch, current.start_offset, current.batches,
                                 current.leader_epoch)
        if leader_epoch == -1 or fence == leader_epoch:
            return ShareCoordinatorResult((), answer)
        record = self._state_record(key, current, current.start_offset, leader_epoch, (),
                                    current.delivery_complete_count)
        return ShareCoordinatorResult((record,), answer)

    def read_summary(self, key: Key) -> ShareStateSummary:
        """ReadShareGroupStateSummary; nothing written."""
        current = self.states.get(key)
        if current is None:
            return ShareStateSummary(ErrorCode.NONE, 0, -1)
        return ShareStateSummary(ErrorCode.NONE, current.state_epoch, current.start_offset,
                                 current.leader_epoch, current.delivery_complete_count)

    def delete(self, key: Key) -> ShareCoordinatorResult:
        """DeleteShareGroupState: ``response`` an ErrorCode."""
        if key not in self.states:
            return ShareCoordinatorResult((), ErrorCode.NONE)
        return ShareCoordinatorResult((ShareStateRecord(SNAPSHOT_TYPE, *key, None),), ErrorCode.NONE)

    # --- helpers --------------------------------------------------------------------------------
    def _check(self, key: Key, leader_epoch: int | None, state_epoch: int) -> ErrorCode | None:
        """The fencing of a write (``leader_epoch`` None: an initialize, not checked)."""
        stored_leader = self.leader_epochs.get(key)
        if leader_epoch is not None and leader_epoch != -1 and stored_leader is not None and stored_leader > leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        stored_state = self.state_epochs.get(key)
        if state_epoch != -1 and stored_state is not None and stored_state > state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        return None

    def _state_record(self, key: Key, current: ShareGroupOffset, start_offset: int, leader_epoch: int,
                      batches: Sequence[PersisterStateBatch], delivery_complete_count: int) -> ShareStateRecord:
        """A ShareSnapshot once the key's updates reached the limit, else a ShareUpdate (Kafka's
        generateShareStateRecord)."""
        if self.update_counts.get(key, 0) >= self.config.snapshot_update_records_per_snapshot:
            start = current.start_offset if start_offset == -1 else start_offset
            now = self.clock.milliseconds()
            value = ShareSnapshotValue(current.snapshot_epoch + 1, current.state_epoch, leader_epoch, start, now, now,
                                       combine_state_batches(current.batches, batches, start),
                                       delivery_complete_count)
            return ShareStateRecord(SNAPSHOT_TYPE, *key, value)
        value = ShareUpdateValue(current.snapshot_epoch, leader_epoch, start_offset,
                                 combine_state_batches((), batches, start_offset), delivery_complete_count)
        return ShareStateRecord(UPDATE_TYPE, *key, value)


def _merge(current: ShareGroupOffset | None, update: ShareUpdateValue) -> ShareGroupOffset:
    """A ShareUpdate applied to the state (Kafka's ShareCoordinatorShard.merge)."""
    if current is None:
        return ShareGroupOffset(update.snapshot_epoch, 0, update.leader_epoch, update.start_offset,
                                update.state_batches, delivery_complete_count=update.delivery_complete_count)
    start = current.start_offset if update.start_offset == -1 else update.start_offset
    leader = current.leader_epoch if update.leader_epoch == -1 else update.leader_epoch
    return ShareGroupOffset(current.snapshot_epoch, current.state_epoch, leader, start,
                            combine_state_batches(current.batches, update.state_batches, start),
                            current.create_timestamp, current.write_timestamp, update.delivery_complete_count)
