import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch

from odradek.records.batch import validate
from odradek.records.builder import BatchSpec, build_batch
from odradek.records.control import (
    ABORT,
    COMMIT,
    ControlKey,
    EndTransactionMarker,
    build_end_txn_marker_batch,
    decode_control_key,
    decode_end_txn_marker,
    encode_control_key,
    encode_end_txn_marker_value,
)
from odradek.records.errors import CorruptRecordError
from odradek.records.reader import RecordBatch, iter_records
from odradek.records.record import Record


@pytest.mark.parametrize("control_type", [ABORT, COMMIT])
def test_marker_batch(control_type):
    raw = build_end_txn_marker_batch(
        control_type, 17, producer_id=4242, producer_epoch=3, timestamp=1234, base_offset=90,
        partition_leader_epoch=6,
    )
    header = validate(raw)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 3, -1)
    assert (header.base_offset, header.partition_leader_epoch, header.records_count) == (90, 6, 1)
    batch = RecordBatch(raw)
    [record] = batch.records()
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 17)
    assert (record.offset, record.timestamp) == (90, 1234)
    marker = batch.end_txn_marker()
    assert marker == EndTransactionMarker(control_type, 17)
    assert marker.committed == (control_type == COMMIT)


def test_kafka_python_reads_our_markers():
    raw = build_end_txn_marker_batch(COMMIT, 5, producer_id=1, producer_epoch=0, timestamp=9)
    batch = DefaultRecordBatch(bytearray(raw))
    assert batch.is_control_batch and batch.validate_crc()
    [record] = list(batch)
    assert record.type == COMMIT and record.version == 0


def test_reader_skips_control_batches_unless_asked():
    data = build_batch([Record(0, 1, b"k", b"v")], BatchSpec(producer_id=1, producer_epoch=0,
                                                              base_sequence=0, transactional=True))
    marker = build_end_txn_marker_batch(ABORT, 0, producer_id=1, producer_epoch=0, timestamp=2,
                                        base_offset=1)
    assert [r.offset for r in iter_records(data + marker)] == [0]
    assert [r.offset for r in iter_records(data + marker, include_control=True)] == [0, 1]


def test_keys_and_values():
    assert decode_control_key(encode_control_key(COMMIT)) == ControlKey(0, 1)
    assert decode_control_key(encode_control_key(3) + b"future") == ControlKey(0, 3)
    for key in (None, b"", b"\x00\x00\x00"):
        with pytest.raises(CorruptRecordError):
            decode_control_key(key)
    good = Record(0, 0, encode_control_key(ABORT), encode_end_txn_marker_value(2**31 - 1) + b"x")
    assert decode_end_txn_marker(good) == EndTransactionMarker(ABORT, 2**31 - 1)
    for record in (
        Record(0, 0, encode_control_key(2), encode_end_txn_marker_value(1)),
        Record(0, 0, encode_control_key(COMMIT), None),
        Record(0, 0, encode_control_key(COMMIT), b"\x00\x00\x00"),
    ):
        with pytest.raises(CorruptRecordError):
            decode_end_txn_marker(record)


def test_marker_errors():
    with pytest.raises(ValueError):
        build_end_txn_marker_batch(2, 0, producer_id=1, producer_epoch=0, timestamp=0)
    plain = RecordBatch(build_batch([Record(0, 0, None, None)]))
    with pytest.raises(CorruptRecordError):
        plain.end_txn_marker()
    empty_control = RecordBatch(build_batch([], BatchSpec(control=True)))
    with pytest.raises(CorruptRecordError):
        empty_control.end_txn_marker()
