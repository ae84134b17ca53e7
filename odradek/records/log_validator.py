"""The records of a produced batch checked as Kafka's ``LogValidator`` checks them, without
re-encoding anything: the generic produce path's half of ``records/_log_validator.c``.

For each batch (header and CRC already checked, ``batch.validate``): its codec must be one
Kafka knows (0-4, else UNSUPPORTED_COMPRESSION_TYPE); a compressed records section must
decompress (else CORRUPT_MESSAGE) to at most ``max_decompressed`` bytes (else
INVALID_RECORD); and the records must pass the C walk (``check_records``: every record's
framing, offset deltas 0..n-1, exactly ``records_count`` records; else INVALID_RECORD), the
same walk the produce fast path runs, so both paths accept exactly the same batches. On a
compacted topic (``cleanup.policy`` containing ``compact``) every record needs a key (else
INVALID_RECORD with one KIP-467 record error per record without one, as Kafka's
``LogValidator.validateKey``).

The walk also gives the largest record timestamp, which Kafka writes into the header on
append (``MutableRecordBatch.setMaxTimestamp``, only when it differs: sarama 1.22 leaves -1
there), and the record holding it (``offsetOfMaxTimestamp``).

Decompression bound (``max_decompressed``): 32 x ``max.message.bytes``, within [1 MiB,
256 MiB] (32 MiB at the default 1 MiB). A batch's compressed size is bounded by
``max.message.bytes``; producers' data compresses 2-10x (JSON, logs; repetitive data ~20x),
and librdkafka's and the Java client's default batches hold at most ~1 MiB before
compression, so 32x refuses no real batch, while a "bomb" (1 MiB of gzip can claim ~1 GiB)
costs at most that many bytes of one worker thread's memory (``ReplicaManager.append_off_loop``
checks records beyond ``INLINE_DECOMPRESSED`` on its few worker threads, off the event loop). Kafka has no such bound
because it decompresses record by record in a stream; odradek decompresses a section whole.
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.records import compression as codecs
from odradek.records._log_validator import check_records
from odradek.records.batch import BATCH_HEADER_SIZE, BatchHeader
from odradek.records.errors import (
    CorruptRecordError,
    DecompressionLimitError,
    InvalidRecordError,
    UnsupportedCompressionTypeError,
)

MIN_DECOMPRESSED = 1024 * 1024
MAX_DECOMPRESSED = 256 * 1024 * 1024
DECOMPRESSED_RATIO = 32
# What may be decompressed on the event loop (about a millisecond): librdkafka's default
# batches (batch.size 1,000,000 bytes before compression) and the Java client's fit. A
# section that claims more (gzip's ISIZE, an lz4 or zstd content size) goes off the loop
# without a try.
INLINE_DECOMPRESSED = 1024 * 1024

WALK_OK, WALK_MALFORMED, WALK_OFFSET_DELTA, WALK_TOO_FEW, WALK_TOO_MANY = range(5)


class RecordsSummary(NamedTuple):
    """What the walk of one batch's records found: the largest record timestamp (-1 when
    none) and the index of the first record with it (-1 when none)."""

    max_timestamp: int
    index_of_max: int


def max_decompressed(max_message_bytes: int) -> int:
    """The decompressed size a batch's records may take (see the module docstring)."""
    return min(max(DECOMPRESSED_RATIO * max_message_bytes, MIN_DECOMPRESSED), MAX_DECOMPRESSED)


def inline_limit(max_message_bytes: int) -> int:
    """What a batch's records may take when decompressed on the event loop."""
    return min(INLINE_DECOMPRESSED, max_decompressed(max_message_bytes))


def inline_decompressor(limit: int):
    """The produce fast path's ``decompress`` for a bound of ``limit`` bytes (``inline_limit``):
    the section decompressed, or None (corrupt, or larger: the generic path decides)."""

    def decompress(codec: int, data):
        claimed = codecs.claimed_size(codec, data)
        if claimed is not None and claimed > limit:
            return None  # not worth trying on the loop
        try:
            return codecs.decompress(codec, data, limit, view=True)
        except CorruptRecordError:
            return None

    return decompress


inline_decompress = inline_decompressor(INLINE_DECOMPRESSED)


def records_section(buf, pos: int, size: int, header: BatchHeader, limit: int, retry_larger: bool = False):
    """The records of the batch at ``buf[pos:pos + size]``, decompressed (at most ``limit``
    bytes). Raises UnsupportedCompressionTypeError, CorruptRecordError, or
    DecompressionLimitError (a CorruptRecordError) when beyond ``limit``; with
    ``retry_larger`` (the caller will try a larger limit off the event loop) also at once
    when the section claims more (``compression.claimed_size``)."""
    codec = header.attributes & 0x07
    section = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + size]
    if codec == codecs.NONE:
        return section
    if codec not in codecs.CODEC_NAMES:
        raise UnsupportedCompressionTypeError(f"unknown compression codec {codec} in record batch")
    if retry_larger:
        claimed = codecs.claimed_size(codec, section)
        if claimed is not None and claimed > limit:
            raise DecompressionLimitError(f"{codecs.CODEC_NAMES[codec]} data claims {claimed} bytes")
    return codecs.decompress(codec, section, limit, view=True)


def validate_records(data, header: BatchHeader, topic_partition: str, compacted: bool) -> RecordsSummary:
    """Walk a batch's (decompressed) records ``data``; raise InvalidRecordError when they are
    not what ``header`` declares (see the module docstring)."""
    count = header.records_count
    verdict, index, max_ts, index_of_max, null_keys = check_records(data, count, header.base_timestamp, compacted)
    if verdict == WALK_MALFORMED:
        message = f"Found invalid record structure: record {index} of the batch is malformed"
        raise InvalidRecordError(message, ((index, message),))
    if verdict == WALK_OFFSET_DELTA:
        message = f"Record {index} of the batch has an offset delta other than {index}"
        raise InvalidRecordError(message, ((index, message),))
    if verdict == WALK_TOO_FEW:
        raise InvalidRecordError(f"Batch declares {count} records but holds {index}")
    if verdict == WALK_TOO_MANY:
        raise InvalidRecordError(f"Bytes left in the batch after its {count} declared records")
    if null_keys:
        message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}."
        raise InvalidRecordError(message, tuple((i, message) for i in null_keys))
    return RecordsSummary(max_ts, index_of_max)


def check_batch_records(buf, pos: int, size: int, header: BatchHeader, topic_partition: str, compacted: bool,
                        limit: int, retry_larger: bool = False) -> RecordsSummary:
    """``records_section`` then ``validate_records``: one batch's records checked.

    Raises DecompressionLimitError beyond ``limit`` (with ``retry_larger``, the caller tries
    again with a larger one off the event loop), CorruptRecordError,
    UnsupportedCompressionTypeError, InvalidRecordError.
    """
    data = records_section(buf, pos, size, header, limit, retry_larger)
    return validate_records(data, header, topic_partition, compacted)


__all__ = [
    "DecompressionLimitError", "INLINE_DECOMPRESSED", "RecordsSummary", "check_batch_records",
    "inline_decompress", "inline_decompressor", "inline_limit", "max_decompressed", "records_section", "validate_records",
]
