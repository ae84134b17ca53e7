"""Batches Kafka's LogValidator refuses, built byte by byte with a valid CRC, so that only the
check under test can refuse them (no dependence on a client willing to send garbage)."""

from __future__ import annotations

import struct

import cramjam

from odradek.records import batch as rb
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.record import encode_record

NOW = 1_700_000_000_000
RECORDS_COUNT, LAST_OFFSET_DELTA, MAX_TIMESTAMP = 57, 23, 35


def good(count: int = 3, codec: int = 0, keys: bool = True, timestamps=None, value: bytes = b"value") -> bytes:
    builder = BatchBuilder(BatchSpec(compression=codec))
    for i in range(count):
        ts = NOW + i if timestamps is None else timestamps[i]
        builder.append(ts, b"k%d" % i if keys else None, value + b"%d" % i)
    return builder.build()


def with_section(section: bytes, codec: int, count: int = 1, template: bytes | None = None) -> bytes:
    """A batch whose records section is ``section`` as given, with codec bits ``codec``,
    ``count`` records declared, and a correct length and CRC."""
    header = bytearray((template or good(count))[: rb.BATCH_HEADER_SIZE])
    out = header + section
    struct.pack_into(">i", out, 8, len(out) - rb.LOG_OVERHEAD)
    attributes = struct.unpack_from(">h", out, rb.ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", out, rb.ATTRIBUTES_OFFSET, (attributes & ~0x07) | codec)
    struct.pack_into(">i", out, LAST_OFFSET_DELTA, count - 1)
    struct.pack_into(">i", out, RECORDS_COUNT, count)
    rb.update_crc(out, 0, len(out))
    return bytes(out)


def patched(batch: bytes, offset: int, fmt: str, value: int) -> bytes:
    """``batch`` with one header field set and its CRC fixed."""
    out = bytearray(batch)
    struct.pack_into(fmt, out, offset, value)
    rb.update_crc(out, 0, len(out))
    return bytes(out)


def records_of(batch: bytes) -> bytes:
    return batch[rb.BATCH_HEADER_SIZE:]


def garbage_gzip() -> bytes:
    return with_section(b"\x1f\x8b\x08\x00" + b"not gzip at all" * 4, codec=1)


def garbage_snappy() -> bytes:
    return with_section(b"\xff\xff\xff\xff\x0f" + b"not snappy" * 4, codec=2)


def codec_7() -> bytes:
    return with_section(records_of(good(1)), codec=7)


def broken_framing() -> bytes:
    """Three records; the second one's key length runs past its record."""
    records = [encode_record(i, i, b"k%d" % i, b"v") for i in range(3)]
    second = bytearray(records[1])
    second[4] = 0x7E  # key length 63 in a record of 8 bytes
    return with_section(records[0] + bytes(second) + records[2], codec=0, count=3)


def count_mismatch() -> bytes:
    """Three records, four declared (delta and count agree with each other)."""
    batch = good(3)
    return patched(patched(batch, RECORDS_COUNT, ">i", 4), LAST_OFFSET_DELTA, ">i", 3)


def wrong_offset_delta() -> bytes:
    records = [encode_record(d, 0, b"k", b"v") for d in (0, 5, 2)]
    return with_section(b"".join(records), codec=0, count=3)


def gzip_bomb(size: int) -> bytes:
    """One gzip section of ``size`` zero bytes (about size/1000 bytes compressed)."""
    return with_section(bytes(cramjam.gzip.compress(bytes(size), level=9)), codec=1)


def unkeyed(count: int = 3, keyed_at=()) -> bytes:
    """``count`` records, only those at ``keyed_at`` with a key."""
    builder = BatchBuilder(BatchSpec())
    for i in range(count):
        builder.append(NOW + i, b"k" if i in keyed_at else None, b"v%d" % i)
    return builder.build()


def max_timestamp_unset(timestamps, codec: int = 0) -> bytes:
    """A batch of records at ``timestamps`` whose header's max timestamp is -1 (sarama 1.22)."""
    return patched(good(len(timestamps), codec=codec, timestamps=timestamps), MAX_TIMESTAMP, ">q", -1)
