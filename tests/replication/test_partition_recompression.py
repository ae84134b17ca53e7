"""``compression.type`` on the produce path: the leader writes batches of another codec in the
topic's codec, offsets from the log end, producer fields kept (so idempotent duplicates are
still found), ``max.message.bytes`` checked on the rewritten batch; ``producer`` writes the
produced bytes unchanged."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records import batch as rb
from odradek.records import compression as codecs
from odradek.records.reader import iter_batches
from odradek.replication.partition import CheckOffLoop, Partition
from odradek.replication.produce_validation import ProduceError
from odradek.storage.config import LOG_APPEND_TIME, LogConfig
from tests.storage.helpers import T0, make_batch, open_log

NOW = T0


def partition(tmp_path, **config) -> Partition:
    log = open_log(tmp_path, LogConfig(**config))
    return Partition("topic", 0, uuid.uuid4(), log, leader_id=1, isr=(1,), leader_epoch=5)


def produce(part: Partition, *batches: bytes):
    """The append as ``ReplicaManager`` makes it: records the loop may not decompress are
    checked first (there on a worker thread)."""
    records = memoryview(bytearray(b"".join(batches)))
    try:
        return part.append_records_as_leader(records, NOW)
    except CheckOffLoop:
        return part.append_records_as_leader(records, NOW, part.check_records_off_loop(records))


def log_bytes(part: Partition) -> bytes:
    return part.log.read(0, 1 << 24).read()


def written(part: Partition):
    return list(iter_batches(log_bytes(part)))


def test_producer_writes_the_produced_bytes_unchanged(tmp_path):
    part = partition(tmp_path)
    data = make_batch(0, 5, compression=codecs.LZ4)
    produce(part, data)
    stored = log_bytes(part)
    assert stored[rb.MAGIC_OFFSET:] == data[rb.MAGIC_OFFSET:]  # past offset and leader epoch
    assert rb.read_header(stored).compression == codecs.LZ4


@pytest.mark.parametrize("kind, codec", [("zstd", codecs.ZSTD), ("uncompressed", codecs.NONE),
                                         ("gzip", codecs.GZIP), ("snappy", codecs.SNAPPY)])
def test_batches_of_other_codecs_are_rewritten(tmp_path, kind, codec):
    part = partition(tmp_path, compression_type=kind)
    sources = [make_batch(0, 3, compression=c) for c in (codecs.NONE, codecs.LZ4, codecs.GZIP)]
    result = produce(part, *sources)
    assert (result.base_offset, result.last_offset) == (0, 8)
    batches = written(part)
    assert [b.compression for b in batches] == [codec] * 3
    assert [b.base_offset for b in batches] == [0, 3, 6]
    assert all(b.header.partition_leader_epoch == 5 for b in batches)
    got = [(r.offset, r.timestamp, r.key, r.value) for b in batches for r in b.records()]
    expected = [(i, r.timestamp, r.key, r.value)
                for i, r in enumerate(r for s in sources for r in next(iter_batches(s)).records())]
    assert got == expected


def test_log_append_time_stamps_the_rewritten_batch(tmp_path):
    part = partition(tmp_path, compression_type="zstd", message_timestamp_type=LOG_APPEND_TIME)
    result = produce(part, make_batch(0, 4, timestamp=5, compression=codecs.GZIP))
    (batch,) = written(part)  # iter_batches checked the CRC
    assert batch.compression == codecs.ZSTD and result.log_append_time == NOW
    assert batch.header.max_timestamp == NOW and [r.timestamp for r in batch.records()] == [NOW] * 4


def test_idempotent_duplicates_are_still_found_after_a_rewrite(tmp_path):
    part = partition(tmp_path, compression_type="zstd")
    first = make_batch(0, 3, compression=codecs.LZ4, producer_id=9, base_sequence=0)
    produce(part, make_batch(0, 2))  # something before it, so its offsets are not 0
    placed = produce(part, first)
    (_, batch) = written(part)
    assert (batch.compression, batch.producer_id, batch.header.producer_epoch, batch.header.base_sequence) == \
        (codecs.ZSTD, 9, 0, 0)
    again = produce(part, first)
    assert (again.base_offset, again.last_offset) == (placed.base_offset, placed.last_offset) == (2, 4)
    assert part.log_end_offset == 5
    nxt = produce(part, make_batch(0, 1, compression=codecs.LZ4, producer_id=9, base_sequence=3))
    assert nxt.base_offset == 5


def test_max_message_bytes_applies_to_the_rewritten_batch(tmp_path):
    values = [bytes([65 + i % 26]) * 2000 for i in range(10)]
    small = make_batch(0, 10, values=values, compression=codecs.ZSTD)
    assert len(small) < 1000
    part = partition(tmp_path, compression_type="uncompressed", max_message_bytes=10_000)
    with pytest.raises(ProduceError) as e:
        produce(part, small)
    assert e.value.error == ErrorCode.MESSAGE_TOO_LARGE and "recompression" in str(e.value)
    assert part.log_end_offset == 0


def test_a_body_that_does_not_decompress_is_corrupt_message(tmp_path):
    data = bytearray(make_batch(0, 3, compression=codecs.GZIP))
    data[rb.BATCH_HEADER_SIZE:] = b"\x01" * (len(data) - rb.BATCH_HEADER_SIZE)
    rb.update_crc(data)
    part = partition(tmp_path, compression_type="zstd")
    with pytest.raises(ProduceError) as e:
        produce(part, bytes(data))
    assert e.value.error == ErrorCode.CORRUPT_MESSAGE
    assert part.log_end_offset == 0


def test_a_config_change_takes_effect_on_the_next_produce(tmp_path):
    part = partition(tmp_path)
    produce(part, make_batch(0, 1, compression=codecs.LZ4))
    part.log.update_config(dataclasses.replace(part.log.config, compression_type="gzip"))
    produce(part, make_batch(0, 1, compression=codecs.LZ4))
    part.log.update_config(dataclasses.replace(part.log.config, compression_type="producer"))
    produce(part, make_batch(0, 1, compression=codecs.LZ4))
    assert [b.compression for b in written(part)] == [codecs.LZ4, codecs.GZIP, codecs.LZ4]


def test_legacy_message_sets_are_rewritten_after_conversion(tmp_path):
    from odradek.records.legacy import build_message_set
    from odradek.records.record import Record

    records = [Record(i, T0 + i, b"k%d" % i, b"v%d" % i) for i in range(3)]
    part = partition(tmp_path, compression_type="lz4")
    produce(part, build_message_set(records, magic=1, compression=codecs.GZIP))
    (batch,) = written(part)
    assert batch.compression == codecs.LZ4
    assert [(r.key, r.value) for r in batch.records()] == [(r.key, r.value) for r in records]
