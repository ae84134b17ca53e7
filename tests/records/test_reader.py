import struct

import pytest

from odradek.records import compression as codecs
from odradek.records.batch import update_crc, validate
from odradek.records.builder import BatchSpec, build_batch
from odradek.records.errors import CorruptRecordError
from odradek.records.legacy import LegacyBatch, build_message_set
from odradek.records.reader import RecordBatch, iter_batches, iter_records, read_batch
from odradek.records.record import Record
from tests.records.strategies import CODECS, sample_batch, sample_records


def test_iterates_batches_and_skips_a_partial_last_one():
    first = sample_batch(codecs.NONE, 5, base_offset=0)
    second = sample_batch(codecs.ZSTD, 5, base_offset=5)
    third = sample_batch(codecs.GZIP, 5, base_offset=10)
    buf = first + second + third
    for cut in range(len(first + second), len(buf)):
        batches = list(iter_batches(buf[:cut]))
        assert [b.base_offset for b in batches] == [0, 5]
    assert [b.next_offset for b in iter_batches(buf)] == [5, 10, 15]
    assert [r.offset for r in iter_records(buf)] == list(range(15))
    assert [r.offset for r in iter_records(memoryview(buf), len(first), len(buf))] == list(
        range(5, 15)
    )


def test_mixed_legacy_and_v2_entries_as_an_old_log_serves_them():
    old = sample_records(4, headers=False, base_offset=0)
    new = sample_records(3, base_offset=4)
    buf = build_message_set(old[:2], 0) + build_message_set(old[2:], 1, codecs.GZIP)
    buf += build_batch(new, BatchSpec(base_offset=4))
    batches = list(iter_batches(buf))
    assert [type(b) for b in batches] == [LegacyBatch, LegacyBatch, LegacyBatch, RecordBatch]
    assert [b.magic for b in batches] == [0, 0, 1, 2]
    offsets = [r.offset for r in iter_records(buf)]
    assert offsets == list(range(7))


def test_record_batch_view_properties():
    raw = sample_batch(codecs.LZ4, 3, base_offset=40, producer_id=9, producer_epoch=1,
                       base_sequence=0)
    batch = read_batch(raw)
    assert isinstance(batch, RecordBatch)
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (40, 42, 43)
    assert (batch.compression, batch.producer_id, batch.timestamp_type) == (codecs.LZ4, 9, 0)
    assert not batch.is_control and not batch.is_transactional
    plain = sample_batch(codecs.NONE, 3, base_offset=40, producer_id=9, producer_epoch=1,
                         base_sequence=0)
    assert batch.records_bytes() == plain[61:]
    assert list(batch) == batch.records() == sample_records(3, base_offset=40)
    assert "base_offset=40" in repr(batch)


def test_decompression_limit_applies():
    raw = build_batch([Record(0, 0, None, bytes(100_000))], BatchSpec(compression=codecs.ZSTD))
    with pytest.raises(CorruptRecordError):
        RecordBatch(raw).records(max_decompressed=50_000)
    with pytest.raises(CorruptRecordError):
        list(iter_records(raw, max_decompressed=50_000))


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation(codec):
    raw = sample_batch(codec, 6)
    for cut in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            validate(raw[:cut])
        with pytest.raises(CorruptRecordError):
            RecordBatch(raw[:cut])
        assert list(iter_batches(raw[:cut])) == []


@pytest.mark.parametrize("codec", CODECS)
def test_every_bit_flip_fails_validation_outside_uncovered_fields(codec):
    raw = sample_batch(codec, 4)
    for bit in range(len(raw) * 8):
        flipped = bytearray(raw)
        flipped[bit // 8] ^= 1 << (bit % 8)
        byte = bit // 8
        if byte < 8 or 12 <= byte < 16:  # base offset, leader epoch: outside the CRC
            assert RecordBatch(flipped).records()
            continue
        with pytest.raises(CorruptRecordError):
            validate(flipped, 0, len(raw))
        if 8 <= byte < 12:  # a longer batch_length makes the batch look partial: skipped
            try:
                assert list(iter_records(bytes(flipped))) == []
            except CorruptRecordError:
                pass
            continue
        with pytest.raises(CorruptRecordError):
            list(iter_records(bytes(flipped)))


def resigned(raw: bytearray) -> bytes:
    update_crc(raw, 0, len(raw))
    return bytes(raw)


@pytest.mark.parametrize("codec", CODECS)
def test_every_bit_flip_past_the_crc_decodes_or_is_corrupt(codec):
    # Re-signing after the flip lets it reach decompression and record decoding.
    raw = sample_batch(codec, 4)
    for bit in range(21 * 8, len(raw) * 8):
        flipped = bytearray(raw)
        flipped[bit // 8] ^= 1 << (bit % 8)
        try:
            for batch in iter_batches(resigned(flipped)):
                batch.records(max_decompressed=1 << 20)
        except CorruptRecordError:
            pass


def patched(raw: bytes, fmt: str, offset: int, value: int) -> bytes:
    buf = bytearray(raw)
    struct.pack_into(fmt, buf, offset, value)
    return resigned(buf)


def test_huge_or_negative_header_fields():
    raw = sample_batch(codecs.NONE, 3)
    for value in (2**31 - 1, 4, -1):
        with pytest.raises(CorruptRecordError):
            RecordBatch(patched(raw, ">i", 57, value)).records()  # records_count
    with pytest.raises(CorruptRecordError):
        RecordBatch(patched(raw, ">i", 23, -1))  # last_offset_delta
    with pytest.raises(CorruptRecordError):
        list(iter_batches(patched(raw, ">i", 8, -5)))  # batch_length
    assert list(iter_batches(patched(raw, ">i", 8, 2**31 - 1))) == []  # looks partial
    with pytest.raises(CorruptRecordError):
        list(iter_batches(patched(raw, ">i", 8, 20) + bytes(100)))  # below a header
    with pytest.raises(CorruptRecordError):
        RecordBatch(patched(raw, ">h", 21, 5)).records()  # codec 5 (re-signed)


def test_unknown_codec_and_magic():
    raw = sample_batch(codecs.NONE, 2)
    with pytest.raises(CorruptRecordError):
        RecordBatch(patched(raw, ">h", 21, 7)).records()
    bad_magic = bytearray(raw)
    bad_magic[16] = 3
    with pytest.raises(CorruptRecordError):
        read_batch(bytes(bad_magic))
    with pytest.raises(CorruptRecordError):
        read_batch(raw[:16])


def test_compressed_records_area_holding_garbage():
    raw = bytearray(sample_batch(codecs.NONE, 2))
    raw[21:23] = struct.pack(">h", codecs.SNAPPY)
    with pytest.raises(CorruptRecordError):
        RecordBatch(resigned(raw)).records()
