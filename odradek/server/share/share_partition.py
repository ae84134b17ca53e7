"""``SharePartition``: the state of one share-partition (share group × topic partition) on the
partition leader (KIP-932; Kafka 4.2's share/ SharePartition). Sans-I/O: time from a clock,
lock deadlines in a ``TimerQueue``, durability through ``StateUpdate``s the caller writes
(``share_partition_io.py`` is that async edge).

Public API (what SharePartitionManager and the ShareFetch/ShareAcknowledge handlers call):

``SharePartition(group_id, topic_id, partition, leader_epoch=, config=, clock=, timers=)``
    EMPTY until ``initialize``. ``timers`` may be shared between share partitions; the
    functions it pops must be called and return a ``StateUpdate`` (lock expiry) or None.
``initialize(read_state, log_start_offset=, high_watermark=, offset_for_timestamp=)``
    Load a ReadShareGroupState answer: ACKNOWLEDGED/ARCHIVED runs stay so, anything else
    is AVAILABLE with its delivery count, offsets not in any run (never delivered) AVAILABLE
    with count 0; start offset -1 applies share.auto.offset.reset (``auto_offset_reset.py``).
    Answers NONE and becomes ACTIVE, or the read's error and becomes FAILED (FENCED for
    FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH).
``error_code()``
    NONE while ACTIVE; what to answer for this partition otherwise.
``next_fetch_offset()``, ``can_acquire_records()``
    Where to read the log from, and whether an acquisition could take anything.
``acquire(member_id, batches, max_records, aborted_transactions=None)``
    -> list[AcquiredRecords]. ``batches``: the headers of the batches a log read from
    ``next_fetch_offset()`` returned, in order. Takes AVAILABLE records in them for the member:
    cached in-flight batches wholly inside the read whole, others offset by offset, new
    records whole log batches at a time, until ``max_records`` is reached (a soft limit, as
    Kafka's batch_optimized acquire mode) and never beyond group.share.partition.max.record.locks
    past the start offset. Delivery count +1, one acquisition lock
    (group.share.record.lock.duration.ms) for all. With ``aborted_transactions``
    (read_committed: the fetch's (producer_id, first_offset) list) aborted records are
    ARCHIVED and left out. Offsets between ``next_offset`` and the first batch read do not exist
    in the log and are ARCHIVED. Nothing is written.
``acknowledge(member_id, batches)`` -> StateUpdate
    All or nothing: ``update.error`` is INVALID_REQUEST (malformed or overlapping batches,
    unknown type) or INVALID_RECORD_STATE (an offset outside the window or not ACQUIRED by this
    member) with nothing changed; otherwise types 1 ACCEPT → ACKNOWLEDGED, 2 RELEASE → AVAILABLE
    (ARCHIVED at group.share.delivery.count.limit), 3 REJECT and 0 GAP → ARCHIVED begin as
    pending transitions; 4 RENEW gives the records a fresh lock at once and writes nothing.
``release_acquired_records(member_id)`` -> StateUpdate
    RELEASE every record the member holds (it left, or its share session closed).
``complete_update(update, error)`` -> ErrorCode
    Report the result of writing ``update`` (``ErrorCode.NONE`` when nothing was written):
    success commits the transitions and advances the start offset; an error rolls them back
    (records ACQUIRED again by their member, released at once if their lock expired
    meanwhile); FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH also fence the partition. Answer the
    acknowledgement with the returned code, only after this call.
``persisted_view(update)`` -> (start offset, delivery complete count)
    What a WriteShareGroupState of ``update`` carries, computed when the write is sent (after
    the writes before it completed): the start offset as it will stand once ``update``
    commits (its own pending ACKNOWLEDGED/ARCHIVED records count as settled, those of later
    updates do not), so the persisted start offset never trails the cache (Kafka 4.2 sends
    the start offset before the move and relies on a later write; DescribeShareGroupOffsets
    then shows the old start offset until one comes), and Kafka's deliveryCompleteCount
    (KIP-1226): the records at or above that start offset in the window that are ACKNOWLEDGED
    or ARCHIVED (pending transitions counted by their new state, as Kafka counts them when the
    transition starts).
``update_log_start_offset(offset)``, ``close()``, and read-only views ``start_offset``,
``end_offset``, ``state_epoch``, ``state_at(offset)``, ``in_flight()``.

Group configs: ``config`` is read from ``config_provider()`` when one is given (the share
group's configs as they stand now, ``SharePartitionManager.partition_config``), so a change of
share.record.lock.duration.ms applies to the next acquisition and renewal, as Kafka's
SharePartition reads the lock duration and delivery count limit from the group config each
time; share.auto.offset.reset matters only at ``initialize``.

Invariants (``check()``; the property tests run it after every step): the cache's
(``in_flight_cache.py``); an ACQUIRED record has one member and a live lock; no record is
ACQUIRED by two members (a record has one state).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from uuid import UUID

from odradek.coordinator.group.timer_queue import TimerQueue
from odradek.coordinator.share.persister import ShareGroupState
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.share.aborted_transactions import aborted_offset_runs
from odradek.server.share.acquisition_lock import AcquisitionLock, AcquisitionLocks
from odradek.server.share.auto_offset_reset import reset_start_offset
from odradek.server.share.in_flight_cache import InFlightCache
from odradek.server.share.in_flight_state import InFlightBatch, InFlightState
from odradek.server.share.record_state import (TERMINAL_STATES, AcknowledgeType, RecordState,
                                               SharePartitionState)
from odradek.server.share.share_types import (AcknowledgementBatch, AcquiredRecords,
                                              FetchedBatch, SharePartitionConfig)
from odradek.server.share.state_update import StateUpdate
from odradek.server.share.offset_runs import overlap_kind, run_list_add

__all__ = ["SharePartition", "FENCING_ERRORS"]

FENCING_ERRORS = frozenset({ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH})
_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)
_PERSISTED_STATES = {0: RecordState.AVAILABLE, 1: RecordState.AVAILABLE,
                     2: RecordState.ACKNOWLEDGED, 4: RecordState.ARCHIVED}


class SharePartition:
    def __init__(self, group_id: str, topic_id: UUID, partition: int, *, leader_epoch: int,
                 config: SharePartitionConfig, clock, timers: TimerQueue,
                 config_provider: Callable[[], SharePartitionConfig] | None = None) -> None:
        self.group_id, self.topic_id, self.partition = group_id, topic_id, partition
        self.leader_epoch = leader_epoch
        self._config = config
        self._config_provider = config_provider
        self._clock = clock
        self._state = SharePartitionState.EMPTY
        self._error = ErrorCode.NONE
        self.state_epoch = 0
        self._cache = InFlightCache()
        self._locks = AcquisitionLocks(timers, f"share-lock:{group_id}:{topic_id}:{partition}:",
                                       self._on_lock_expiry)
        self._update_ids = itertools.count(1)

    # --- views ---------------------------------------------------------------------------

    @property
    def config(self) -> SharePartitionConfig:
        """The group configs now (module docstring: Group configs)."""
        return self._config if self._config_provider is None else self._config_provider()

    @config.setter
    def config(self, config: SharePartitionConfig) -> None:
        self._config, self._config_provider = config, None

    @property
    def partition_state(self) -> SharePartitionState:
        return self._state

    @property
    def start_offset(self) -> int:
        return self._cache.start_offset

    @property
    def end_offset(self) -> int:
        """Kafka's SPEO: the last in-flight offset (the start offset while nothing is)."""
        return max(self._cache.next_offset - 1, self._cache.start_offset)

    def error_code(self) -> ErrorCode:
        if self._state is SharePartitionState.ACTIVE:
            return ErrorCode.NONE
        if self._state is SharePartitionState.FENCED:
            return ErrorCode.FENCED_STATE_EPOCH
        if self._state is SharePartitionState.FAILED:
            return self._error
        return ErrorCode.LEADER_NOT_AVAILABLE  # still loading: retriable

    def state_at(self, offset: int) -> InFlightState | None:
        """A copy of ``offset``'s state (None outside the window)."""
        state = self._cache.state_at(offset)
        return None if state is None else state.copy()

    def in_flight(self) -> list[tuple[int, int, RecordState, int, str | None]]:
        """``(first, last, state, delivery count, member)`` runs of the window."""
        out: list[tuple[int, int, RecordState, int, str | None]] = []
        for batch in self._cache:
            for lo, hi, st in batch.runs(batch.first_offset, batch.last_offset):
                key = (st.state, st.delivery_count, st.member_id)
                if out and out[-1][1] + 1 == lo and out[-1][2:] == key:
                    out[-1] = (out[-1][0], hi, *key)
                else:
                    out.append((lo, hi, *key))
        return out

    def next_fetch_offset(self) -> int:
        available = self._cache.first_available()
        return self._cache.next_offset if available is None else available

    def can_acquire_records(self) -> bool:
        cache = self._cache
        return self._state is SharePartitionState.ACTIVE and (
            cache.first_available() is not None
            or cache.next_offset - cache.start_offset < self.config.max_record_locks)

    # --- initialization ------------------------------------------------------------------

    def mark_initializing(self) -> None:
        self._state = SharePartitionState.INITIALIZING

    def initialize(self, read_state: ShareGroupState, *, log_start_offset: int,
                   high_watermark: int,
                   offset_for_timestamp: Callable[[int], int | None] | None = None) -> ErrorCode:
        if read_state.error is not ErrorCode.NONE:
            self._fail(read_state.error)
            return read_state.error
        start = read_state.start_offset
        if start < 0:
            start = reset_start_offset(self.config.auto_offset_reset,
                                       log_start_offset=log_start_offset,
                                       high_watermark=high_watermark,
                                       now_ms=self._clock.milliseconds(),
                                       offset_for_timestamp=offset_for_timestamp)
        self.state_epoch = read_state.state_epoch
        self._cache.reset(start)
        for run in sorted(read_state.batches, key=lambda b: b.first_offset):
            lo = max(run.first_offset, self._cache.next_offset)
            if run.last_offset < lo:
                continue
            if lo > self._cache.next_offset:  # never delivered: available, count 0
                self._cache.append(lo - 1, InFlightState(RecordState.AVAILABLE, 0))
            state = _PERSISTED_STATES.get(run.delivery_state, RecordState.AVAILABLE)
            self._cache.append(run.last_offset, InFlightState(state, run.delivery_count))
        self._cache.advance_start()
        self._state = SharePartitionState.ACTIVE
        return ErrorCode.NONE

    def _fail(self, error: ErrorCode) -> None:
        self._error = error
        self._state = (SharePartitionState.FENCED if error in FENCING_ERRORS
                       else SharePartitionState.FAILED)
        self._locks.cancel_all()

    def close(self) -> None:
        """Stop the locks' timers (the partition is dropped: leadership moved, group deleted)."""
        self._locks.cancel_all()

    def update_log_start_offset(self, offset: int) -> None:
        """Records below the log start offset are gone: move the window past them."""
        self._cache.drop_below(offset)

    # --- acquisition ---------------------------------------------------------------------

    def acquire(self, member_id: str, batches: Sequence[FetchedBatch], max_records: int,
                aborted_transactions: Sequence[tuple[int, int]] | None = None,
                ) -> list[AcquiredRecords]:
        if self._state is not SharePartitionState.ACTIVE or not batches or max_records <= 0:
            return []
        lo = max(batches[0].base_offset, self._cache.start_offset)
        hi = batches[-1].last_offset
        if hi < lo:
            return []
        aborted = ([] if aborted_transactions is None
                   else aborted_offset_runs(batches, aborted_transactions))
        lock = self._locks.new(self._clock.milliseconds() + self.config.record_lock_duration_ms)
        acquired: list[AcquiredRecords] = []
        remaining = self._acquire_cached(member_id, lo, min(hi, self._cache.next_offset - 1),
                                         max_records, lock, aborted, acquired)
        if remaining > 0 and hi >= self._cache.next_offset:
            self._acquire_new(member_id, batches, lo, hi, remaining, lock, aborted, acquired)
        self._locks.forget_if_empty(lock)
        self._cache.advance_start()
        return acquired

    def _acquire_cached(self, member_id: str, lo: int, hi: int, remaining: int,
                        lock: AcquisitionLock, aborted: list[tuple[int, int]],
                        acquired: list[AcquiredRecords]) -> int:
        for batch in self._cache.overlapping(lo, hi) if lo <= hi else ():
            if remaining <= 0:
                break
            if batch.offset_states is None and batch.covers(lo, hi):
                kind = overlap_kind(aborted, batch.first_offset, batch.last_offset)
                if kind != "some":
                    remaining -= self._acquire_run(member_id, batch.first_offset, batch.last_offset,
                                                   batch.batch_state, lock, kind == "all", acquired)
                    continue
            if not any(_acquirable(st) for _, _, st in batch.runs(lo, hi)):
                continue
            batch.split()
            for offset, _, st in batch.runs(lo, hi):
                if remaining <= 0:
                    break
                remaining -= self._acquire_run(member_id, offset, offset, st, lock,
                                               overlap_kind(aborted, offset, offset) == "all",
                                               acquired)
        return remaining

    def _acquire_run(self, member_id: str, lo: int, hi: int, st: InFlightState,
                     lock: AcquisitionLock, is_aborted: bool,
                     acquired: list[AcquiredRecords]) -> int:
        """Acquire one state covering ``[lo, hi]`` if AVAILABLE; the records it counted."""
        if not _acquirable(st):
            return 0
        st.acquire(member_id, lock.lock_id)
        if is_aborted:
            st.set_unacquired(RecordState.ARCHIVED)
        else:
            run_list_add(lock.runs, lo, hi)
            _add_acquired(acquired, lo, hi, st.delivery_count)
        return hi - lo + 1

    def _acquire_new(self, member_id: str, batches: Sequence[FetchedBatch], lo: int, hi: int,
                     remaining: int, lock: AcquisitionLock, aborted: list[tuple[int, int]],
                     acquired: list[AcquiredRecords]) -> None:
        cache = self._cache
        first = max(lo, cache.next_offset)
        if first > cache.next_offset:  # not in the log (compacted, or below its start)
            cache.append(first - 1, InFlightState(RecordState.ARCHIVED, 0))
        last = min(hi, cache.start_offset + self.config.max_record_locks - 1)
        want = first + remaining - 1
        if want < last:  # whole log batches: end with the batch holding the last one wanted
            last = min(last, next((b.last_offset for b in batches
                                   if b.base_offset <= want <= b.last_offset), want))
        offset = first
        for a_lo, a_hi in aborted + [(last + 1, last + 1)]:
            a_lo, a_hi = min(max(a_lo, offset), last + 1), min(a_hi, last)
            if a_lo > offset:  # delivered part
                cache.append(a_lo - 1, InFlightState(RecordState.ACQUIRED, 1, member_id,
                                                     lock.lock_id))
                run_list_add(lock.runs, offset, a_lo - 1)
                _add_acquired(acquired, offset, a_lo - 1, 1)
                offset = a_lo
            if a_lo <= a_hi:  # aborted part
                cache.append(a_hi, InFlightState(RecordState.ARCHIVED, 1))
                offset = a_hi + 1
            if offset > last:
                break

    # --- acknowledgement -----------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> StateUpdate:
        update = self._new_update(committed=False)
        if self._state is not SharePartitionState.ACTIVE:
            update.error = self.error_code()
            return update
        update.error = self._validate_acknowledgements(member_id, batches)
        if update.error is not ErrorCode.NONE:
            return update
        renew: list[AcquisitionLock] = []
        for ack in batches:
            for batch in self._cache.overlapping(ack.first_offset, ack.last_offset):
                whole = (batch.offset_states is None and len(ack.acknowledge_types) == 1
                         and batch.covers(ack.first_offset, ack.last_offset))
                if not whole:
                    batch.split()
                for lo, hi, st in batch.runs(ack.first_offset, ack.last_offset):
                    self._transition(st, lo, hi, AcknowledgeType(ack.type_at(lo)), update, renew)
        update.start_offset = self._cache.start_offset
        return update

    def _validate_acknowledgements(self, member_id: str,
                                   batches: Sequence[AcknowledgementBatch]) -> ErrorCode:
        previous_last = -1
        for ack in batches:
            size = ack.last_offset - ack.first_offset + 1
            if (size <= 0 or ack.first_offset <= previous_last
                    or len(ack.acknowledge_types) not in (1, size)
                    or any(t not in _ACK_TYPES for t in ack.acknowledge_types)):
                return ErrorCode.INVALID_REQUEST
            previous_last = ack.last_offset
            if ack.first_offset < self._cache.start_offset or ack.last_offset >= self._cache.next_offset:
                return ErrorCode.INVALID_RECORD_STATE
            for batch in self._cache.overlapping(ack.first_offset, ack.last_offset):
                if any(not st.is_acquired_by(member_id)
                       for _, _, st in batch.runs(ack.first_offset, ack.last_offset)):
                    return ErrorCode.INVALID_RECORD_STATE
        return ErrorCode.NONE

    def _transition(self, st: InFlightState, lo: int, hi: int, ack_type: AcknowledgeType,
                    update: StateUpdate, renew: list[AcquisitionLock]) -> None:
        if ack_type is AcknowledgeType.RENEW:
            if not renew:
                renew.append(self._locks.new(self._clock.milliseconds()
                                             + self.config.record_lock_duration_ms))
            st.lock_id = renew[0].lock_id
            run_list_add(renew[0].runs, lo, hi)
            return
        st.start_transition(self._released_or(ack_type, st), update.update_id)
        update.note(lo, hi, st)

    def _released_or(self, ack_type: AcknowledgeType, st: InFlightState) -> RecordState:
        if ack_type is AcknowledgeType.ACCEPT:
            return RecordState.ACKNOWLEDGED
        if ack_type is AcknowledgeType.RELEASE:
            return (RecordState.ARCHIVED if st.delivery_count >= self.config.delivery_count_limit
                    else RecordState.AVAILABLE)
        return RecordState.ARCHIVED  # REJECT, GAP

    def release_acquired_records(self, member_id: str) -> StateUpdate:
        update = self._new_update(committed=False)
        if self._state is not SharePartitionState.ACTIVE:
            update.error = self.error_code()
            return update
        for batch in self._cache:
            for lo, hi, st in batch.runs(batch.first_offset, batch.last_offset):
                if st.is_acquired_by(member_id):
                    self._transition(st, lo, hi, AcknowledgeType.RELEASE, update, [])
        update.start_offset = self._cache.start_offset
        return update

    # --- completion and expiry -----------------------------------------------------------

    def complete_update(self, update: StateUpdate, error: ErrorCode) -> ErrorCode:
        if update.error is not ErrorCode.NONE:
            return update.error
        commit = error is ErrorCode.NONE
        rearm: list[AcquisitionLock] = []
        if not update.committed:
            for lo, hi in update.runs:
                for batch in self._cache.overlapping(lo, hi):
                    for _, _, st in batch.runs(lo, hi):
                        if st.pending == update.update_id:
                            st.complete_transition(commit)
                            if not commit and st.state is RecordState.ACQUIRED:
                                self._rearm_if_expired(st, batch, rearm)
        if error in FENCING_ERRORS:
            self._fail(error)
        elif commit:
            self._cache.advance_start()
        return error

    def persisted_view(self, update: StateUpdate) -> tuple[int, int]:
        """``(start offset, delivery complete count)`` to write with ``update`` (module
        docstring). One pass over the window: O(batches + split offsets)."""
        start, settled_prefix, complete = self._cache.start_offset, True, 0
        for batch in self._cache:
            for lo, hi, st in batch.runs(batch.first_offset, batch.last_offset):
                terminal = st.state in TERMINAL_STATES
                if settled_prefix and terminal and st.pending in (None, update.update_id):
                    start = hi + 1
                    continue
                settled_prefix = False
                if terminal:
                    complete += hi - lo + 1
        if settled_prefix:
            start = max(start, self._cache.next_offset)
        return start, complete

    def _rearm_if_expired(self, st: InFlightState, batch: InFlightBatch,
                          rearm: list[AcquisitionLock]) -> None:
        """A rolled-back record whose lock fired meanwhile gets a lock expiring now (one
        for the whole rollback), so the next timer run releases it."""
        if self._locks.is_live(st.lock_id):
            return
        if not rearm:
            rearm.append(self._locks.new(self._clock.milliseconds()))
        st.lock_id = rearm[0].lock_id
        runs = rearm[0].runs
        if not runs or runs[-1][1] < batch.first_offset:
            run_list_add(runs, batch.first_offset, batch.last_offset)

    def _on_lock_expiry(self, lock: AcquisitionLock) -> StateUpdate | None:
        """Kafka's releaseAcquisitionLockOnTimeout: ACQUIRED → AVAILABLE, or ARCHIVED at the
        delivery count limit; committed at once, written best effort."""
        if self._state is not SharePartitionState.ACTIVE:
            return None
        update = self._new_update(committed=True)
        for lo, hi in lock.runs:
            for batch in self._cache.overlapping(lo, hi):
                for r_lo, r_hi, st in batch.runs(lo, hi):
                    if (st.state is RecordState.ACQUIRED and st.pending is None
                            and st.lock_id == lock.lock_id):
                        if batch.offset_states is None:
                            r_lo, r_hi = batch.first_offset, batch.last_offset
                        st.set_unacquired(self._released_or(AcknowledgeType.RELEASE, st))
                        update.note(r_lo, r_hi, st)
        if not update.batches:
            return None
        self._cache.advance_start()
        update.start_offset = self._cache.start_offset
        return update

    def _new_update(self, committed: bool) -> StateUpdate:
        return StateUpdate(next(self._update_ids), committed, self.state_epoch,
                           self.leader_epoch, self._cache.start_offset)

    def check(self) -> None:
        """Assert the invariants of the module docstring."""
        self._cache.check()
        for batch in self._cache:
            for _, _, st in batch.runs(batch.first_offset, batch.last_offset):
                acquired = st.state is RecordState.ACQUIRED
                assert (st.member_id is not None) == acquired, st
                assert (st.lock_id is not None) == acquired, st
                if acquired and st.pending is None:
                    assert self._locks.is_live(st.lock_id), st


def _acquirable(st: InFlightState) -> bool:
    return st.state is RecordState.AVAILABLE and st.pending is None


def _add_acquired(acquired: list[AcquiredRecords], lo: int, hi: int, count: int) -> None:
    if acquired and acquired[-1].last_offset + 1 == lo and acquired[-1].delivery_count == count:
        acquired[-1] = AcquiredRecords(acquired[-1].first_offset, hi, count)
    else:
        acquired.append(AcquiredRecords(lo, hi, count))
