"""Batch reads: ``spark.read.format("odradek")``.

On the driver, ``partitions()`` lists the topic-partitions to read, resolves the starting
and ending offsets (earliest and latest by default) and returns one ``OffsetRange`` per
topic-partition, split further when ``maxRecordsPerPartition`` or ``minPartitions`` asks. On executors, ``read()`` of a
range fetches it from the partition's leader and yields Arrow batches (``range_reader``).
The ranges are fixed when the query is planned: records appended later are not read.
With nothing to read (an empty topic, a subscribed topic that does not exist, a pattern
matching no topic) the result has no rows: Spark then plans one placeholder
``InputPartition(None)`` instead of an empty list, and ``read`` of it yields nothing.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader

from odradek.spark.offset_range import OffsetRange, split_ranges
from odradek.spark.offset_reader import OffsetReader
from odradek.spark.offsets import LATEST, OffsetSpec
from odradek.spark.options import SourceOptions
from odradek.spark.range_reader import read_range

__all__ = ["BatchReader", "plan_ranges"]


class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[OffsetRange]:
        offsets = OffsetReader(self.options)
        try:
            return plan_ranges(offsets, self.options)
        finally:
            offsets.close()

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):  # Spark's placeholder: nothing to read
            return iter(())
        return read_range(self.options.fetch_config(), partition)


def plan_ranges(offsets: OffsetReader, options: SourceOptions) -> list[OffsetRange]:
    """The offset ranges of a batch read, checked: a start after its end is an error."""
    starting = options.starting or OffsetSpec("earliest")
    if starting.kind == "latest":
        raise ValueError("startingOffsets=latest is not allowed for a batch read (it would read nothing)")
    latest = [str(tp) for tp, o in (starting.values or {}).items() if starting.kind == "offsets" and o == LATEST]
    if latest:
        raise ValueError(f"startingOffsets for {', '.join(sorted(latest))} can't be latest (-1) for a batch read")
    partitions = offsets.partitions()
    starts = offsets.resolve(starting, partitions, "startingOffsets", options.timestamp_strategy)
    ends = offsets.resolve(options.ending, partitions, "endingOffsets", "latest")
    backwards = [f"{tp} ({starts[tp]} > {ends[tp]})" for tp in partitions if starts[tp] > ends[tp]]
    if backwards:
        raise ValueError("starting offsets after ending offsets for " + ", ".join(backwards))
    ranges = [OffsetRange(tp.topic, tp.partition, starts[tp], ends[tp]) for tp in partitions]
    return split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
