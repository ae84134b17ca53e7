"""Up-conversion: a legacy message set (magic 0/1) as one v2 batch.

``legacy_to_v2`` is what the broker does with a Produce request of version 0-2, whose records
are a message set: the whole set becomes one v2 batch, as Kafka's log validator builds it.
The other direction, for Fetch v0-v3, is ``records.down_conversion``.
"""

from __future__ import annotations

from odradek.records import compression as codecs
from odradek.records.builder import CREATE_TIME, LOG_APPEND_TIME, BatchBuilder, BatchSpec
from odradek.records.errors import InvalidRecordError
from odradek.records.legacy import LegacyBatch, iter_messages


def legacy_to_v2(
    buf,
    *,
    compression: int | None = None,
    assign_offsets: bool = True,
    base_offset: int = 0,
    max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """One v2 batch holding every record of the legacy message set ``buf`` (b"" if none).

    ``buf`` must hold whole, valid entries (CorruptRecordError otherwise). ``compression``
    defaults to the codec of the first compressed entry (none if there is none). With
    ``assign_offsets`` the records get ``base_offset, base_offset + 1, ...`` (the broker
    reassigns them anyway); without it they keep their own offsets, which must increase
    (InvalidRecordError otherwise). A v1 entry with LogAppendTime makes the batch
    LogAppendTime; v0 records have no timestamp (-1).
    """
    entries = [LegacyBatch(message) for message in iter_messages(buf)]
    records = [r for entry in entries for r in entry.records(max_decompressed)]
    if not records:
        return b""
    if compression is None:
        used = [e.compression for e in entries if e.compression != codecs.NONE]
        compression = used[0] if used else codecs.NONE
    append_time = any(e.timestamp_type == LOG_APPEND_TIME for e in entries)
    spec = BatchSpec(
        base_offset=base_offset if assign_offsets else records[0].offset,
        compression=compression,
        timestamp_type=LOG_APPEND_TIME if append_time else CREATE_TIME,
    )
    builder = BatchBuilder(spec)
    try:
        for r in records:
            builder.append(r.timestamp, r.key, r.value, (), None if assign_offsets else r.offset)
    except ValueError as exc:
        raise InvalidRecordError(f"legacy records cannot form a v2 batch: {exc}") from None
    return builder.build()
