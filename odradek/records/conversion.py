"""Converting between legacy message sets (magic 0/1) and v2 batches.

Up-conversion (``legacy_to_v2``) is what the broker does with a Produce request of version
0-2, whose records are a message set: the whole set becomes one v2 batch, as Kafka's log
validator builds it. Down-conversion (``v2_to_legacy``) serves a Fetch of version 0-3 to a
client that only reads magic 0/1: every data batch becomes messages of the requested magic,
one compressed wrapper per compressed batch; control batches are dropped (old clients know
no transactions) and so are record headers (legacy messages have none).
"""

from __future__ import annotations

from odradek.records import compression as codecs
from odradek.records.builder import CREATE_TIME, LOG_APPEND_TIME, BatchBuilder, BatchSpec
from odradek.records.errors import InvalidRecordError
from odradek.records.legacy import (
    LEGACY_CODECS,
    LegacyBatch,
    build_message_set,
    iter_messages,
)
from odradek.records.reader import iter_batches


class UnsupportedCompressionTypeError(InvalidRecordError):
    """A batch's codec cannot be written in the requested format (zstd in magic 0/1)."""


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


def v2_to_legacy(
    buf,
    magic: int,
    *,
    max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """The complete batches of ``buf`` as a message set of ``magic`` (0 or 1).

    Offsets and codecs are kept; v1 keeps timestamps and their type, v0 drops them. A
    partial batch at the end is skipped, as in the reader; a bad batch raises
    CorruptRecordError, a zstd batch UnsupportedCompressionTypeError.
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    parts = []
    for batch in iter_batches(buf):
        if batch.is_control:
            continue
        if batch.compression not in LEGACY_CODECS:
            raise UnsupportedCompressionTypeError(
                f"{codecs.codec_name(batch.compression)} batches cannot be sent as magic {magic}"
            )
        records = batch.records(max_decompressed)
        if records:
            parts.append(
                build_message_set(
                    records,
                    magic,
                    batch.compression,
                    timestamp_type=batch.timestamp_type,
                    drop_headers=True,
                )
            )
    return b"".join(parts)
