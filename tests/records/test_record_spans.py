"""The vectorised record locator agrees with the per-record decoder, on good and bad input."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.varint import varint_bytes
from odradek.records.batch import BATCH_HEADER_SIZE, update_crc
from odradek.records.builder import LOG_APPEND_TIME, BatchSpec, build_batch
from odradek.records.errors import CorruptRecordError
from odradek.records.legacy import build_message_set
from odradek.records.reader import RecordBatch, iter_batches, read_batch
from odradek.records.record import Record
from odradek.records.record_spans import PendingRecords, decode_batches, locate_records
from tests.records.strategies import CODECS, record_lists, sample_records


def batches_of(*datas: bytes) -> list:
    return list(iter_batches(b"".join(datas)))


def per_record(batches) -> list[Record]:
    return [r for b in batches for r in b.records()]


def uniform(base_offset: int, count: int, size: int = 100, step_ms: int = 0) -> bytes:
    return build_batch([Record(base_offset + i, 1000 + i * step_ms, None, b"v" * size) for i in range(count)],
                       BatchSpec(base_offset=base_offset))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(record_lists(min_size=1, max_size=12), st.sampled_from(CODECS)), min_size=1, max_size=4))
def test_same_records_as_the_per_record_decoder(parts):
    datas, offset = [], 0
    for records, codec in parts:
        # Each batch's offsets continue from the last one's.
        shift = offset - records[0].offset
        records = [r._replace(offset=r.offset + shift) for r in records]
        datas.append(build_batch(records, BatchSpec(base_offset=records[0].offset, compression=codec)))
        offset = records[-1].offset + 1
    batches = batches_of(*datas)
    assert locate_records(batches).records() == per_record(batches)


def test_uniform_records_whose_length_changes_mid_batch():
    # Offset deltas from 64 on take two bytes: two strides in one batch, guessed in two rounds.
    batches = batches_of(uniform(0, 300), uniform(300, 5), uniform(305, 200, size=3, step_ms=1))
    spans = locate_records(batches)
    assert spans.records() == per_record(batches)
    assert spans.offsets.tolist() == list(range(505))


def test_records_of_varying_lengths_are_walked_one_by_one():
    records = [Record(i, 5, b"k" * (i % 17), b"v" * (i * 37 % 301)) for i in range(400)]
    batches = batches_of(build_batch(records))
    assert locate_records(batches).records() == records


def test_log_append_time_gives_every_record_the_max_timestamp():
    spec = BatchSpec(base_offset=0, timestamp_type=LOG_APPEND_TIME)
    batches = batches_of(build_batch([Record(i, 10 + i, None, b"x") for i in range(3)], spec))
    spans = locate_records(batches)
    assert spans.timestamps.tolist() == [12, 12, 12]
    assert spans.timestamp_types.tolist() == [1, 1, 1]


def test_headers_and_null_keys_and_values():
    records = sample_records(40)
    batches = batches_of(build_batch(records, BatchSpec(base_offset=100)))
    spans = locate_records(batches)
    assert spans.records() == records
    assert spans.keys() == [r.key for r in records]
    assert spans.headers() == [r.headers for r in records]


def corrupted(data: bytes, at: int, byte: int) -> RecordBatch:
    """The batch with one byte of its records section replaced and its CRC made right again,
    so only the record decoders can object."""
    buf = bytearray(data)
    buf[BATCH_HEADER_SIZE + at % (len(buf) - BATCH_HEADER_SIZE)] = byte
    update_crc(buf, 0, len(buf))
    return read_batch(bytes(buf))


@settings(max_examples=400, deadline=None)
@given(record_lists(min_size=1, max_size=8), st.integers(0, 10_000), st.integers(0, 255))
def test_a_corrupt_record_is_refused_exactly_when_the_per_record_decoder_refuses_it(records, at, byte):
    batch = corrupted(build_batch(records, BatchSpec(base_offset=records[0].offset)), at, byte)
    try:
        expected = batch.records()
    except CorruptRecordError:
        with pytest.raises(CorruptRecordError):
            locate_records([batch])
    else:
        assert locate_records([batch]).records() == expected


def test_truncated_and_overlong_sections_are_refused():
    data = bytearray(uniform(0, 3))
    # Claim one record more than the section holds.
    data[57:61] = (4).to_bytes(4, "big")
    update_crc(data, 0, len(data))
    with pytest.raises(CorruptRecordError):
        locate_records([read_batch(bytes(data))])
    # A record whose length runs past the batch.
    data = bytearray(uniform(0, 1))
    data[BATCH_HEADER_SIZE:BATCH_HEADER_SIZE + 2] = varint_bytes(4000)
    update_crc(data, 0, len(data))
    with pytest.raises(CorruptRecordError):
        locate_records([read_batch(bytes(data))])


def test_decode_batches_starts_at_the_position_and_keeps_legacy_entries_in_order():
    legacy = build_message_set([Record(10, 7, b"k", b"legacy")], magic=1)
    batches = batches_of(uniform(0, 10), legacy, uniform(11, 4))
    pending, after, error = decode_batches(batches, position=4)
    assert error is None and after == 15
    records = pending.take(100)
    assert [r.offset for r in records] == [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    assert records[6].value == b"legacy"
    assert not pending and pending.next_offset() is None


def test_pending_records_are_taken_in_order_across_pieces():
    batches = batches_of(uniform(0, 5), build_message_set([Record(5, 1, None, b"x")], magic=1),
                         uniform(6, 5))
    pending, _, _ = decode_batches(batches)
    taken = []
    while pending:
        assert pending.next_offset() == len(taken)
        taken += pending.take(3)
    assert [r.offset for r in taken] == list(range(11))
    assert PendingRecords([]).take(5) == []


def test_records_before_a_corrupt_batch_are_kept_with_the_error():
    good = uniform(0, 5)
    bad = corrupted(uniform(5, 5), 0, 0xFF)  # a length varint that never ends
    with pytest.raises(CorruptRecordError):
        bad.records()
    batches = batches_of(good) + [bad] + batches_of(uniform(10, 5))
    pending, after, error = decode_batches(batches)
    assert isinstance(error, CorruptRecordError)
    assert after == 5
    assert [r.offset for r in pending.take(100)] == [0, 1, 2, 3, 4]
