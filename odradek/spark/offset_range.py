"""``OffsetRange``: the unit of parallelism, one topic-partition's ``[start, end)`` offsets.

Seed 002's Hadoop loader splits a load "per node/topic/partition" into map tasks; here each
Spark input partition is one ``OffsetRange`` (its task fetches it from the partition's
leader), and ``minPartitions`` may cut large ranges into several so that more tasks than
topic-partitions run. A range is immutable data: re-reading it gives the same records,
which is what lets Spark replay a micro-batch or retry a task.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

__all__ = ["OffsetRange", "split_ranges"]


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def split_ranges(ranges, min_partitions: int | None = None) -> list[OffsetRange]:
    """The non-empty ``ranges`` in (topic, partition, start) order; when ``min_partitions``
    asks for more than there are, each range is cut into near-equal pieces in proportion to
    its size, so that at least ``min_partitions`` ranges come out (when records allow).

    Example: ranges of 100 and 300 records with min_partitions=4 give 1 + 3 pieces;
    ``[0, 300)`` becomes ``[0, 100) [100, 200) [200, 300)``.
    """
    ranges = sorted((r for r in ranges if r.size > 0), key=lambda r: (r.topic, r.partition, r.start))
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        pieces = min(r.size, max(1, -(-r.size * min_partitions // total)))  # ceiling
        step, extra = divmod(r.size, pieces)
        start = r.start
        for i in range(pieces):
            end = start + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out
