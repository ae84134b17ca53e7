"""Down-conversion: v2 batches as a legacy message set (magic 0 or 1) for old consumers.

Fetch v0-v1 answers in magic 0, Fetch v2-v3 in magic 1 (Kafka's ``RecordsUtil.downConvert``
and ``LazyDownConversionRecords``). The log holds v2 batches only, so a client that asks with
one of those versions gets its records re-encoded; everyone else gets the log's bytes as they
are. What changes on the way (layout of the messages in ``records.legacy``):

- each record becomes one message, its offset kept; v1 keeps the timestamp and the batch's
  timestamp type (LogAppendTime: every message carries the append time), v0 has none;
- a compressed batch becomes one wrapper message of the same codec where the format has it
  (gzip and snappy in v0 and v1, lz4 in v1), its inner offsets absolute in v0 and relative in
  v1; lz4 in v0 (whose framing Kafka 0.8 clients read differently) and zstd (unknown before
  v2) are sent uncompressed;
- records before ``first_offset`` are left out (the first batch may start before the offset
  asked for, and old clients do not skip what they did not ask for);
- control batches (transaction markers) are left out, and so are record headers: legacy
  messages have neither.

The result respects ``max_bytes`` at message boundaries (a compressed batch is one wrapper,
kept or left out whole), except that with ``min_one`` the first message or wrapper is always
included whole, so a consumer can always make progress (Kafka's ``minOneMessage``).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.records import compression as codecs
from odradek.records.legacy import LEGACY_TIMESTAMP_TYPE_BIT, build_message_set, encode_message
from odradek.records.reader import RecordBatch, iter_batches

# The codecs each legacy magic may carry in a wrapper message (others go uncompressed).
WRAPPER_CODECS = {
    0: (codecs.GZIP, codecs.SNAPPY),
    1: (codecs.GZIP, codecs.SNAPPY, codecs.LZ4),
}


@dataclass(frozen=True, slots=True)
class DownConverted:
    """A converted message set and how far the conversion got.

    ``next_offset``: the offset after the last batch wholly converted or skipped (the fetch
    offset when none was); a fetch that converted nothing (say, only transaction markers) may
    go on reading from there. ``records``: the messages converted.
    """

    message_set: bytes
    next_offset: int
    records: int


def down_convert(
    buf,
    magic: int,
    *,
    first_offset: int = 0,
    max_bytes: int = 2**31 - 1,
    min_one: bool = True,
    max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED,
) -> DownConverted:
    """The whole v2 batches of ``buf`` as a message set of ``magic`` (0 or 1).

    A partial batch at the end of ``buf`` is skipped; a bad batch raises CorruptRecordError.
    """
    if magic not in WRAPPER_CODECS:
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    parts: list[bytes] = []
    size = 0
    count = 0
    next_offset = first_offset
    for batch in iter_batches(buf):
        if not isinstance(batch, RecordBatch):  # the log holds v2 batches only
            raise ValueError("down-conversion reads v2 batches")
        if not batch.is_control:
            records = [r for r in batch.records(max_decompressed) if r.offset >= first_offset]
            for message, n in _messages(batch, records, magic):
                if size + len(message) > max_bytes and (size or not min_one):
                    return DownConverted(b"".join(parts), next_offset, count)
                parts.append(message)
                size += len(message)
                count += n
        next_offset = max(next_offset, batch.next_offset)
    return DownConverted(b"".join(parts), next_offset, count)


def _messages(batch: RecordBatch, records: list, magic: int):
    """``(message bytes, records in it)`` for the records of one batch: one wrapper when the
    batch's codec exists in ``magic``, else one message per record."""
    if not records:
        return
    codec = batch.compression
    timestamp_type = batch.timestamp_type if magic else 0
    if codec in WRAPPER_CODECS[magic]:
        yield build_message_set(records, magic, codec, timestamp_type=timestamp_type,
                                drop_headers=True), len(records)
        return
    attributes = LEGACY_TIMESTAMP_TYPE_BIT if timestamp_type else 0
    for r in records:
        yield encode_message(r.offset, magic, attributes, r.timestamp, r.key, r.value), 1
