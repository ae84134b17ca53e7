"""How far a mirror has come: per source partition, the records copied (committed on the
target by this run), the mirrored position (the next source offset to copy, as committed on
the target) and the source's end offset when last looked up.

Lag is ``source end offset - mirrored position``: records on the source that the target does
not hold yet. The source is read at read_committed, so its end offset is the last stable
offset, and a position may pass offsets that hold no record to copy (transaction markers,
aborted records); the lag then reaches 0 once the position passes them.

    progress = MirrorProgress()
    progress.start(tp, 120)                 # where this run starts (committed on the target)
    progress.committed({tp: 150}, {tp: 30})  # a transaction committed 30 records, up to 150
    progress.ends({tp: 170})
    progress.topics()["orders"].lag          # 20
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client.topic_partition import TopicPartition

__all__ = ["MirrorProgress", "PartitionProgress", "TopicProgress"]


@dataclass(slots=True)
class PartitionProgress:
    position: int  # the next source offset to copy, committed on the target
    copied: int = 0  # records this run committed to the target
    end: int | None = None  # the source's end offset when last looked up

    @property
    def lag(self) -> int | None:
        return None if self.end is None else max(self.end - self.position, 0)


@dataclass(frozen=True, slots=True)
class TopicProgress:
    """One topic's partitions summed; ``end`` and ``lag`` are None until every partition's
    end offset is known."""

    topic: str
    partitions: int
    copied: int
    position: int
    end: int | None

    @property
    def lag(self) -> int | None:
        return None if self.end is None else max(self.end - self.position, 0)

    def line(self) -> str:
        """One log line: ``orders: 1200 records copied, mirrored 5000 of source end 5035 (lag 35)``."""
        end = "?" if self.end is None else self.end
        lag = "?" if self.lag is None else self.lag
        return (f"{self.topic}: {self.copied} records copied, mirrored {self.position} of source end {end} "
                f"(lag {lag}) over {self.partitions} partitions")


class MirrorProgress:
    def __init__(self) -> None:
        self.partitions: dict[TopicPartition, PartitionProgress] = {}

    def start(self, tp: TopicPartition, position: int) -> None:
        """``tp`` is copied from ``position`` on (a restart keeps what it copied before)."""
        known = self.partitions.get(tp)
        if known is None:
            self.partitions[tp] = PartitionProgress(position)
        else:
            known.position = position

    def forget(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def committed(self, positions: dict, counts: dict) -> None:
        """A transaction committed: ``positions`` (tp -> next offset) and ``counts`` (tp ->
        records it held)."""
        for tp, position in positions.items():
            if tp in self.partitions:
                self.partitions[tp].position = position
        for tp, count in counts.items():
            if tp in self.partitions:
                self.partitions[tp].copied += count

    def ends(self, ends: dict) -> None:
        for tp, end in ends.items():
            if tp in self.partitions:
                self.partitions[tp].end = end

    def position(self, tp: TopicPartition) -> int:
        return self.partitions[tp].position

    @property
    def copied(self) -> int:
        return sum(p.copied for p in self.partitions.values())

    def topics(self) -> dict[str, TopicProgress]:
        """Per topic, sorted by name."""
        by_topic: dict[str, list[PartitionProgress]] = {}
        for tp in sorted(self.partitions):
            by_topic.setdefault(tp.topic, []).append(self.partitions[tp])
        out = {}
        for topic, parts in by_topic.items():
            ends = [p.end for p in parts]
            out[topic] = TopicProgress(topic, len(parts), sum(p.copied for p in parts),
                                       sum(p.position for p in parts),
                                       None if None in ends else sum(ends))
        return out
