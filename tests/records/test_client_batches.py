"""Batches and message sets written by real clients' own builders, read by our reader, and
ours read by theirs: kafka-python (pure Python) and aiokafka (its C extension builders).

Magic v0 with lz4 is left out: aiokafka refuses to write it, and kafka-python writes it
with the wrong frame header checksum of Kafka 0.8/0.9 (and needs xxhash for that), which
our reader rejects as corrupt (see test_compression).
"""

import pytest
from aiokafka.record._crecords import default_records as aio_default
from aiokafka.record._crecords import legacy_records as aio_legacy
from aiokafka.record._crecords import memory_records as aio_memory
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from odradek.records.batch import validate
from odradek.records.builder import BatchSpec, build_batch
from odradek.records.conversion import legacy_to_v2
from odradek.records.legacy import build_message_set
from odradek.records.reader import RecordBatch, iter_batches, iter_records
from odradek.records.record import Record
from tests.records.strategies import CODECS, LEGACY_CODECS, sample_records

V2_BUILDERS = {
    "kafka-python": DefaultRecordBatchBuilder,
    "aiokafka": aio_default.DefaultRecordBatchBuilder,
}
LEGACY_BUILDERS = {
    "kafka-python": LegacyRecordBatchBuilder,
    "aiokafka": aio_legacy.LegacyRecordBatchBuilder,
}


def client_v2_batch(client, codec, records, transactional=False, producer=(-1, -1, -1)):
    builder = V2_BUILDERS[client](
        magic=2, compression_type=codec, is_transactional=transactional,
        producer_id=producer[0], producer_epoch=producer[1], base_sequence=producer[2],
        batch_size=1 << 20,
    )
    for r in records:
        builder.append(r.offset, r.timestamp, r.key, r.value, list(r.headers))
    return bytes(builder.build())


@pytest.mark.parametrize("client", V2_BUILDERS)
@pytest.mark.parametrize("codec", CODECS)
def test_v2_batches_from_clients(client, codec):
    records = sample_records(40, base_offset=0)
    raw = client_v2_batch(client, codec, records, True, (77, 3, 1000))
    header = validate(raw)
    assert header.compression == codec and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 1000)
    assert header.last_offset_delta == 39 and header.records_count == 40
    assert RecordBatch(raw).records() == records


@pytest.mark.parametrize("codec", CODECS)
def test_fetch_like_buffer_of_memory_records_builder_batches(codec):
    buf = b""
    expected = []
    for start in (0, 10, 20):
        builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 20,
                                       offset=start)
        for r in sample_records(10, base_offset=start):
            builder.append(r.timestamp, r.key, r.value, list(r.headers))
            expected.append(r)
        builder.close()
        buf += bytes(builder.buffer())
    assert list(iter_records(buf + buf[:50])) == expected


LEGACY_CASES = [(m, c) for m in (0, 1) for c in LEGACY_CODECS if (m, c) != (0, 3)]


@pytest.mark.parametrize("client", LEGACY_BUILDERS)
@pytest.mark.parametrize("magic, codec", LEGACY_CASES)
def test_legacy_message_sets_from_clients(client, magic, codec):
    records = sample_records(25, headers=False, base_offset=0)
    builder = LEGACY_BUILDERS[client](magic=magic, compression_type=codec, batch_size=1 << 20)
    for r in records:
        builder.append(r.offset, r.timestamp, r.key, r.value)
    raw = bytes(builder.build())
    expected = [Record(r.offset, r.timestamp if magic else -1, r.key, r.value) for r in records]
    batches = list(iter_batches(raw))
    assert {b.magic for b in batches} == {magic}
    assert [r for b in batches for r in b.records()] == expected
    assert RecordBatch(legacy_to_v2(raw, assign_offsets=False)).records() == expected


@pytest.mark.parametrize("codec", CODECS)
def test_clients_read_our_v2_batches(codec):
    records = sample_records(30, base_offset=500)
    raw = build_batch(records, BatchSpec(base_offset=500, compression=codec, producer_id=5,
                                         producer_epoch=0, base_sequence=0))
    for reader in (DefaultRecordBatch(bytearray(raw)), aio_default.DefaultRecordBatch(raw)):
        assert reader.validate_crc()
        got = [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in reader]
        assert got == records


@pytest.mark.parametrize("magic, codec", LEGACY_CASES)
def test_clients_read_our_legacy_message_sets(magic, codec):
    records = sample_records(12, headers=False, base_offset=70)
    raw = build_message_set(records, magic, codec)
    expected = [(r.offset, r.timestamp if magic else None, r.key, r.value) for r in records]
    for memory_records in (MemoryRecords(raw), aio_memory.MemoryRecords(raw)):
        got = []
        while memory_records.has_next():
            batch = memory_records.next_batch()
            assert batch.validate_crc()
            got += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
        assert got == expected
