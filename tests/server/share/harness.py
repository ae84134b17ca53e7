"""A SharePartition on a fake clock and a TimerQueue, with a persister-shaped dict for tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.coordinator.group.timer_queue import TimerQueue
from odradek.coordinator.share.persister import ShareGroupState
from odradek.coordinator.share.state_batch_combiner import combine_state_batches
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.share.record_state import RecordState
from odradek.server.share.share_partition import SharePartition
from odradek.server.share.share_types import AcknowledgementBatch, SharePartitionConfig
from odradek.storage.clock import FakeClock

TOPIC_ID = uuid.UUID(int=7)
LOCK_MS = 30_000


@dataclass(frozen=True)
class Batch:
    """A fetched batch header stand-in (``share_types.FetchedBatch``)."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


def log(first: int, last: int, size: int = 1) -> list[Batch]:
    """Log batches of ``size`` records covering ``[first, last]``."""
    return [Batch(o, min(o + size - 1, last)) for o in range(first, last + 1, size)]


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, tuple(types))


class Harness:
    def __init__(self, *, start_offset: int = 0, batches=(), state_epoch: int = 0,
                 **config) -> None:
        self.clock = FakeClock()
        self.timers = TimerQueue()
        self.config = SharePartitionConfig(**{"record_lock_duration_ms": LOCK_MS, **config})
        # The persisted state as the share coordinator would hold it.
        self.stored_start = start_offset
        self.stored_batches = tuple(batches)
        self.state_epoch = state_epoch
        self.sp = self.new_partition()

    def new_partition(self, *, log_start_offset: int = 0, high_watermark: int = 1000,
                      leader_epoch: int = 0) -> SharePartition:
        sp = SharePartition("g", TOPIC_ID, 0, leader_epoch=leader_epoch, config=self.config,
                            clock=self.clock, timers=self.timers)
        read = ShareGroupState(ErrorCode.NONE, self.state_epoch, self.stored_start,
                               self.stored_batches)
        assert sp.initialize(read, log_start_offset=log_start_offset,
                             high_watermark=high_watermark) is ErrorCode.NONE
        return sp

    def write(self, update, error: ErrorCode = ErrorCode.NONE) -> ErrorCode:
        """Persist ``update`` (unless ``error``) and report the result, as the edge does."""
        if update.needs_write and error is ErrorCode.NONE:
            self.stored_start = max(self.stored_start, update.start_offset)
            self.stored_batches = combine_state_batches(self.stored_batches, update.batches,
                                                        self.stored_start)
        return self.sp.complete_update(update, error)

    def acknowledge(self, member: str, *acks: AcknowledgementBatch,
                    error: ErrorCode = ErrorCode.NONE) -> ErrorCode:
        return self.write(self.sp.acknowledge(member, acks), error)

    def advance(self, ms: int) -> list:
        """Move the clock, run the due lock timers and persist what they changed."""
        self.clock.advance(ms)
        updates = [fn() for fn in self.timers.pop_due(self.clock.milliseconds())]
        for update in updates:
            if update is not None:
                self.write(update)
        return [u for u in updates if u is not None]

    def states(self, first: int, last: int) -> list[tuple[RecordState, int]]:
        out = []
        for offset in range(first, last + 1):
            st = self.sp.state_at(offset)
            out.append(None if st is None else (st.state, st.delivery_count))
        return out
