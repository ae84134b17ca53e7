"""Compression codecs of record batches and legacy message sets, through ``cramjam``.

Codec ids (bits 0-2 of a batch's or message's attributes)::

    0 none   1 gzip   2 snappy   3 lz4   4 zstd

Wire formats, as Kafka's clients write them:

- gzip: an RFC 1952 stream (several members are accepted on decompress).
- snappy: the Java client writes the *xerial* block framing of ``snappy-java``::

      header  8 bytes  b"\\x82SNAPPY\\x00"
              4 bytes  version (int32, 1)   } ignored on read: some writers put them
              4 bytes  compatible (int32, 1) } in little-endian
      blocks  [int32 big-endian length + one raw snappy block]*

  librdkafka writes one raw snappy block with no framing. Decompression detects the xerial
  magic and otherwise reads raw; compression writes the xerial framing (every client reads it).
- lz4: the LZ4 *frame* format (magic 0x184D2204). Kafka's Java reader requires independent
  blocks, so compression never links blocks. (Magic v0 messages from Kafka 0.8/0.9 clients
  carry a wrong frame header checksum; they are rejected as corrupt, not repaired.)
- zstd: zstd frames (several are accepted on decompress).

Decompression is bounded: the output is written into a buffer of at most ``max_size`` bytes,
and the codec stops as soon as that buffer is full, so a "bomb" costs at most ``max_size``
bytes of memory and the time to fill them. The first buffer is sized from what the format
says about its output (snappy's length header, gzip's ISIZE trailer, the content size of an
lz4 or zstd frame) or else from the compressed size, and grows fourfold while too small.
"""

from __future__ import annotations

import mmap
import struct

import cramjam
import xxhash

from odradek.records.errors import CorruptRecordError, DecompressionLimitError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

# Enough for any batch a client sends by default (1 MiB max.request.size, even at 100x).
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

# Levels when the caller gives none: Kafka's defaults for gzip (6) and zstd (3); for lz4 the
# fast compressor (level 1: Kafka's level 9 is the slow high-compression mode).
DEFAULT_LEVELS = {GZIP: 6, LZ4: 1, ZSTD: 3}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = 16
# snappy-java's default block size: 32 KiB of uncompressed input per block.
XERIAL_BLOCK_SIZE = 32 * 1024

_INT32_BE = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")
_UINT64_LE = struct.Struct("<Q")

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# What cramjam's decompress_into says when the output buffer is too small (cramjam 2.14).
_BUFFER_FULL = "failed to write whole buffer"
# How far a size hint may exceed the compressed size before it is disbelieved.
_TRUSTED_RATIO = 64
# Snappy's densest element, a 3-byte copy of 64 bytes, expands at most ~21x: a block whose
# length header claims more than 32x its size is corrupt (and is refused before allocation).
_SNAPPY_MAX_RATIO = 32
# The smallest first buffer: below this, retrying costs more than the zeroed memory.
_MIN_GUESS = 64 * 1024


def codec_name(codec: int) -> str:
    """Kafka's name of a codec id ("gzip"); raises CorruptRecordError for an unknown id."""
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise CorruptRecordError(f"unknown compression codec {codec}") from None


def compress(codec: int, data, level: int | None = None) -> bytes:
    """Compress ``data`` (any bytes-like object) in the wire format of ``codec``.

    ``level`` is codec specific (gzip 1-9, lz4 1-16, zstd 1-22); None takes DEFAULT_LEVELS.
    Snappy has no levels. Raises ValueError for an unknown codec.
    """
    if codec == NONE:
        return bytes(data)
    if codec not in CODEC_NAMES:
        raise ValueError(f"unknown compression codec {codec}")
    if level is None:
        level = DEFAULT_LEVELS.get(codec)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == SNAPPY:
        return snappy_xerial_compress(data)
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(
            level=level, content_checksum=False, block_linked=False
        )
        compressor.compress(data if type(data) is bytes else bytes(data))  # takes bytes only
        return bytes(compressor.finish())
    return bytes(cramjam.zstd.compress(data, level=level))


def snappy_xerial_compress(data, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    """Snappy in the xerial framing: header, then each block as int32 length + raw block."""
    view = memoryview(data).cast("B")
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), block_size):
        block = cramjam.snappy.compress_raw(view[start : start + block_size])
        out += _INT32_BE.pack(len(block))
        out += block
    return bytes(out)


