import gzip
import struct
import tracemalloc

import cramjam
import lz4.frame
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from odradek.records import compression as c
from odradek.records.errors import CorruptRecordError
from tests.records.strategies import CODECS

TEXT = b"".join(b'{"host":"10.0.0.%d","path":"/p/%d","status":200}\n' % (i % 250, i) for i in range(5000))


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(max_size=5000))
def test_round_trip_any_bytes(codec, data):
    assert c.decompress(codec, c.compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_large_text_and_memoryview_input(codec):
    compressed = c.compress(codec, memoryview(TEXT))
    if codec:
        assert len(compressed) < len(TEXT) // 2
    assert c.decompress(codec, memoryview(compressed)) == TEXT


@pytest.mark.parametrize("codec", [1, 3, 4])
@pytest.mark.parametrize("level", [1, 9])
def test_levels(codec, level):
    assert c.decompress(codec, c.compress(codec, TEXT, level=level)) == TEXT


def test_snappy_writes_xerial_framing_in_32k_blocks():
    out = c.compress(c.SNAPPY, TEXT)
    assert out[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", out[8:16]) == (1, 1)
    pos, blocks = 16, 0
    while pos < len(out):
        (length,) = struct.unpack_from(">i", out, pos)
        block = out[pos + 4 : pos + 4 + length]
        assert len(bytes(cramjam.snappy.decompress_raw(block))) == min(
            c.XERIAL_BLOCK_SIZE, len(TEXT) - blocks * c.XERIAL_BLOCK_SIZE
        )
        pos += 4 + length
        blocks += 1
    assert blocks == -(-len(TEXT) // c.XERIAL_BLOCK_SIZE)


def test_snappy_reads_raw_blocks_as_librdkafka_writes_them():
    raw = bytes(cramjam.snappy.compress_raw(TEXT))
    assert c.decompress(c.SNAPPY, raw) == TEXT


def test_snappy_xerial_ignores_version_fields_and_reads_empty_stream():
    little_endian = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1)
    block = bytes(cramjam.snappy.compress_raw(b"abc"))
    assert c.decompress(c.SNAPPY, little_endian + struct.pack(">i", len(block)) + block) == b"abc"
    assert c.decompress(c.SNAPPY, little_endian) == b""


def test_lz4_frames_have_independent_blocks_and_no_content_checksum():
    frame = c.compress(c.LZ4, TEXT)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flags = frame[4]
    assert flags >> 6 == 1  # frame version 01
    assert flags & 0x20  # blocks independent: Kafka's Java reader needs it
    assert not flags & 0x04


@pytest.mark.parametrize(
    "encode, codec",
    [
        (kafka_codec.gzip_encode, c.GZIP),
        (lambda d: kafka_codec.snappy_encode(d, xerial_compatible=True), c.SNAPPY),
        (lambda d: kafka_codec.snappy_encode(d, xerial_compatible=False), c.SNAPPY),
        (kafka_codec.lz4_encode, c.LZ4),
        (kafka_codec.zstd_encode, c.ZSTD),
    ],
)
def test_reads_what_kafka_python_writes_and_the_reverse(encode, codec):
    assert c.decompress(codec, encode(TEXT)) == TEXT
    decode = {
        c.GZIP: kafka_codec.gzip_decode,
        c.SNAPPY: kafka_codec.snappy_decode,
        c.LZ4: kafka_codec.lz4_decode,
        c.ZSTD: kafka_codec.zstd_decode,
    }[codec]
    assert decode(c.compress(codec, TEXT)) == TEXT


def test_gzip_several_members():
    assert c.decompress(c.GZIP, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_output_limit_is_exact(codec):
    data = bytes(range(256)) * 1000
    compressed = c.compress(codec, data)
    assert c.decompress(codec, compressed, max_size=len(data)) == data
    with pytest.raises(CorruptRecordError):
        c.decompress(codec, compressed, max_size=len(data) - 1)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_growth_past_a_wrong_size_hint(codec):
    # Hints come from the data; a lying or missing hint costs retries, never the result.
    data = TEXT * 20
    compressed = bytearray(c.compress(codec, data))
    if codec == c.GZIP:
        compressed[-4:] = (1).to_bytes(4, "little")  # ISIZE: the trailer is not CRC-checked here
        with pytest.raises(CorruptRecordError):  # ... but the inflater checks it
            c.decompress(codec, bytes(compressed))
        return
    assert c.decompress(codec, bytes(compressed)) == data


@pytest.fixture(scope="module")
def bombs():
    zeros = bytes(64 << 20)
    return {codec: c.compress(codec, zeros) for codec in (1, 2, 3, 4)}


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_bomb_is_refused_without_allocating_its_size(bombs, codec):
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="more than|exceeds"):
            c.decompress(codec, bombs[codec], max_size=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_snappy_raw_length_header_checked_before_allocation():
    lying = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10  # claims 4 GiB
    with pytest.raises(CorruptRecordError):
        c.decompress(c.SNAPPY, lying)


def test_xerial_block_length_out_of_range():
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for tail in (struct.pack(">i", 2**31 - 1) + b"x", struct.pack(">i", -5), b"\x00\x00"):
        with pytest.raises(CorruptRecordError):
            c.decompress(c.SNAPPY, header + tail)


@pytest.mark.parametrize("codec", CODECS)
@given(garbage=st.binary(max_size=200))
def test_garbage_raises_corrupt_record_error_only(codec, garbage):
    try:
        c.decompress(codec, garbage, max_size=1 << 20)
    except CorruptRecordError:
        pass


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_every_truncation_and_bit_flip_is_corrupt_or_decodes(codec):
    compressed = c.compress(codec, TEXT[:3000])
    for cut in range(len(compressed)):
        try:
            c.decompress(codec, compressed[:cut])
        except CorruptRecordError:
            pass
    for bit in range(0, len(compressed) * 8, 3):
        flipped = bytearray(compressed)
        flipped[bit // 8] ^= 1 << (bit % 8)
        try:
            c.decompress(codec, bytes(flipped), max_size=1 << 20)
        except CorruptRecordError:
            pass


def test_empty_input_and_unknown_codecs():
    assert c.decompress(c.NONE, b"") == b""
    for codec in (1, 3, 4):
        with pytest.raises(CorruptRecordError):
            c.decompress(codec, b"")
    for codec in (5, 6, 7, -1):
        with pytest.raises(CorruptRecordError):
            c.decompress(codec, b"abc")
        with pytest.raises(ValueError):
            c.compress(codec, b"abc")
    with pytest.raises(CorruptRecordError):
        c.codec_name(9)
    assert c.codec_name(4) == "zstd"


def test_lz4_frame_with_old_kafka_header_checksum_is_corrupt():
    frame = bytearray(c.compress(c.LZ4, b"hello" * 100))
    frame[6] ^= 0xFF  # the HC byte of a frame without content size
    with pytest.raises(CorruptRecordError, match="corrupt"):
        c.decompress(c.LZ4, bytes(frame))


def test_uncompressed_limit():
    with pytest.raises(CorruptRecordError):
        c.decompress(c.NONE, b"abcd", max_size=3)


def test_size_claims_are_disbelieved_past_a_plausible_ratio():
    import zstandard

    data = bytes(range(256)) * 300  # 76,800 bytes: a 4-byte content size field
    frame = bytearray(zstandard.ZstdCompressor().compress(data))
    assert c._zstd_size_hint(frame) == len(data)
    at = frame.index(len(data).to_bytes(4, "little"), 0, 18)
    frame[at : at + 4] = (200 << 20).to_bytes(4, "little")
    lying_snappy = b"\x80\x80\x80\x60" + b"\x00" * 10  # claims 192 MiB in 14 bytes
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError):
            c.decompress(c.ZSTD, bytes(frame))
        with pytest.raises(CorruptRecordError):
            c.decompress(c.SNAPPY, lying_snappy)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_size_hints():
    assert c._gzip_size_hint(gzip.compress(b"x" * 1234)) == 1234
    assert c._gzip_size_hint(b"short") is None
    assert c._lz4_size_hint(c.compress(c.LZ4, b"abc")) is None  # no content size written
    assert c._lz4_size_hint(lz4.frame.compress(b"x" * 5000, store_size=True)) == 5000
    assert c._zstd_size_hint(b"\x28\xb5\x2f\xfd") is None
    assert c._zstd_size_hint(b"not zstd at all") is None
    assert c._zstd_size_hint(c.compress(c.ZSTD, b"x" * 300)) == 300
