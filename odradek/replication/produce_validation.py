"""The checks of a produce that need no partition state: what Kafka's ``LogValidator`` and
``UnifiedLog.append`` refuse of a client's batches before offsets are assigned.

``Partition.append_records_as_leader`` (``replication/partition.py``) runs them in this order:
``split_or_refuse`` (whole batches; legacy message sets converted to v2),
``validate_client_batch`` (size, record count, no control batches) and ``check_timestamps``
per batch, then ``set_max_timestamps`` and, when the topic's ``compression.type`` is not
``producer``, ``recompress``. ``ProduceSettings`` is what these need of the log's config,
worked out once per config (``settings_for``). Each refusal is a ``ProduceError`` carrying
the Kafka error code.
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records import batch as rb
from odradek.records.conversion import legacy_to_v2
from odradek.records.errors import CorruptRecordError, InvalidRecordError
from odradek.records.log_validator import (
    INLINE_DECOMPRESSED,
    RecordsSummary,
    inline_decompress,
    inline_decompressor,
    inline_limit,
)
from odradek.records.recompression import recompress_batches, target_codec
from odradek.storage.config import LOG_APPEND_TIME, LONG_MAX

# The distance of an unlimited bound from the clock: no int64 timestamp is beyond it.
UNLIMITED = 2**64


class ProduceError(Exception):
    """A produce to one partition failed with a Kafka error code; ``record_errors``:
    ``(index in its batch, message)`` of the records at fault (KIP-467)."""

    def __init__(self, error: ErrorCode, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.error = error
        self.record_errors = record_errors


class ProduceSettings(NamedTuple):
    """What a produce needs of the log's config (``settings_for``), worked out once per
    config: a config change replaces the config object, so an identity test finds a stale one.

    A produced batch's timestamps must lie within ``[now - before_ms, now + after_ms]``
    (``UNLIMITED`` when there is no bound); ``recompress_to`` is the ``(codec, level)``
    batches are rewritten into, None for ``compression.type=producer``; ``plain``: the
    produce fast path may append (batches kept as they are, CreateTime, no
    ``flush.messages``); ``bounded``: some timestamp bound is set, so a produce reads the clock;
    ``compacted``: ``cleanup.policy`` has ``compact``, so every record needs a key;
    ``inline_limit``: the bytes a batch's records may take decompressed on the event loop
    (``records/log_validator.py``), and ``decompress`` the fast path's decompressor for it.
    """

    config: object
    before_ms: int
    after_ms: int
    recompress_to: tuple[int, int | None] | None
    plain: bool
    bounded: bool
    compacted: bool
    inline_limit: int = INLINE_DECOMPRESSED
    decompress: object = inline_decompress


NO_SETTINGS = ProduceSettings(None, UNLIMITED, UNLIMITED, None, False, False, False)


def split_batches(records):
    """``(buffer, [(pos, size, header)])`` for the whole batches of a produce request.

    Legacy message sets (magic 0 or 1) are converted to v2 batches; the returned buffer is
    then the converted one.
    """
    if records is None or len(records) == 0:
        raise CorruptRecordError("no records")
    buf = records
    if len(buf) > rb.MAGIC_OFFSET and buf[rb.MAGIC_OFFSET] < 2:
        buf = memoryview(bytearray(legacy_to_v2(bytes(buf))))
    batches = []
    pos, end = 0, len(buf)
    while pos < end:
        size = rb.batch_size_at(buf, pos)
        if pos + size > end:
            raise CorruptRecordError("produce request ends inside a batch")
        batches.append((pos, size, rb.validate(buf, pos, size)))
        pos += size
    return buf, batches


def split_or_refuse(records):
    """``split_batches`` with its errors as ProduceError."""
    try:
        return split_batches(records)
    except CorruptRecordError as e:
        raise ProduceError(ErrorCode.CORRUPT_MESSAGE, str(e)) from None
    except InvalidRecordError as e:
        raise ProduceError(ErrorCode.INVALID_RECORD, str(e)) from None


def validate_client_batch(header: rb.BatchHeader, size: int, max_message_bytes: int) -> None:
    if size > max_message_bytes:
        raise ProduceError(
            ErrorCode.MESSAGE_TOO_LARGE, f"batch of {size} bytes exceeds max.message.bytes {max_message_bytes}"
        )
    if header.last_offset_delta + 1 != header.records_count:
        raise ProduceError(ErrorCode.INVALID_RECORD, "record count does not match offset delta")
    if header.is_control:
        raise ProduceError(ErrorCode.INVALID_RECORD, "clients may not write control batches")


def check_timestamps(header: rb.BatchHeader, low: int, high: int) -> None:
    """Raise INVALID_TIMESTAMP (32) if the batch's timestamps are outside ``[low, high]``.

    ``header`` carries the largest record timestamp the record walk found as its
    ``max_timestamp``: it is checked against ``high``, so every record is; against ``low``
    only ``base_timestamp`` is (the first record's timestamp, from which the others are
    stored as deltas): a later record below it (a negative delta) is not checked. Kafka
    checks each record; producers stamp records in the order they are appended to a batch,
    so such a record is rare (a timestamp the application set explicitly). A failing batch fails the whole partition's append, as in
    Kafka; the client sees INVALID_TIMESTAMP, which it does not retry.
    """
    base, top = header.base_timestamp, header.max_timestamp
    if base != rb.NO_TIMESTAMP and base < low:
        ts, which = base, "first"
    elif top != rb.NO_TIMESTAMP and top > high:
        ts, which = top, "largest"
    else:
        return  # only a missing timestamp (-1) was past the bound
    shown_low = "-inf" if low < -(2**63) else low
    shown_high = "+inf" if high >= 2**63 else high
    raise ProduceError(
        ErrorCode.INVALID_TIMESTAMP,
        f"One or more records have been rejected due to invalid timestamp: timestamp {ts} of the "
        f"batch's {which} record is out of range; it should be within [{shown_low}, {shown_high}]",
    )


def set_max_timestamps(buf, batches, summaries: list[RecordsSummary]):
    """Give each batch its records' largest timestamp where its header says otherwise, as
    Kafka does on append (``setMaxTimestamp``: the header and the CRC, records untouched);
    the batches with their headers as they now are."""
    out = batches
    for i, ((pos, size, header), summary) in enumerate(zip(batches, summaries)):
        if summary.max_timestamp != header.max_timestamp:
            rb.set_max_timestamp(buf, pos, size, summary.max_timestamp)
            if out is batches:
                out = list(batches)
            out[i] = (pos, size, header._replace(max_timestamp=summary.max_timestamp))
    return out


def recompress(buf, batches, target: tuple[int, int | None], max_message_bytes: int):
    """The batches rewritten into the topic's codec (``target``: ``(codec, level)``).

    As in Kafka (``UnifiedLog.append`` re-checks sizes after ``LogValidator`` recompressed),
    a rewritten batch must also fit ``max.message.bytes`` (MESSAGE_TOO_LARGE); a records
    section that does not decompress is CORRUPT_MESSAGE. Idempotent producers' duplicate
    detection ran before this on header fields the rewrite keeps, so it is unaffected.
    """
    try:
        buf, batches = recompress_batches(buf, batches, target[0], target[1])
    except CorruptRecordError as e:
        raise ProduceError(ErrorCode.CORRUPT_MESSAGE, str(e)) from None
    for _, size, _ in batches:
        if size > max_message_bytes:
            raise ProduceError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {size} bytes after recompression exceeds max.message.bytes {max_message_bytes}",
            )
    return buf, batches


def settings_for(config) -> ProduceSettings:
    """The ``ProduceSettings`` of a log's config.

    Kafka's ``LogValidator.validateTimestamp`` (3.6+, KIP-937) refuses a record whose
    timestamp is more than ``message.timestamp.before.max.ms`` before the broker's clock or
    more than ``message.timestamp.after.max.ms`` after it (each falling back to the deprecated
    ``message.timestamp.difference.max.ms`` while at its ``Long.MAX_VALUE`` default; see
    ``LogConfig.timestamp_before_max_ms``); records without a timestamp (-1) are not checked,
    nor are LogAppendTime topics. A limit left at ``Long.MAX_VALUE`` is no limit at all
    (``UNLIMITED``, beyond any int64 timestamp).
    """
    target = target_codec(config)
    if config.message_timestamp_type == LOG_APPEND_TIME:
        return ProduceSettings(config, UNLIMITED, UNLIMITED, target, False, False, config.compact_enabled,
                               *inline_settings(config))
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    before = UNLIMITED if before == LONG_MAX else before
    after = UNLIMITED if after == LONG_MAX else after
    plain = target is None and config.flush_messages == LONG_MAX
    return ProduceSettings(config, before, after, target, plain, before != UNLIMITED or after != UNLIMITED,
                           config.compact_enabled, *inline_settings(config))


def inline_settings(config) -> tuple[int, object]:
    """``(inline_limit, decompress)`` of ``ProduceSettings`` for a log's config."""
    limit = inline_limit(config.max_message_bytes)
    return limit, (inline_decompress if limit == INLINE_DECOMPRESSED else inline_decompressor(limit))
