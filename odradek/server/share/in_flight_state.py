"""In-flight records of a share partition: one ``InFlightState`` per batch or per offset.

Kafka's InFlightBatch and InFlightState. A batch of offsets ``[first_offset, last_offset]``
acquired together keeps ONE state (``batch_state``) while all its offsets share it; the first
operation that treats part of it differently (a partial acknowledgement, a partial
acquisition, an aborted transaction inside it, a lock renewed for some offsets) splits it
into ``offset_states``, one state per offset, for good. Exactly one of the two is set.

A state change whose durability is still being written (an acknowledgement, a release) is a
*transition*: the new state is set at once, ``pending`` names the update it belongs to and
``rollback`` keeps the old (state, delivery count, member, lock) to restore if the write fails
(Kafka's startStateTransition / completeStateTransition). A record with a pending transition
is neither acquirable nor acknowledgeable, and does not count as terminal for moving the start
offset, until the transition completes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from odradek.server.share.record_state import RecordState

__all__ = ["InFlightState", "InFlightBatch"]


@dataclass(slots=True)
class InFlightState:
    """``member_id`` and ``lock_id`` are set exactly while ``state`` is ACQUIRED."""

    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_id: int | None = None
    pending: int | None = None
    rollback: tuple[RecordState, int, str | None, int | None] | None = None

    def copy(self) -> InFlightState:
        return InFlightState(self.state, self.delivery_count, self.member_id, self.lock_id,
                             self.pending, self.rollback)

    def is_acquired_by(self, member_id: str) -> bool:
        return self.state is RecordState.ACQUIRED and self.pending is None \
            and self.member_id == member_id

    def acquire(self, member_id: str, lock_id: int) -> None:
        self.state = RecordState.ACQUIRED
        self.delivery_count += 1
        self.member_id = member_id
        self.lock_id = lock_id

    def set_unacquired(self, state: RecordState) -> None:
        """Leave ACQUIRED for ``state`` at once (lock expiry, an aborted record)."""
        self.state = state
        self.member_id = None
        self.lock_id = None

    def start_transition(self, state: RecordState, update_id: int) -> None:
        self.rollback = (self.state, self.delivery_count, self.member_id, self.lock_id)
        self.set_unacquired(state)
        self.pending = update_id

    def complete_transition(self, commit: bool) -> None:
        if not commit and self.rollback is not None:
            self.state, self.delivery_count, self.member_id, self.lock_id = self.rollback
        self.pending = None
        self.rollback = None


@dataclass(slots=True)
class InFlightBatch:
    first_offset: int
    last_offset: int
    batch_state: InFlightState | None = None
    offset_states: list[InFlightState] | None = None

    @property
    def size(self) -> int:
        return self.last_offset - self.first_offset + 1

    def split(self) -> None:
        """Give every offset its own state (a copy of the batch's, pending transition and all)."""
        if self.offset_states is None:
            assert self.batch_state is not None
            self.offset_states = [self.batch_state.copy() for _ in range(self.size)]
            self.batch_state = None

    def state_at(self, offset: int) -> InFlightState:
        if self.offset_states is None:
            return self.batch_state
        return self.offset_states[offset - self.first_offset]

    def runs(self, lo: int, hi: int) -> Iterator[tuple[int, int, InFlightState]]:
        """``(first, last, state)`` over ``[lo, hi]`` ∩ this batch: one run for a batch-level
        state, one per offset otherwise. Read-only unless the batch was split first."""
        lo, hi = max(lo, self.first_offset), min(hi, self.last_offset)
        if lo > hi:
            return
        if self.offset_states is None:
            yield lo, hi, self.batch_state
            return
        for offset in range(lo, hi + 1):
            yield offset, offset, self.offset_states[offset - self.first_offset]

    def covers(self, lo: int, hi: int) -> bool:
        """Whether ``[lo, hi]`` covers the whole batch."""
        return lo <= self.first_offset and self.last_offset <= hi

    def cut_below(self, offset: int) -> None:
        """Drop the offsets below ``offset`` (the start offset moved into this batch)."""
        if offset <= self.first_offset:
            return
        if self.offset_states is not None:
            del self.offset_states[:offset - self.first_offset]
        self.first_offset = offset