_LZ4_MAGIC = b"\x04\x22\x4d\x18"


def fix_kafka08_lz4_header(data) -> bytes:
    """Repair the LZ4 frame header checksum that Kafka clients before 0.10 wrote for magic-0
    message sets (KAFKA-3160: they hashed the 4 magic bytes too); Kafka's broker accepts those
    frames, so do we. The checksum byte (HC) is the second byte of xxh32 over the frame
    descriptor (FLG, BD and the optional content size and dictionary id). Data that is not
    an LZ4 frame is returned unchanged, for ``decompress`` to refuse.
    """
    data = bytes(data)
    if len(data) < 7 or data[:4] != _LZ4_MAGIC:
        return data
    flg = data[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)  # after BD, size, dict id
    if len(data) <= end:
        return data
    checksum = (xxhash.xxh32_intdigest(data[4:end]) >> 8) & 0xFF
    return data[:end] + bytes([checksum]) + data[end + 1 :]


def decompress(codec: int, data, max_size: int = DEFAULT_MAX_DECOMPRESSED, view: bool = False):
    """Decompress ``data`` written in the wire format of ``codec``; at most ``max_size`` bytes.

    Returns bytes, or with ``view`` a read-only memoryview of the output buffer (no copy; the
    record walk of the produce path needs no bytes object). Output buffers of ``MMAP_AT``
    bytes or more are anonymous maps: the kernel hands out zeroed pages as the codec, which
    runs without the GIL, fills them, where a bytearray would be zeroed holding the GIL
    (16 ms for 32 MiB: a stall of the event loop while a worker thread decompresses).

    Raises CorruptRecordError when the codec is unknown or the data is not valid for it, and
    its subclass DecompressionLimitError when the output would exceed ``max_size`` bytes.
    """
    if codec == NONE:
        if len(data) > max_size:
            raise DecompressionLimitError(f"data of {len(data)} bytes exceeds {max_size}")
        return bytes(data)
    if codec == SNAPPY:
        if bytes(data[:8]) == XERIAL_MAGIC and len(data) >= _XERIAL_HEADER_SIZE:
            return _finish(*_snappy_xerial_decompress(memoryview(data), max_size), view)
        return _finish(*_snappy_raw_decompress(data, max_size), view)
    if codec == GZIP:
        module, guess = cramjam.gzip, _gzip_size_hint(data)
    elif codec == LZ4:
        module, guess = cramjam.lz4, _lz4_size_hint(data)
    elif codec == ZSTD:
        module, guess = cramjam.zstd, _zstd_size_hint(data)
    else:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    return _finish(*_decompress_bounded(module, codec, data, guess, max_size), view)


def claimed_size(codec: int, data) -> int | None:
    """The decompressed size ``data`` claims for itself, when its format says one (gzip's
    ISIZE, the content size of an lz4 or zstd frame; snappy is bounded exactly before it
    is decompressed); None when it says nothing. A claim may lie: use it only to decide
    where to decompress, never to accept or refuse."""
    if codec == GZIP:
        return _gzip_size_hint(data)
    if codec == LZ4:
        return _lz4_size_hint(data)
    if codec == ZSTD:
        return _zstd_size_hint(data)
    return None


# Output buffers from this size on are anonymous maps (see ``decompress``).
MMAP_AT = 1024 * 1024


def _allocate(size: int):
    """A writable zeroed buffer of ``size`` bytes (see ``decompress``)."""
    return mmap.mmap(-1, size) if size >= MMAP_AT else bytearray(size)


def _finish(out, written: int, view: bool):
    """The first ``written`` bytes of ``out``: bytes, or a read-only memoryview."""
    if view:
        return memoryview(out)[:written].toreadonly()
    if type(out) is bytearray and written == len(out):
        return bytes(out)
    return bytes(memoryview(out)[:written])


