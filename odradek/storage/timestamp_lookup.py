"""Finding records by time in a ``Log``: ListOffsets by timestamp and MAX_TIMESTAMP
(``TimestampLookup``).

A mixin of ``Log`` (``log``), kept apart as one concept, as ``LogRemoval`` is: both lookups
read the segments' time indexes (``segment.max_timestamp``, ``batches_from_timestamp``), then
the records of the one batch that holds the answer. They take no lock: they read the log's
copy-on-write segment view and its log start offset, as every reader does.
"""

from __future__ import annotations

from odradek.records._log_validator import check_records
from odradek.records.builder import LOG_APPEND_TIME
from odradek.records.errors import CorruptRecordError
from odradek.records.reader import RecordBatch
from odradek.storage.append_info import TimestampOffset


class TimestampLookup:
    """Timestamp lookups for ``Log`` (uses its segment view and log start offset)."""

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record (at or above the log start offset) with a timestamp at or above
        ``timestamp``, through each segment's time index; None when there is none."""
        start = self._log_start
        for segment in self._view.segments:
            if segment.max_timestamp[0] < timestamp:
                continue
            for position, header in segment.batches_from_timestamp(timestamp, start):
                if header.records_count == 0:
                    continue
                data = segment.handle().read_exact(position, header.size)
                for record in RecordBatch(data).records():
                    if record.timestamp >= timestamp and record.offset >= start:
                        return TimestampOffset(record.timestamp, record.offset)
        return None

    def max_timestamp(self) -> TimestampOffset:
        """The largest timestamp in the log (at or above the log start offset) and the offset
        of the first record holding it, as Kafka's ListOffsets MAX_TIMESTAMP answers since
        3.8 (KAFKA-16310): the segment's time index knows the timestamp and its batch, the
        batch's records say which record; (-1, -1) when no batch has a timestamp."""
        start = self._log_start
        best, best_segment = TimestampOffset(-1, -1), None
        for segment in self._view.segments:
            ts, offset = segment.max_timestamp
            if ts > best.timestamp and offset >= start:
                best, best_segment = TimestampOffset(ts, offset), segment
        if best_segment is None:
            return best
        for position, header in best_segment.batches_from_timestamp(best.timestamp, start):
            if header.records_count == 0:
                continue
            found = _max_timestamp_record(RecordBatch(best_segment.handle().read_exact(position, header.size)))
            if found.timestamp == best.timestamp and found.offset >= start:
                return found
        return best


def _max_timestamp_record(batch: RecordBatch) -> TimestampOffset:
    """The largest timestamp of ``batch``'s records and the offset of the first record with
    it, found by the C record walk (no record objects; offsets are base offset + index, as
    the produce path requires). CorruptRecordError when the records are malformed."""
    header = batch.header
    if header.timestamp_type == LOG_APPEND_TIME:
        return TimestampOffset(header.max_timestamp, header.base_offset)  # every record has it
    verdict, _, ts, index, _ = check_records(batch.records_bytes(), header.records_count, header.base_timestamp, False)
    if verdict != 0:
        raise CorruptRecordError(f"malformed records in the batch at offset {header.base_offset}")
    return TimestampOffset(ts, header.base_offset + index)
