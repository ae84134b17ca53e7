"""``StateUpdate``: a share partition's change that the persister must make durable.

Every change that must survive a leader change (acknowledgements, releases, lock expiry)
becomes a WriteShareGroupState of the changed offset runs (Kafka's SharePartition
writeShareGroupState). Acquisitions are not written: a new leader finds acquired records
AVAILABLE again.

Two kinds:
- a *transition* (``committed`` False: acknowledge, release_acquired_records): the records show
  their new state at once but are held (``InFlightState.pending``) until the edge reports the
  write's result to ``SharePartition.complete_update``: success commits, an error rolls back;
  only then is the acknowledgement answered.
- a *committed* change (``committed`` True: lock expiry): already in force; the write is best
  effort, as in Kafka, and its result only matters for fencing.

``batches`` are the runs to write: inclusive, ordered, with Kafka's RecordState ids;
``start_offset`` is the share-partition start offset as it stood when the update was made
(what is written is computed when the write is sent: ``SharePartition.persisted_view``); ``runs`` are the offset runs
whose pending transitions belong to ``update_id``. ``error`` is set when the update failed
before any write (nothing changed, nothing to write).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.coordinator.share.persister import PersisterStateBatch
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.share.in_flight_state import InFlightState
from odradek.server.share.offset_runs import run_list_add

__all__ = ["StateUpdate"]


@dataclass(slots=True)
class StateUpdate:
    update_id: int
    committed: bool
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: list[PersisterStateBatch] = field(default_factory=list)
    runs: list[tuple[int, int]] = field(default_factory=list)
    error: ErrorCode = ErrorCode.NONE

    @property
    def needs_write(self) -> bool:
        return self.error is ErrorCode.NONE and bool(self.batches)

    def note(self, lo: int, hi: int, state: InFlightState) -> None:
        """Record that ``[lo, hi]`` now has ``state`` (offsets noted in ascending order)."""
        run_list_add(self.runs, lo, hi)
        last = self.batches[-1] if self.batches else None
        if (last is not None and last.last_offset + 1 == lo
                and last.delivery_state == state.state and last.delivery_count == state.delivery_count):
            self.batches[-1] = PersisterStateBatch(last.first_offset, hi, last.delivery_state,
                                                   last.delivery_count)
        else:
            self.batches.append(PersisterStateBatch(lo, hi, int(state.state), state.delivery_count))