def _decompress_bounded(module, codec: int, data, guess: int | None, max_size: int):
    """Decompress into growing buffers of at most ``max_size`` bytes.

    cramjam's ``decompress_into`` fills a buffer of exactly the output's size without error
    and stops with "failed to write whole buffer" (Rust's ``write_all`` running out of room)
    as soon as a smaller one is full. Only that error grows the buffer; any other means
    corrupt data and fails at once, so bad input costs one attempt, not a climb to max_size.
    """
    if not len(data):
        raise CorruptRecordError(f"empty {CODEC_NAMES[codec]} data")
    # A size the data claims is trusted only up to a plausible ratio: a few lying bytes must
    # not buy a large zeroed buffer. Real output beyond it just takes a retry or two.
    cap = _TRUSTED_RATIO * len(data)
    guess = 4 * len(data) if guess is None else min(guess, cap)
    size = min(max(guess, _MIN_GUESS), max_size)
    while True:
        out = _allocate(size)
        try:
            written = module.decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if _BUFFER_FULL not in str(exc):
                raise CorruptRecordError(f"{CODEC_NAMES[codec]} data is corrupt: {exc}") from None
            if size >= max_size:
                raise DecompressionLimitError(
                    f"{CODEC_NAMES[codec]} data decompresses to more than {max_size} bytes"
                ) from None
            size = min(size * 4, max_size)
            continue
        return out, written


def _gzip_size_hint(data) -> int | None:
    """ISIZE, the input size mod 2**32 in the last 4 bytes of a gzip member (RFC 1952)."""
    if len(data) < 18:
        return None
    return _UINT32_LE.unpack_from(data, len(data) - 4)[0]


def _lz4_size_hint(data) -> int | None:
    """Content size of an lz4 frame when its FLG byte (bit 3) says the header holds it."""
    if len(data) < 15 or bytes(data[:4]) != _LZ4_MAGIC or not data[4] & 0x08:
        return None
    return _UINT64_LE.unpack_from(data, 6)[0]


def _zstd_size_hint(data) -> int | None:
    """Frame_Content_Size of the first zstd frame when present (RFC 8878 section 3.1.1.1).

    Frame header: magic (4), descriptor (1): bits 7-6 size-field flag, bit 5 single
    segment, bits 1-0 dictionary-id flag; then window descriptor (1, absent for single
    segment), dictionary id (0/1/2/4), content size (0/1/2/4/8; 2 bytes store size - 256).
    """
    if len(data) < 6 or bytes(data[:4]) != _ZSTD_MAGIC:
        return None
    descriptor = data[4]
    size_flag, single_segment = descriptor >> 6, descriptor & 0x20
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 0x03]
    width = (1 if single_segment else 0, 2, 4, 8)[size_flag]
    if width == 0 or len(data) < pos + width:
        return None
    value = int.from_bytes(data[pos : pos + width], "little")
    return value + 256 if width == 2 else value


def _snappy_raw_decompress(data, max_size: int):
    """One raw snappy block; its varint header gives the exact output size up front."""
    try:
        size = cramjam.snappy.decompress_raw_len(data)
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"snappy data is corrupt: {exc}") from None
    if size > _SNAPPY_MAX_RATIO * len(data) + 64:  # a lie, not a large block: corrupt
        raise CorruptRecordError(f"snappy block of {len(data)} bytes claims {size}")
    if size > max_size:
        raise DecompressionLimitError(f"snappy data of {size} bytes exceeds {max_size}")
    out = _allocate(size)
    try:
        written = cramjam.snappy.decompress_raw_into(data, out)
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"snappy data is corrupt: {exc}") from None
    if written != size:
        raise CorruptRecordError("snappy block shorter than its header says")
    return out, size


def _snappy_xerial_decompress(view: memoryview, max_size: int):
    """xerial framing: sum the blocks' length headers first, then decompress in place."""
    blocks = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    end = len(view)
    try:
        while pos < end:
            if end - pos < 4:
                raise CorruptRecordError("xerial snappy block length truncated")
            length = _INT32_BE.unpack_from(view, pos)[0]
            pos += 4
            if length < 0 or length > end - pos:
                raise CorruptRecordError(f"xerial snappy block length {length} out of range")
            block = view[pos : pos + length]
            size = cramjam.snappy.decompress_raw_len(block)
            if size > _SNAPPY_MAX_RATIO * length + 64:
                raise CorruptRecordError(f"snappy block of {length} bytes claims {size}")
            total += size
            if total > max_size:
                raise DecompressionLimitError(f"xerial snappy data exceeds {max_size} bytes")
            blocks.append((block, size))
            pos += length
        out = _allocate(total)
        target = memoryview(out)
        at = 0
        for block, size in blocks:
            if cramjam.snappy.decompress_raw_into(block, target[at : at + size]) != size:
                raise CorruptRecordError("xerial snappy block shorter than its header says")
            at += size
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"xerial snappy data is corrupt: {exc}") from None
    return out, total
