"""ProducerBatch: its fast record encoding against the records package, and completion."""

from __future__ import annotations

import asyncio
import concurrent.futures

from hypothesis import given
from hypothesis import strategies as st

from odradek.client.errors import KafkaTimeoutError
from odradek.client.producer_batch import ProducerBatch, RecordMetadata
from odradek.records import compression as codecs
from odradek.records.batch import read_header, validate
from odradek.records.builder import BatchBuilder
from odradek.records.reader import read_batch

BASE_TS = 1_700_000_000_000

# Sizes around the fast path's limit (8176 bytes of key + value), cheap to generate.
_large = st.integers(min_value=8100, max_value=8200).map(lambda n: b"L" * n)
record_st = st.tuples(
    st.integers(min_value=-5, max_value=20_000),  # timestamp offset (some out of table range)
    st.none() | st.binary(max_size=40) | _large,
    st.none() | st.binary(max_size=300) | _large,
    st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2).map(tuple),
)


@given(st.lists(record_st, min_size=1, max_size=30))
def test_sealed_batch_is_byte_identical_to_the_records_builder(records):
    batch = ProducerBatch("t", 0, 0.0, 1 << 30)
    builder = BatchBuilder()
    for dt, key, value, headers in records:
        assert batch.try_append(BASE_TS + dt, key, value, headers)
        builder.append(BASE_TS + dt, key, value, headers)
    assert batch.seal() == builder.build()


def test_offset_deltas_past_one_varint_byte_still_encode():
    batch = ProducerBatch("t", 0, 0.0, 1 << 30)
    builder = BatchBuilder()
    for i in range(9000):
        if i % 2:
            batch.try_append(BASE_TS, None, b"v", None)
        else:
            batch.append(BASE_TS, None, b"v")
        builder.append(BASE_TS, None, b"v")
    assert batch.seal() == builder.build()


def test_compressed_batches_decode_to_the_records_appended():
    for codec in (codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD):
        batch = ProducerBatch("t", 0, 0.0, 1 << 20)
        for i in range(50):
            batch.try_append(BASE_TS + i, b"k%d" % i, b"value-%d" % i * 3, (("h", b"x"),))
        data = batch.seal(codec)
        decoded = read_batch(data)
        assert decoded.compression == codec
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded.records()] == [
            (i, BASE_TS + i, b"k%d" % i, b"value-%d" % i * 3, (("h", b"x"),)) for i in range(50)]


def test_a_full_batch_refuses_the_record_and_stays_unchanged():
    batch = ProducerBatch("t", 0, 0.0, 200)
    assert batch.try_append(BASE_TS, None, b"x" * 100, None) is not None
    before = bytes(batch.buf)
    assert batch.try_append(BASE_TS, None, b"x" * 100, None) is None
    assert bytes(batch.buf) == before and batch.count == 1 and batch.timestamps == [BASE_TS]
    # The first record always fits, whatever its size.
    big = ProducerBatch("t", 0, 0.0, 200)
    assert big.try_append(BASE_TS, None, b"x" * 1000, None) is not None


def test_complete_gives_each_record_its_offset_and_timestamp():
    loop = asyncio.new_event_loop()
    try:
        batch = ProducerBatch("t", 3, 0.0, 1 << 20, loop)
        called = []
        futures = []
        for i in range(4):
            futures.append(batch.try_append(BASE_TS + i, None, b"v", None))
            if i == 1:
                batch.add_callback(lambda md, exc: called.append((md, exc)))
        assert futures[2].cancel()
        assert not any(f.done() for i, f in enumerate(futures) if i != 2)
        batch.complete(100)
        assert futures[0].result() == RecordMetadata("t", 3, 100, BASE_TS)
        assert futures[3].result() == RecordMetadata("t", 3, 103, BASE_TS + 3)
        assert futures[2].cancelled()  # a cancelled future stays so; its record was sent
        assert called == [(RecordMetadata("t", 3, 101, BASE_TS + 1), None)]
    finally:
        loop.close()


def test_complete_with_log_append_time_and_without_offsets():
    batch = ProducerBatch("t", 0, 0.0, 1 << 20)
    futures = [batch.try_append(BASE_TS, None, b"v", None) for _ in range(2)]
    forwarded = concurrent.futures.Future()
    batch.add_forward(forwarded)
    batch.complete(-1, 42)
    assert [f.result() for f in futures] == [RecordMetadata("t", 0, -1, 42)] * 2
    assert forwarded.result() == RecordMetadata("t", 0, -1, 42)


def test_fail_sets_the_error_on_every_future_and_callback():
    batch = ProducerBatch("t", 0, 0.0, 1 << 20)
    futures = []
    errors = []
    for _ in range(3):
        futures.append(batch.try_append(BASE_TS, None, b"v", None))
        batch.add_callback(lambda md, exc: errors.append((md, exc)))
    forwarded = concurrent.futures.Future()
    batch.add_forward(forwarded)
    error = KafkaTimeoutError("expired")
    batch.fail(error)
    batch.complete(5)  # a settled batch stays as it is
    assert all(f.exception() is error for f in futures)
    assert forwarded.exception() is error
    assert errors == [(None, error)] * 3


def test_restamp_sets_the_idempotence_fields_and_keeps_the_crc_valid():
    batch = ProducerBatch("t", 0, 0.0, 1 << 20)
    for i in range(3):
        batch.try_append(BASE_TS, None, b"v", None)
    batch.producer_id, batch.producer_epoch, batch.base_sequence = 7, 1, 10
    data = batch.seal()
    header = validate(data)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 10)
    batch.restamp(9, 0, 0)
    header = validate(batch.data)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.records_count) == (9, 0, 0, 3)
    assert read_header(batch.data).max_timestamp == BASE_TS


def test_requeued_batches_keep_their_order():
    from odradek.client.record_accumulator import PartitionQueue

    queue = PartitionQueue("t", 0)
    batches = [ProducerBatch("t", 0, float(i), 100) for i in range(5)]
    queue.sealed.extend(batches[3:])
    for b in batches[:3]:  # answered (failed) first to last
        queue.requeue(b)
    assert list(queue.sealed) == batches
    stamped = PartitionQueue("t", 0)
    for seq, b in zip((10, 0, 5), batches[:3]):
        b.base_sequence = seq
        stamped.requeue(b)
    assert [b.base_sequence for b in stamped.sealed] == [0, 5, 10]
