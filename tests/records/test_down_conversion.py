"""Down-conversion of v2 batches to legacy message sets (magic 0 and 1)."""

import pytest
from hypothesis import given

from odradek.records import compression as codecs
from odradek.records.builder import LOG_APPEND_TIME, BatchSpec, build_batch
from odradek.records.control import COMMIT, build_end_txn_marker_batch
from odradek.records.down_conversion import DownConverted, down_convert
from odradek.records.errors import CorruptRecordError
from odradek.records.legacy import LegacyBatch, iter_messages
from odradek.records.reader import iter_records
from odradek.records.record import Record
from tests.records.strategies import record_lists, sample_records

ALL_CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]


def strip(records, magic):
    """What a legacy message keeps of a record: no headers, and no timestamp in v0."""
    return [Record(r.offset, r.timestamp if magic else -1, r.key, r.value) for r in records]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ALL_CODECS)
def test_every_codec_converts_keeping_offsets_and_dropping_markers(magic, codec):
    records = sample_records(12)
    data = build_batch(records, BatchSpec(base_offset=100, compression=codec))
    marker = build_end_txn_marker_batch(COMMIT, 1, producer_id=1, producer_epoch=0,
                                        timestamp=5, base_offset=112)
    converted = down_convert(data + marker + data[:40], magic)  # a partial batch at the end
    entries = list(iter_messages(converted.message_set))
    assert {m.magic for m in entries} == {magic}
    wrapped = codec == codecs.GZIP or codec == codecs.SNAPPY or (codec == codecs.LZ4 and magic == 1)
    assert [m.compression for m in entries] == ([codec] if wrapped else [codecs.NONE] * 12)
    assert list(iter_records(converted.message_set)) == strip(records, magic)
    assert converted.records == 12 and converted.next_offset == 113


@pytest.mark.parametrize("magic", [0, 1])
@given(records=record_lists(min_size=1, max_size=10))
def test_any_records_round_trip(magic, records):
    for codec in (codecs.NONE, codecs.GZIP):
        converted = down_convert(build_batch(records, BatchSpec(base_offset=records[0].offset, compression=codec)), magic)
        assert list(iter_records(converted.message_set)) == strip(records, magic)


def test_records_before_the_first_offset_are_left_out():
    records = sample_records(10, base_offset=50)
    for codec in (codecs.NONE, codecs.GZIP):
        data = build_batch(records, BatchSpec(base_offset=50, compression=codec))
        converted = down_convert(data, 1, first_offset=54)
        assert list(iter_records(converted.message_set)) == strip(records[4:], 1)


def test_max_bytes_stops_at_a_message_boundary_but_sends_one_when_asked():
    records = sample_records(20, headers=False)
    data = build_batch(records, BatchSpec(base_offset=100))
    whole = down_convert(data, 0).message_set
    sizes = [len(m) for m in _entries(whole)]
    limit = sum(sizes[:5]) + sizes[5] - 1  # five messages and most of the sixth
    part = down_convert(data, 0, max_bytes=limit)
    assert part.message_set == whole[: sum(sizes[:5])] and part.records == 5
    assert down_convert(data, 0, max_bytes=1).message_set == whole[: sizes[0]]
    assert down_convert(data, 0, max_bytes=1, min_one=False).message_set == b""


def test_a_compressed_batch_is_one_wrapper_kept_or_left_out_whole():
    first = build_batch(sample_records(5, base_offset=0), BatchSpec(base_offset=0, compression=codecs.GZIP))
    second = build_batch(sample_records(5, base_offset=5), BatchSpec(base_offset=5, compression=codecs.GZIP))
    one = down_convert(first, 1).message_set
    assert down_convert(first + second, 1, max_bytes=len(one) + 10).message_set == one
    assert down_convert(first + second, 1, max_bytes=10).message_set == one  # min_one


def test_log_append_time_and_create_time_in_v1():
    records = [Record(7, 5, None, b"a"), Record(8, 9, b"k", b"b")]
    for codec in (codecs.NONE, codecs.GZIP):
        data = build_batch(records, BatchSpec(base_offset=7, timestamp_type=LOG_APPEND_TIME, compression=codec))
        entries = list(iter_messages(down_convert(data, 1).message_set))
        assert all(m.timestamp_type == 1 for m in entries)
        assert [r.timestamp for e in entries for r in LegacyBatch(e).records()] == [9, 9]
        created = build_batch(records, BatchSpec(base_offset=7, compression=codec))
        assert [r.timestamp for r in iter_records(down_convert(created, 1).message_set)] == [5, 9]


def test_markers_only_convert_to_nothing_but_move_on():
    marker = build_end_txn_marker_batch(COMMIT, 1, producer_id=1, producer_epoch=0, timestamp=5, base_offset=40)
    converted = down_convert(marker, 0, first_offset=40)
    assert converted.message_set == b"" and converted.next_offset == 41


def test_corrupt_batch_raises_and_bad_magic_is_refused():
    data = bytearray(build_batch(sample_records(3), BatchSpec()))
    data[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        down_convert(bytes(data), 0)
    with pytest.raises(ValueError):
        down_convert(b"", 2)
    assert down_convert(b"", 0, first_offset=9) == DownConverted(b"", 9, 0)


def _entries(message_set: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(message_set):
        size = 12 + int.from_bytes(message_set[pos + 8 : pos + 12], "big")
        out.append(message_set[pos : pos + size])
        pos += size
    return out
