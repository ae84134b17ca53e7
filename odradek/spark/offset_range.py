"""``OffsetRange``: the unit of parallelism, one topic-partition's ``[start, end)`` offsets.

Each Spark input partition is one ``OffsetRange`` (its task fetches it from the partition's
leader); ``maxRecordsPerPartition`` and ``minPartitions`` may cut large ranges into several
so that more tasks than topic-partitions run, as in Spark's Kafka source. A range is immutable data: re-reading it gives the same records,
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


def split_ranges(ranges, min_partitions: int | None = None, max_records: int | None = None) -> list[OffsetRange]:
    """The non-empty ``ranges`` in (topic, partition, start) order, cut into near-equal
    pieces: first each range larger than ``max_records`` into pieces of at most that many
    records; then, when ``min_partitions`` asks for more ranges than there are, each range in
    proportion to its size, so that at least ``min_partitions`` come out (when records
    allow).

    Examples: ranges of 100 and 300 records with min_partitions=4 give 1 + 3 pieces;
    ``[0, 300)`` becomes ``[0, 100) [100, 200) [200, 300)``. With max_records=120 instead,
    ``[0, 300)`` becomes ``[0, 100) [100, 200) [200, 300)`` as well and ``[0, 100)`` stays.
    """
    ranges = sorted((r for r in ranges if r.size > 0), key=lambda r: (r.topic, r.partition, r.start))
    if max_records:
        ranges = [piece for r in ranges for piece in _cut(r, -(-r.size // max_records))]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    return [piece for r in ranges for piece in _cut(r, max(1, -(-r.size * min_partitions // total)))]


def _cut(r: OffsetRange, pieces: int) -> list[OffsetRange]:
    """``r`` in ``pieces`` near-equal ranges (at most one per record)."""
    pieces = min(r.size, pieces)
    step, extra = divmod(r.size, pieces)
    out, start = [], r.start
    for i in range(pieces):
        end = start + step + (1 if i < extra else 0)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out
