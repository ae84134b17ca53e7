import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.records import compression as codecs
from odradek.records.errors import CorruptRecordError
from odradek.records.legacy import (
    LegacyBatch,
    LegacyMessage,
    build_message_set,
    encode_message,
    iter_messages,
    read_message,
)
from odradek.records.record import Record
from tests.records.strategies import LEGACY_CODECS, record_lists, sample_records


def test_v0_byte_layout():
    raw = encode_message(5, 0, 0, 999, b"k", b"val")
    body = b"\x00\x00" + struct.pack(">i", 1) + b"k" + struct.pack(">i", 3) + b"val"
    assert raw == struct.pack(">qiI", 5, 4 + len(body), zlib.crc32(body)) + body
    assert read_message(raw) == LegacyMessage(5, 0, 0, -1, b"k", b"val")


def test_v1_byte_layout_with_nulls():
    raw = encode_message(7, 1, 0x08, 123456, None, None)
    body = b"\x01\x08" + struct.pack(">q", 123456) + struct.pack(">ii", -1, -1)
    assert raw == struct.pack(">qiI", 7, 4 + len(body), zlib.crc32(body)) + body
    message = read_message(raw)
    assert message == LegacyMessage(7, 1, 0x08, 123456, None, None)
    assert message.timestamp_type == 1 and message.compression == 0


def strip(records, magic):
    """What a legacy message set keeps of records: no headers, and no timestamps in v0."""
    return [Record(r.offset, r.timestamp if magic else -1, r.key, r.value) for r in records]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
@given(records=record_lists(min_size=1, headers=False))
def test_round_trip(magic, codec, records):
    data = build_message_set(records, magic, codec)
    entries = list(iter_messages(data))
    assert len(entries) == (1 if codec else len(records))
    got = [r for e in entries for r in LegacyBatch(e).records()]
    assert got == strip(records, magic)


def test_v1_wrapper_has_relative_inner_offsets_and_last_offset():
    records = sample_records(5, headers=False, base_offset=1000)
    [wrapper] = iter_messages(build_message_set(records, 1, codecs.GZIP))
    assert wrapper.offset == 1004 and wrapper.key is None
    assert wrapper.timestamp == max(r.timestamp for r in records)
    inner = LegacyBatch(wrapper).inner_messages()
    assert [m.offset for m in inner] == [0, 1, 2, 3, 4]
    assert [r.offset for r in LegacyBatch(wrapper).records()] == [1000, 1001, 1002, 1003, 1004]


def test_v0_wrapper_keeps_absolute_inner_offsets():
    records = sample_records(3, headers=False, base_offset=50)
    [wrapper] = iter_messages(build_message_set(records, 0, codecs.SNAPPY))
    assert [m.offset for m in LegacyBatch(wrapper).inner_messages()] == [50, 51, 52]


def test_unassigned_v1_wrapper_keeps_relative_offsets():
    inner = b"".join(encode_message(i, 1, 0, 10 + i, None, b"x") for i in range(3))
    wrapper = encode_message(0, 1, codecs.GZIP, 12, None, codecs.compress(codecs.GZIP, inner))
    assert [r.offset for r in LegacyBatch(read_message(wrapper)).records()] == [0, 1, 2]


def test_log_append_time_wrapper_timestamp_applies_to_inner_messages():
    records = [Record(0, 5, None, b"a"), Record(1, 9, None, b"b")]
    data = build_message_set(records, 1, codecs.LZ4, timestamp_type=1)
    [batch] = [LegacyBatch(m) for m in iter_messages(data)]
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch.records()] == [9, 9]


def test_build_rejects_headers_unless_dropped_and_zstd():
    records = [Record(0, 0, None, b"v", (("h", b"x"),))]
    with pytest.raises(ValueError):
        build_message_set(records, 1)
    assert list(iter_messages(build_message_set(records, 1, drop_headers=True)))[0].value == b"v"
    with pytest.raises(ValueError):
        build_message_set(records, 1, codecs.ZSTD, drop_headers=True)
    with pytest.raises(ValueError):
        encode_message(0, 2, 0, 0, None, None)
    assert build_message_set([], 1, codecs.GZIP) == b""


def wrap(inner: bytes, magic=1, codec=codecs.GZIP, value=None) -> bytes:
    value = codecs.compress(codec, inner) if value is None else value
    return encode_message(9, magic, codec, 0, None, value)


BAD_WRAPPERS = {
    "empty inner set": wrap(b""),
    "compressed inner message": wrap(wrap(encode_message(0, 1, 0, 0, None, b"x"))),
    "magic mismatch": wrap(encode_message(0, 0, 0, 0, None, b"x"), magic=1),
    "partial inner message": wrap(encode_message(0, 1, 0, 0, None, b"x")[:-1]),
    "null value": encode_message(9, 1, codecs.GZIP, 0, None, None),
    "garbage value": wrap(b"", value=b"not gzip at all"),
}


@pytest.mark.parametrize("name", BAD_WRAPPERS)
def test_bad_wrappers(name):
    with pytest.raises(CorruptRecordError):
        LegacyBatch(read_message(BAD_WRAPPERS[name])).records()


def resign(raw: bytearray) -> bytes:
    struct.pack_into(">I", raw, 12, zlib.crc32(raw[16:]))
    return bytes(raw)


def test_bad_messages():
    good = bytearray(encode_message(1, 1, 0, 0, b"key", b"value"))
    cases = [
        b"",
        bytes(good[:17]),
        bytes(good[:-1]),
        resign(bytearray(good[:16]) + b"\x02" + good[17:]),  # magic 2
        resign(bytearray(good[:17]) + b"\x04" + good[18:]),  # zstd codec in v1
        resign(bytearray(good[:8]) + struct.pack(">i", 13) + good[12:25]),  # size below fields
        resign(bytearray(good[:30]) + struct.pack(">i", 2**31 - 1) + good[34:]),  # huge key
        resign(bytearray(good[:30]) + struct.pack(">i", -2) + good[34:]),
        resign(bytearray(good[:30]) + struct.pack(">i", 2) + good[34:]),  # fields short of size
    ]
    flipped = bytearray(good)
    flipped[-1] ^= 1
    cases.append(bytes(flipped))
    for raw in cases:
        with pytest.raises(CorruptRecordError):
            read_message(raw)
    with pytest.raises(CorruptRecordError):
        read_message(bytes(good) + b"x", 0, len(good) + 1)


def test_every_truncation_and_bit_flip():
    data = build_message_set(sample_records(4, headers=False), 1, codecs.SNAPPY)
    for cut in range(len(data)):
        with pytest.raises(CorruptRecordError):
            list(iter_messages(data[:cut])) if cut else read_message(data[:cut])
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        try:
            for message in iter_messages(bytes(flipped)):
                LegacyBatch(message).records()
        except CorruptRecordError:
            pass
        else:
            assert bit < 64  # only the offset field is not covered by the CRC


@given(garbage=st.binary(max_size=120))
def test_random_bytes_raise_corrupt_record_error_only(garbage):
    try:
        for message in iter_messages(garbage):
            LegacyBatch(message).records()
    except CorruptRecordError:
        pass
