"""The cached state of a share partition: its in-flight window (Kafka's SharePartition
cachedState, startOffset, endOffset).

The window is ``[start_offset, next_offset)``: the share-partition start offset (SPSO) is the
first offset not yet ACKNOWLEDGED or ARCHIVED, ``next_offset`` the first offset never taken
into the window (Kafka's end offset, SPEO, is ``next_offset - 1``). The window is covered
without holes by ``InFlightBatch``es (``in_flight_state.py``) kept in offset order; offsets
beyond it have never been delivered.

Invariants (checked by ``check()``, which tests call after every step):
- batches are disjoint, ordered, contiguous from ``start_offset`` to ``next_offset - 1``;
- the first batch's first offset is ``start_offset`` and its first state is not a committed
  terminal one (``advance_start`` trimmed it) — or the window is empty and
  ``start_offset == next_offset``.

Example: batches [10-14 ACKNOWLEDGED] [15-19 ACQUIRED] [20 ARCHIVED]: ``advance_start`` drops
10-14 and makes the start offset 15; once 15-19 are acknowledged it drops everything and the
start offset becomes 21, the next offset.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator

from odradek.server.share.in_flight_state import InFlightBatch, InFlightState
from odradek.server.share.record_state import TERMINAL_STATES, RecordState

__all__ = ["InFlightCache"]


def _settled(state: InFlightState) -> bool:
    return state.state in TERMINAL_STATES and state.pending is None


class InFlightCache:
    def __init__(self, start_offset: int = 0) -> None:
        self.start_offset = start_offset
        self.next_offset = start_offset
        self._batches: dict[int, InFlightBatch] = {}
        self._firsts: list[int] = []

    def __iter__(self) -> Iterator[InFlightBatch]:
        return (self._batches[first] for first in list(self._firsts))

    def __len__(self) -> int:
        return len(self._firsts)

    def reset(self, start_offset: int) -> None:
        self.__init__(start_offset)

    def append(self, last_offset: int, state: InFlightState) -> InFlightBatch:
        """Take ``[next_offset, last_offset]`` into the window with one state."""
        batch = InFlightBatch(self.next_offset, last_offset, batch_state=state)
        self._batches[batch.first_offset] = batch
        self._firsts.append(batch.first_offset)
        self.next_offset = last_offset + 1
        return batch

    def overlapping(self, lo: int, hi: int) -> list[InFlightBatch]:
        """The batches holding any offset of ``[lo, hi]``, in order."""
        i = max(bisect_right(self._firsts, lo) - 1, 0)
        found = []
        while i < len(self._firsts) and self._firsts[i] <= hi:
            batch = self._batches[self._firsts[i]]
            if batch.last_offset >= lo:
                found.append(batch)
            i += 1
        return found

    def state_at(self, offset: int) -> InFlightState | None:
        batches = self.overlapping(offset, offset)
        return batches[0].state_at(offset) if batches else None

    def first_available(self) -> int | None:
        """The lowest AVAILABLE offset with no pending transition, if any."""
        for batch in self:
            for first, _, state in batch.runs(batch.first_offset, batch.last_offset):
                if state.state is RecordState.AVAILABLE and state.pending is None:
                    return first
        return None

    def advance_start(self) -> None:
        """Move the start offset past the prefix of settled ACKNOWLEDGED/ARCHIVED records and
        forget them (Kafka's maybeUpdateCachedStateAndOffsets)."""
        while self._firsts:
            batch = self._batches[self._firsts[0]]
            first_open = next((lo for lo, _, st in batch.runs(batch.first_offset, batch.last_offset)
                               if not _settled(st)), None)
            if first_open is None:
                self._drop_first()
                self.start_offset = batch.last_offset + 1
                continue
            self._cut_first(first_open)
            break
        if not self._firsts:
            self.start_offset = self.next_offset

    def drop_below(self, offset: int) -> None:
        """Forget every offset below ``offset`` (the log start offset passed them)."""
        if offset <= self.start_offset:
            return
        while self._firsts and self._batches[self._firsts[0]].last_offset < offset:
            self._drop_first()
        if self._firsts:
            self._cut_first(offset)
        self.start_offset = offset
        self.next_offset = max(self.next_offset, offset)
        self.advance_start()

    def _drop_first(self) -> None:
        del self._batches[self._firsts.pop(0)]

    def _cut_first(self, offset: int) -> None:
        batch = self._batches[self._firsts[0]]
        if offset > batch.first_offset:
            del self._batches[batch.first_offset]
            batch.cut_below(offset)
            self._batches[offset] = batch
            self._firsts[0] = offset
        self.start_offset = batch.first_offset

    def check(self) -> None:
        """Assert the invariants of the module docstring."""
        expected = self.start_offset
        for i, batch in enumerate(self):
            assert batch.first_offset == expected, (batch, expected)
            assert batch.last_offset >= batch.first_offset
            assert (batch.batch_state is None) != (batch.offset_states is None)
            if batch.offset_states is not None:
                assert len(batch.offset_states) == batch.size
            if i == 0:
                assert not _settled(batch.state_at(batch.first_offset))
            expected = batch.last_offset + 1
        assert expected == self.next_offset, (expected, self.next_offset)
