import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.records.batch import compute_crc, read_header, set_base_offset, validate
from odradek.records.builder import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    BatchBuilder,
    BatchSpec,
    build_batch,
)
from odradek.records.reader import RecordBatch
from odradek.records.record import Record
from tests.records.strategies import CODECS, record_lists, sample_records


@pytest.mark.parametrize("codec", CODECS)
@given(records=record_lists(min_size=1))
def test_round_trip_every_codec(codec, records):
    batch = build_batch(records, BatchSpec(base_offset=records[0].offset, compression=codec))
    header = validate(batch, 0, len(batch))
    assert header.compression == codec
    assert header.records_count == len(records)
    assert header.last_offset == records[-1].offset
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert RecordBatch(batch).records() == records


@given(
    spec=st.builds(
        BatchSpec,
        base_offset=st.integers(0, 2**63 - 1),
        compression=st.sampled_from(CODECS),
        timestamp_type=st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]),
        producer_id=st.integers(-1, 2**63 - 1),
        producer_epoch=st.integers(-1, 2**15 - 1),
        base_sequence=st.integers(-1, 2**31 - 1),
        transactional=st.booleans(),
        control=st.booleans(),
        partition_leader_epoch=st.integers(-1, 2**31 - 1),
    )
)
def test_header_fields(spec):
    builder = BatchBuilder(spec)
    builder.append(1000, b"k", b"v")
    builder.append(900, None, b"w")
    header = validate(builder.build())
    assert header.base_offset == spec.base_offset
    assert header.compression == spec.compression
    assert header.timestamp_type == spec.timestamp_type
    assert header.producer_id == spec.producer_id
    assert header.producer_epoch == spec.producer_epoch
    assert header.base_sequence == spec.base_sequence
    assert header.is_transactional == spec.transactional
    assert header.is_control == spec.control
    assert header.partition_leader_epoch == spec.partition_leader_epoch
    assert (header.last_offset_delta, header.base_timestamp, header.max_timestamp) == (1, 1000, 1000)


def test_crc_is_crc32c_of_attributes_to_end_and_survives_offset_patch():
    batch = bytearray(build_batch(sample_records(5), BatchSpec(base_offset=100)))
    assert read_header(batch).crc == compute_crc(batch)
    set_base_offset(batch, 0, 5000)
    assert validate(batch).base_offset == 5000
    assert RecordBatch(batch).records()[0].offset == 5000


def test_default_offsets_are_consecutive_and_explicit_ones_may_skip():
    builder = BatchBuilder(BatchSpec(base_offset=10))
    assert builder.append(5, b"a", b"1") == 10
    assert builder.append(6, b"b", b"2", offset=15) == 15
    assert builder.next_offset == 16
    assert builder.append(7, b"c", b"3") == 16
    assert len(builder) == 3
    assert [r.offset for r in RecordBatch(builder.build()).records()] == [10, 15, 16]
    with pytest.raises(ValueError):
        builder.append(8, None, None, offset=16)
    with pytest.raises(ValueError):
        BatchBuilder(BatchSpec(base_offset=10)).append(1, None, None, offset=9)
    with pytest.raises(ValueError):
        BatchBuilder().append(1, None, None, offset=2**31)


def test_empty_batch_and_compacted_last_offset():
    empty = RecordBatch(BatchBuilder(BatchSpec(base_offset=7)).build())
    assert empty.records() == []
    assert (empty.header.records_count, empty.last_offset, empty.header.max_timestamp) == (0, 7, -1)
    builder = BatchBuilder(BatchSpec(base_offset=7))
    builder.append(1, b"k", b"v", offset=8)
    kept = RecordBatch(builder.build(last_offset_delta=9))
    assert kept.last_offset == 16 and [r.offset for r in kept.records()] == [8]
    with pytest.raises(ValueError):
        builder.build(last_offset_delta=0)


def test_uncompressed_size_tracks_appends():
    builder = BatchBuilder()
    assert builder.uncompressed_size == 61
    builder.append(0, b"k", b"v")
    assert builder.uncompressed_size == len(builder.build())


def test_invalid_specs_and_fields():
    with pytest.raises(ValueError):
        BatchBuilder(BatchSpec(compression=5))
    with pytest.raises(ValueError):
        BatchBuilder(BatchSpec(timestamp_type=2))
    with pytest.raises(ValueError):
        BatchBuilder().append(2**63, None, None)
    builder = BatchBuilder()
    builder.append(-(2**63), None, None)
    with pytest.raises(ValueError):
        builder.append(2**63 - 1, None, None)
    bad = BatchBuilder(BatchSpec(producer_epoch=2**15))
    bad.append(0, None, None)
    with pytest.raises(ValueError):
        bad.build()


def test_log_append_time_gives_every_record_the_max_timestamp():
    records = [Record(0, 10, None, b"a"), Record(1, 30, None, b"b")]
    batch = RecordBatch(build_batch(records, BatchSpec(timestamp_type=LOG_APPEND_TIME)))
    assert [r.timestamp for r in batch.records()] == [30, 30]
