import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.varint import varint_bytes, varlong_bytes
from odradek.records.errors import CorruptRecordError
from odradek.records.record import Record, decode_record, decode_records, encode_record
from tests.records.strategies import blobs, header_lists


def body(*parts: bytes) -> bytes:
    data = b"".join(parts)
    return varint_bytes(len(data)) + data


def test_byte_layout():
    # length 12 (zigzag 24): attributes 0, ts delta 5 (zigzag 10), offset delta 2 (4),
    # key "ab" (length 2 -> 4), value null (-1 -> 1), one header (1 -> 2) "h" -> b"v"
    encoded = encode_record(2, 5, b"ab", None, (("h", b"v"),))
    assert encoded == bytes([24, 0, 10, 4, 4]) + b"ab" + bytes([1, 2, 2]) + b"h" + bytes([2]) + b"v"
    assert decode_record(encoded, 100, 1000) == Record(102, 1005, b"ab", None, (("h", b"v"),))


def test_record_is_immutable_without_a_dict():
    record = Record(1, 2, b"k", b"v")
    with pytest.raises(AttributeError):
        record.offset = 5
    assert not hasattr(record, "__dict__")
    assert record.headers == ()


@given(
    offset_delta=st.integers(0, 2**31 - 1),
    timestamp_delta=st.integers(-(2**62), 2**62),
    key=blobs,
    value=blobs,
    headers=header_lists,
    base_offset=st.integers(0, 2**62),
    base_timestamp=st.integers(-(2**62), 2**62),
)
def test_round_trip(offset_delta, timestamp_delta, key, value, headers, base_offset, base_timestamp):
    encoded = encode_record(offset_delta, timestamp_delta, key, value, headers)
    record = decode_record(encoded, base_offset, base_timestamp)
    assert record == Record(
        base_offset + offset_delta, base_timestamp + timestamp_delta, key, value, headers
    )
    assert isinstance(record.key, (bytes, type(None)))


def test_many_records_and_fixed_timestamp():
    records = [Record(i, 50 + i, b"k%d" % i, b"v" * i) for i in range(300)]
    data = b"".join(encode_record(r.offset, r.timestamp - 50, r.key, r.value) for r in records)
    assert decode_records(data, 300, 0, 50) == records
    fixed = decode_records(bytearray(data), 300, 0, 50, fixed_timestamp=7)
    assert {r.timestamp for r in fixed} == {7}


def test_header_keys_with_invalid_utf8_round_trip_byte_exact():
    raw = body(b"\x00\x00\x00\x01\x01\x02", varint_bytes(2), b"\xff\xfe", varint_bytes(0))
    record = decode_record(raw)
    assert record.headers == (("\udcff\udcfe", b""),)
    assert encode_record(0, 0, None, None, record.headers) == raw


def test_encode_rejects_bad_offset_delta_and_null_header_key():
    with pytest.raises(ValueError):
        encode_record(2**31, 0, None, None)
    with pytest.raises(ValueError):
        encode_record(0, 0, None, None, ((None, b"x"),))


MINIMAL = b"\x00\x00\x00\x01\x01\x00"  # attributes, deltas 0, key null, value null, 0 headers

BAD_RECORDS = {
    "empty": b"",
    "length only": b"\x0c",
    "negative length": varint_bytes(-3) + MINIMAL,
    "length short of fields": body(b"\x00\x00\x00\x01\x01"),
    "length past fields": body(MINIMAL + b"\x00"),
    "length past buffer": varint_bytes(200) + MINIMAL,
    "key length -2": body(b"\x00\x00\x00", varint_bytes(-2), b"\x01\x00"),
    "key length past record": body(b"\x00\x00\x00", varint_bytes(1000), b"abc\x01\x00"),
    "huge key length": body(b"\x00\x00\x00", varint_bytes(2**31 - 1), b"\x01\x00"),
    "value past record": body(b"\x00\x00\x00\x01", varint_bytes(10), b"abc\x00"),
    "negative header count": body(b"\x00\x00\x00\x01\x01", varint_bytes(-1)),
    "huge header count": body(b"\x00\x00\x00\x01\x01", varint_bytes(2**31 - 1), b"\x00\x00"),
    "null header key": body(b"\x00\x00\x00\x01\x01\x02\x01\x01"),
    "header value past record": body(b"\x00\x00\x00\x01\x01\x02\x02h", varint_bytes(50)),
    "11-byte varlong": body(b"\x00" + b"\xff" * 10 + b"\x01\x00\x01\x01\x00"),
    "unterminated varint": b"\x80\x80",
    "6-byte header count": body(b"\x00\x00\x00\x01\x01" + b"\x80" * 5 + b"\x00"),
    "trailing bytes": body(MINIMAL) + b"\x00",
}


@pytest.mark.parametrize("name", BAD_RECORDS)
def test_malformed_records_raise_corrupt_record_error(name):
    with pytest.raises(CorruptRecordError):
        decode_records(BAD_RECORDS[name], 1, 0, 0)


def test_count_must_match():
    data = body(MINIMAL) * 3
    assert len(decode_records(data, 3, 0, 0)) == 3
    with pytest.raises(CorruptRecordError):
        decode_records(data, 2, 0, 0)
    with pytest.raises(CorruptRecordError):
        decode_records(data, 4, 0, 0)
    with pytest.raises(CorruptRecordError):
        decode_records(data, 2**31 - 1, 0, 0)  # no allocation by count


def test_every_truncation_is_corrupt():
    data = encode_record(3, -70000, b"key" * 50, b"value" * 40, (("a", b"b"), ("c", None)))
    for cut in range(len(data)):
        with pytest.raises(CorruptRecordError):
            decode_records(data[:cut], 1, 0, 0)


@given(data=st.binary(max_size=64), count=st.integers(0, 5))
def test_random_bytes_never_raise_anything_else(data, count):
    try:
        decode_records(data, count, 0, 0)
    except CorruptRecordError:
        pass


def test_varlong_timestamp_extremes():
    for delta in (-(2**63), 2**63 - 1):
        encoded = encode_record(0, delta, None, None)
        assert decode_record(encoded).timestamp == delta
    assert varlong_bytes(-1) == b"\x01"
