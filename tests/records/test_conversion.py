import pytest
from hypothesis import given

from odradek.records import compression as codecs
from odradek.records.batch import validate
from odradek.records.builder import LOG_APPEND_TIME
from odradek.records.conversion import legacy_to_v2
from odradek.records.down_conversion import down_convert
from odradek.records.errors import CorruptRecordError, InvalidRecordError
from odradek.records.legacy import build_message_set, encode_message
from odradek.records.reader import RecordBatch, iter_records
from odradek.records.record import Record
from tests.records.strategies import LEGACY_CODECS, record_lists, sample_records


def strip(records, magic):
    return [Record(r.offset, r.timestamp if magic else -1, r.key, r.value) for r in records]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
@given(records=record_lists(min_size=1, max_size=10, headers=False))
def test_up_conversion_keeping_offsets(magic, codec, records):
    v2 = legacy_to_v2(build_message_set(records, magic, codec), assign_offsets=False)
    batch = RecordBatch(v2)
    assert batch.compression == codec
    assert batch.records() == strip(records, magic)


def test_up_conversion_assigns_offsets_and_joins_entries():
    records = sample_records(6, headers=False)
    message_set = (
        build_message_set(records[:2], 1)
        + build_message_set(records[2:4], 1, codecs.GZIP)
        + build_message_set(records[4:], 1, codecs.LZ4)
    )
    batch = RecordBatch(legacy_to_v2(message_set, base_offset=0))
    assert batch.compression == codecs.GZIP  # the first compressed entry's codec
    assert [r.offset for r in batch.records()] == list(range(6))
    assert [r.value for r in batch.records()] == [r.value for r in records]
    assert batch.header.producer_id == -1
    recompressed = RecordBatch(legacy_to_v2(message_set, compression=codecs.ZSTD))
    assert recompressed.compression == codecs.ZSTD
    assert recompressed.records() == batch.records()


def test_up_conversion_of_producer_sets_with_all_zero_offsets():
    message_set = b"".join(encode_message(0, 0, 0, 0, None, b"v%d" % i) for i in range(3))
    v2 = legacy_to_v2(message_set)
    assert [r.offset for r in RecordBatch(v2).records()] == [0, 1, 2]
    with pytest.raises(InvalidRecordError):
        legacy_to_v2(message_set, assign_offsets=False)


def test_up_conversion_log_append_time_empty_and_corrupt():
    records = [Record(0, 5, None, b"a"), Record(1, 9, None, b"b")]
    v2 = RecordBatch(legacy_to_v2(build_message_set(records, 1, timestamp_type=1)))
    assert v2.timestamp_type == LOG_APPEND_TIME
    assert legacy_to_v2(b"") == b""
    with pytest.raises(CorruptRecordError):
        legacy_to_v2(build_message_set(records, 1)[:-1])


def test_legacy_entries_round_trip_through_v2():
    records = sample_records(8, headers=False)
    for magic in (0, 1):
        legacy = build_message_set(records, magic, codecs.SNAPPY)
        v2 = legacy_to_v2(legacy, assign_offsets=False)
        validate(v2)
        assert list(iter_records(down_convert(v2, magic).message_set)) == strip(records, magic)
