"""A batch rewritten into another codec: what the leader writes when a topic's
``compression.type`` names a codec instead of ``producer``.

Kafka's ``LogValidator`` appends a produced batch in place when the topic's codec is the
batch's own (always, for ``producer``); otherwise it rebuilds the batch in the topic's codec.
The rewritten batch keeps the producer id, producer epoch, base sequence, the transactional
flag, ``last_offset_delta``, the record count, ``base_timestamp``/``max_timestamp``, the
timestamp type bit, and every record (key, value, headers, timestamp and offset deltas);
what changes is the codec bits of the attributes, ``batch_length``, the records section and
the CRC. Base offset and partition leader epoch (and, on LogAppendTime topics, the max
timestamp) are assigned afterwards like for any batch, from the log end.

Byte-wise (layout in ``batch.py``)::

    in:   header (codec c)   | compress_c(R)
    out:  header (codec t,   | compress_t(R)      R = the records, byte for byte
           new length, CRC)

The records are never decoded: their encoding does not depend on the codec, and their
offset and timestamp deltas are relative to header fields that are kept, so moving R
verbatim keeps every record exactly (Kafka re-encodes each record with the same result for
the batches producers write, whose offset deltas are 0..n-1). The cost is one decompression
(bounded, see ``compression.py``) and one compression per rewritten batch.

``target_codec`` maps a config's ``compression.type`` (Kafka's ``BrokerCompressionType``)
and KIP-390 levels to ``(codec, level)``, or None for ``producer``.
"""

from __future__ import annotations

import struct

from odradek.records import batch as rb
from odradek.records import compression as codecs

# compression.type -> codec id (``producer`` has none: batches keep their own).
CODEC_OF_TYPE = {
    "uncompressed": codecs.NONE,
    "gzip": codecs.GZIP,
    "snappy": codecs.SNAPPY,
    "lz4": codecs.LZ4,
    "zstd": codecs.ZSTD,
}

_INT32 = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_OFFSET = rb.ATTRIBUTES_OFFSET
_LENGTH_OFFSET = 8


def target_codec(config) -> tuple[int, int | None] | None:
    """``(codec, level)`` the leader writes for a ``LogConfig``-like ``config``; None when
    ``compression.type`` is ``producer`` (batches are written as the producer sent them).

    The level is the config's KIP-390 level for that codec (gzip's -1 is the codec's own
    default, level 6); snappy and uncompressed have none.
    """
    codec = CODEC_OF_TYPE.get(config.compression_type)
    if codec is None:
        return None
    if codec == codecs.GZIP:
        level = config.compression_gzip_level
        return (codec, None if level == -1 else level)  # -1: the codec's own default
    if codec == codecs.LZ4:
        return (codec, config.compression_lz4_level)
    if codec == codecs.ZSTD:
        return (codec, config.compression_zstd_level)
    return (codec, None)


def recompress_batch(
    buf,
    pos: int,
    size: int,
    header: rb.BatchHeader,
    codec: int,
    level: int | None = None,
    max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED,
) -> bytearray:
    """The valid v2 batch ``buf[pos:pos + size]`` (``header`` already read from it) rewritten
    into ``codec`` at ``level``, with a new CRC.

    Raises CorruptRecordError when the records section does not decompress (or would exceed
    ``max_decompressed`` bytes). Its base offset and leader epoch are copied unchanged.
    """
    view = memoryview(buf)
    body = codecs.decompress(header.compression, view[pos + rb.BATCH_HEADER_SIZE : pos + size], max_decompressed)
    out = bytearray(view[pos : pos + rb.BATCH_HEADER_SIZE])
    out += codecs.compress(codec, body, level)
    _INT32.pack_into(out, _LENGTH_OFFSET, len(out) - rb.LOG_OVERHEAD)
    attributes = (header.attributes & ~rb.COMPRESSION_MASK) | codec
    _ATTRIBUTES.pack_into(out, _ATTRIBUTES_OFFSET, attributes)
    rb.update_crc(out, 0, len(out))
    return out


def recompress_batches(buf, batches, codec: int, level: int | None = None):
    """``(buffer, [(pos, size, header)])`` with every batch of ``batches`` (positions in
    ``buf``, as ``produce_validation.split_batches`` gives them) whose codec is not ``codec``
    rewritten into it; batches already in ``codec`` are copied as they are.

    When no batch needs rewriting, ``buf`` and ``batches`` themselves are returned (no copy).
    The new buffer is a writable memoryview; its headers are read back from it.
    Raises CorruptRecordError as ``recompress_batch``.
    """
    if all(header.compression == codec for _, _, header in batches):
        return buf, batches
    out = bytearray()
    placed = []
    for pos, size, header in batches:
        start = len(out)
        if header.compression == codec:
            out += buf[pos : pos + size]
            placed.append((start, size, header))
            continue
        out += recompress_batch(buf, pos, size, header, codec, level)
        placed.append((start, len(out) - start, rb.read_header(out, start)))
    return memoryview(out), placed
