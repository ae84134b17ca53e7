"""The vectorised fetch decoder against the client's per-record decoder."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.records.batch import update_crc
from odradek.records.builder import LOG_APPEND_TIME, BatchSpec, build_batch
from odradek.records.errors import CorruptRecordError
from odradek.records.legacy import build_message_set
from odradek.records.reader import iter_batches
from odradek.records.record import Record
from odradek.spark.record_columns import decode_fetched, next_offset_after
from tests.records.strategies import CODECS, record_lists, sample_records


def reference(buf, start, end):
    """(offset, timestamp, key, value, headers) as the client decodes them."""
    out = []
    for batch in iter_batches(buf):
        if batch.is_control:
            continue
        out += [(r.offset, r.timestamp, r.key, r.value, r.headers or None)
                for r in batch.records() if start <= r.offset < end]
    return out


def rows(columns, headers=True):
    if columns is None:
        return []
    hs = columns.headers.to_pylist() if headers else [None] * len(columns)
    hs = [None if h is None else tuple((x["key"], x["value"]) for x in h) for h in hs]
    return list(zip(columns.offsets.tolist(), columns.timestamps.tolist(), columns.keys.to_pylist(),
                    columns.values.to_pylist(), hs, strict=True))


def batches(groups, codec=0, **spec):
    return b"".join(build_batch(g, BatchSpec(base_offset=g[0].offset, compression=codec, **spec)) for g in groups)


@given(st.lists(record_lists(min_size=1, max_size=12), min_size=1, max_size=4), st.sampled_from(CODECS),
       st.data())
def test_same_records_as_the_client_decoder(groups, codec, data):
    # Batches of one partition hold increasing offsets.
    shift, fixed = 0, []
    for g in groups:
        fixed.append([Record(r.offset - g[0].offset + shift, r.timestamp, r.key, r.value, r.headers) for r in g])
        shift = fixed[-1][-1].offset + 1 + data.draw(st.integers(0, 5))
    buf = batches(fixed, codec)
    offsets = [r.offset for g in fixed for r in g]
    start = data.draw(st.integers(0, offsets[-1] + 1))
    end = data.draw(st.integers(start, offsets[-1] + 2))
    columns, next_offset = decode_fetched(buf, start, end, include_headers=True)
    assert rows(columns) == reference(buf, start, end)
    assert next_offset >= min(end, offsets[-1] + 1) or next_offset > offsets[-1]
    plain, _ = decode_fetched(buf, start, end)
    assert rows(plain, headers=False) == [r[:4] + (None,) for r in reference(buf, start, end)]


def test_long_values_and_wide_varints():
    # 3-byte lengths and offset deltas, 9-byte timestamp deltas, empty and null fields.
    records = [Record(i * 5000, 1_700_000_000_000 + i * 2**40, None if i % 3 else b"k" * i,
                      b"v" * (20_000 + i) if i % 2 else b"", ()) for i in range(6)]
    buf = build_batch(records, BatchSpec(base_offset=0))
    columns, next_offset = decode_fetched(buf, 0, 10**9)
    assert rows(columns, headers=False) == [r[:4] + (None,) for r in reference(buf, 0, 10**9)]
    assert next_offset == 25_001


def test_log_append_time_and_types():
    buf = build_batch(sample_records(10), BatchSpec(base_offset=100, timestamp_type=LOG_APPEND_TIME))
    columns, _ = decode_fetched(buf, 0, 10**9)
    assert set(columns.timestamp_types.tolist()) == {1}
    assert columns.timestamps.tolist() == [r[1] for r in reference(buf, 0, 10**9)]


def test_control_batches_are_skipped_and_partial_batches_left():
    data = build_batch(sample_records(5, base_offset=0), BatchSpec(base_offset=0))
    control = build_batch([Record(5, 1, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", ())],
                          BatchSpec(base_offset=5, control=True, transactional=True, producer_id=1))
    more = build_batch(sample_records(5, base_offset=6), BatchSpec(base_offset=6))
    columns, next_offset = decode_fetched(data + control + more[:-3], 0, 100)
    assert columns.offsets.tolist() == [0, 1, 2, 3, 4]
    assert next_offset == next_offset_after(data + control + more[:-3], 0) == 6
    assert next_offset_after(data + control + more, 3) == 11 and next_offset_after(more[:-3], 4) == 4


def test_read_committed_drops_aborted_transactions():
    """Producer 7's transaction at 0-2 is aborted (marker at 6), producer 8's at 3-5 is
    committed (marker at 7) and interleaved with it; a plain batch follows at 8."""
    from types import SimpleNamespace

    from odradek.records.control import ABORT, COMMIT, build_end_txn_marker_batch

    def txn(pid, base, n):
        return build_batch(sample_records(n, base_offset=base),
                           BatchSpec(base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=0,
                                     transactional=True))

    buf = (txn(7, 0, 3) + txn(8, 3, 3)
           + build_end_txn_marker_batch(ABORT, 0, producer_id=7, producer_epoch=0, timestamp=1, base_offset=6)
           + build_end_txn_marker_batch(COMMIT, 0, producer_id=8, producer_epoch=0, timestamp=1, base_offset=7)
           + txn(7, 8, 2))  # producer 7's next transaction, after its abort marker: kept
    aborted = [SimpleNamespace(producer_id=7, first_offset=0)]
    columns, next_offset = decode_fetched(buf, 0, 100, aborted=aborted)
    assert columns.offsets.tolist() == [3, 4, 5, 8, 9] and next_offset == 10
    uncommitted, _ = decode_fetched(buf, 0, 100)  # read_uncommitted keeps everything but the markers
    assert uncommitted.offsets.tolist() == [0, 1, 2, 3, 4, 5, 8, 9]
    later, _ = decode_fetched(buf, 4, 100, aborted=aborted)
    assert later.offsets.tolist() == [4, 5, 8, 9]


def test_legacy_message_sets_decode_slowly():
    records = [Record(i, 1000 + i, b"k%d" % i, b"v%d" % i) for i in range(4)]
    buf = build_message_set(records, 1)
    columns, next_offset = decode_fetched(buf, 1, 3, include_headers=True)
    assert rows(columns) == [(1, 1001, b"k1", b"v1", None), (2, 1002, b"k2", b"v2", None)]
    assert next_offset == next_offset_after(buf, 1) == 4
    assert next_offset_after(build_message_set(records, 1, 1), 0) == 4  # a gzip wrapper: its last offset


def test_nothing_in_range():
    buf = build_batch(sample_records(5, base_offset=0), BatchSpec(base_offset=0))
    assert decode_fetched(buf, 10, 20) == (None, 10)
    assert decode_fetched(buf, 2, 2) == (None, 5)
    assert decode_fetched(b"", 3, 20) == (None, 3)


def test_flipped_bits_fail_the_crc():
    buf = bytearray(build_batch(sample_records(5, base_offset=0), BatchSpec(base_offset=0)))
    buf[80] ^= 0x10
    with pytest.raises(CorruptRecordError):
        decode_fetched(bytes(buf), 0, 100)


@given(st.binary(min_size=1, max_size=200), st.integers(1, 6), st.booleans())
def test_garbage_records_with_a_valid_crc_raise_corrupt_record(body, count, headers):
    """A batch whose header and CRC are right but whose records are garbage: the decoder
    raises CorruptRecordError (or decodes something the records really spell), never
    anything else, and never reads past the buffer."""
    batch = bytearray(build_batch(sample_records(1, base_offset=0), BatchSpec(base_offset=0)))
    batch = batch[:61] + body
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, 57, count)
    update_crc(batch, 0, len(batch))
    try:
        columns, _ = decode_fetched(bytes(batch), 0, 10**12, include_headers=headers)
    except CorruptRecordError:
        return
    assert columns is None or len(columns) <= count
