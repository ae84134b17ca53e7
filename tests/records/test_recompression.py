"""A batch rewritten into another codec (``records/recompression.py``): every record, the
producer fields and flags survive, the CRC is valid, and ``producer`` maps to no rewrite."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.records import batch as rb
from odradek.records import compression as codecs
from odradek.records.builder import LOG_APPEND_TIME, BatchSpec, build_batch
from odradek.records.errors import CorruptRecordError
from odradek.records.reader import RecordBatch
from odradek.records.recompression import (
    recompress_batch,
    recompress_batches,
    target_codec,
)
from odradek.storage.config import LogConfig
from tests.records.strategies import CODECS, record_lists, sample_records

PRODUCER = {"producer_id": 4242, "producer_epoch": 7, "base_sequence": 1000, "transactional": True,
            "partition_leader_epoch": 3}
# Fields the rewrite must keep (everything but the length, CRC and codec bits).
KEPT = ("base_offset", "partition_leader_epoch", "magic", "last_offset_delta", "base_timestamp",
        "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "records_count")


def rewrite(data: bytes, codec: int, level=None) -> tuple[rb.BatchHeader, bytearray]:
    header = rb.validate(data, 0, len(data))
    return header, recompress_batch(data, 0, len(data), header, codec, level)


def check_rewritten(original: bytes, out, codec: int) -> None:
    before, after = RecordBatch(original), RecordBatch(out)  # RecordBatch checks the CRC
    assert after.compression == codec
    assert after.header.attributes & ~rb.COMPRESSION_MASK == before.header.attributes & ~rb.COMPRESSION_MASK
    for name in KEPT:
        assert getattr(after.header, name) == getattr(before.header, name), name
    assert after.records() == before.records()


@pytest.mark.parametrize("source, codec", list(itertools.product(CODECS, CODECS)))
def test_every_codec_into_every_codec_keeps_records_fields_and_flags(source, codec):
    original = build_batch(sample_records(40), BatchSpec(base_offset=100, compression=source, **PRODUCER))
    _, out = rewrite(original, codec)
    check_rewritten(original, out, codec)
    assert rb.read_header(out).crc == rb.compute_crc(out) != rb.read_header(original).crc or source == codec


def test_log_append_time_bit_is_kept():
    original = build_batch(sample_records(5), BatchSpec(compression=codecs.GZIP, timestamp_type=LOG_APPEND_TIME))
    _, out = rewrite(original, codecs.ZSTD)
    assert RecordBatch(out).timestamp_type == LOG_APPEND_TIME
    check_rewritten(original, out, codecs.ZSTD)


@settings(max_examples=60, deadline=None)
@given(records=record_lists(min_size=1), source=st.sampled_from(CODECS), codec=st.sampled_from(CODECS))
def test_random_record_sets_survive_any_rewrite(records, source, codec):
    original = build_batch(records, BatchSpec(base_offset=records[0].offset, compression=source))
    _, out = rewrite(original, codec)
    check_rewritten(original, out, codec)


def test_batches_already_in_the_codec_are_not_touched():
    data = memoryview(bytearray(build_batch(sample_records(3), BatchSpec(compression=codecs.ZSTD)) * 2))
    batches = [(pos, size, rb.validate(data, pos, size)) for pos, size in rb.iter_batch_positions(data)]
    buf, placed = recompress_batches(data, batches, codecs.ZSTD)
    assert buf is data and placed is batches


def test_a_request_mixing_codecs_is_rewritten_batch_by_batch():
    parts = [build_batch(sample_records(4, base_offset=0), BatchSpec(compression=c, **PRODUCER)) for c in (0, 4, 3)]
    data = memoryview(bytearray(b"".join(parts)))
    batches = [(pos, size, rb.validate(data, pos, size)) for pos, size in rb.iter_batch_positions(data)]
    buf, placed = recompress_batches(data, batches, codecs.ZSTD)
    assert len(placed) == 3
    assert bytes(buf[placed[1][0]: placed[1][0] + placed[1][1]]) == parts[1]  # already zstd: verbatim
    for (pos, size, header), part in zip(placed, parts):
        assert header == rb.validate(buf, pos, size) and header.compression == codecs.ZSTD
        check_rewritten(part, buf[pos: pos + size], codecs.ZSTD)


def test_levels_are_passed_to_the_codec():
    big = [r._replace(value=b"abcdefgh" * 500) for r in sample_records(30, headers=False)]
    original = build_batch(big, BatchSpec())
    fast, best = rewrite(original, codecs.ZSTD, 1)[1], rewrite(original, codecs.ZSTD, 19)[1]
    assert len(best) <= len(fast)
    check_rewritten(original, best, codecs.ZSTD)


def test_a_body_that_does_not_decompress_is_corrupt():
    original = bytearray(build_batch(sample_records(5), BatchSpec(compression=codecs.LZ4)))
    original[rb.BATCH_HEADER_SIZE:] = b"\x00" * (len(original) - rb.BATCH_HEADER_SIZE)
    rb.update_crc(original)
    header = rb.validate(original)
    with pytest.raises(CorruptRecordError):
        recompress_batch(original, 0, len(original), header, codecs.ZSTD)


@pytest.mark.parametrize("config, expected", [
    (LogConfig(), None),
    (LogConfig(compression_type="producer"), None),
    (LogConfig(compression_type="uncompressed"), (codecs.NONE, None)),
    (LogConfig(compression_type="snappy"), (codecs.SNAPPY, None)),
    (LogConfig(compression_type="gzip"), (codecs.GZIP, None)),  # -1: the codec's default
    (LogConfig(compression_type="gzip", compression_gzip_level=9), (codecs.GZIP, 9)),
    (LogConfig(compression_type="lz4"), (codecs.LZ4, 9)),
    (LogConfig(compression_type="zstd", compression_zstd_level=-5), (codecs.ZSTD, -5)),
])
def test_target_codec_of_a_config(config, expected):
    assert target_codec(config) == expected
