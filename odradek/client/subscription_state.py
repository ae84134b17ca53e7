"""Which partitions a consumer reads, and where it stands in each.

For every assigned partition the consumer keeps a ``PartitionState``: its *position* (the
offset of the next record to return; None until known), whether it is paused, a pending
offset reset (``"earliest"``/``"latest"``, or a timestamp from ``seek_to_time``), and what the
last fetch said about the log (high watermark, log start, last stable offset).

A partition is *fetchable* when it is assigned, not paused and has a position. Positions
come from ``seek``, from a group's committed offset, or from a reset (ListOffsets). Assigning
keeps the state of partitions that stay assigned; a group consumer replaces the assignment
on each rebalance through the same ``assign``.
"""

from __future__ import annotations

from odradek.client.topic_partition import TopicPartition

EARLIEST = "earliest"
LATEST = "latest"
NONE = "none"
RESET_STRATEGIES = (EARLIEST, LATEST, NONE)


class PartitionState:
    __slots__ = (
        "error",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "paused",
        "position",
        "reset",
        "retry_at",
    )

    def __init__(self) -> None:
        self.position: int | None = None
        self.paused = False
        self.reset: str | int | None = None  # a strategy, or a timestamp to look up
        self.high_watermark = -1
        self.log_start_offset = -1
        self.last_stable_offset = -1
        self.retry_at = 0.0  # loop time before which the partition is not fetched again
        self.error: Exception | None = None  # raised by the next poll

    def __repr__(self) -> str:
        return f"PartitionState(position={self.position}, paused={self.paused}, reset={self.reset})"


class SubscriptionState:
    def __init__(self, default_reset: str = LATEST) -> None:
        if default_reset not in RESET_STRATEGIES:
            raise ValueError(f"auto_offset_reset must be one of {RESET_STRATEGIES}, not {default_reset!r}")
        self.default_reset = default_reset
        self.assignment: dict[TopicPartition, PartitionState] = {}

    def assign(self, partitions) -> None:
        """Make ``partitions`` the assignment, keeping the state of those already assigned."""
        new = {}
        for tp in partitions:
            tp = TopicPartition(*tp)
            new[tp] = self.assignment.get(tp) or PartitionState()
        self.assignment = new

    def state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self.assignment[tp]
        except KeyError:
            raise ValueError(f"{tp} is not assigned") from None

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"offset {offset} is negative")
        state = self.state(tp)
        state.position = offset
        state.reset = None
        state.error = None

    def request_reset(self, tp: TopicPartition, how: str | int) -> None:
        """Forget the position; the next poll looks it up (``"earliest"``, ``"latest"``, or a
        timestamp in ms for the first record at or after it)."""
        state = self.state(tp)
        state.position = None
        state.reset = how
        state.error = None

    def positions_missing(self) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items() if s.position is None]

    def fetchable(self, now: float) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items()
                if s.position is not None and not s.paused and s.retry_at <= now and s.error is None]

    def pause(self, partitions) -> None:
        for tp in partitions:
            self.state(TopicPartition(*tp)).paused = True

    def resume(self, partitions) -> None:
        for tp in partitions:
            self.state(TopicPartition(*tp)).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self.assignment.items() if s.paused}

    def topics(self) -> set[str]:
        return {tp.topic for tp in self.assignment}
