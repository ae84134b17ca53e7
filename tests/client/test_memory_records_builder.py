"""The C ``MemoryRecordsBuilder.append`` against the Python records encoder: same bytes, same
refusals, the futures it makes, and no reference leaks."""

from __future__ import annotations

import gc
import sys
import time
import weakref

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.client._memory_records_builder import MemoryRecordsBuilder
from odradek.client.producer_batch import ProducerBatch
from odradek.client.record_future import RecordFuture
from odradek.records.batch import BATCH_HEADER_SIZE
from odradek.records.builder import BatchBuilder

BASE_TS = 1_700_000_000_000

blob = st.none() | st.binary(max_size=300) | st.integers(8100, 20_000).map(lambda n: b"L" * n)
# Timestamp offsets up to decades either side: deltas of every varint width, negative too.
offset_ms = st.integers(-5, 200) | st.integers(-(1 << 40), 1 << 40)


@given(st.lists(st.tuples(offset_ms, blob, blob), min_size=1, max_size=30))
def test_append_is_byte_identical_to_the_records_builder(records):
    batch = ProducerBatch("t", 0, 0.0, 1 << 30)
    builder = BatchBuilder()
    futures = []
    for dt, key, value in records:
        futures.append(batch.append(BASE_TS + dt, key, value))
        builder.append(BASE_TS + dt, key, value)
    assert batch.seal() == builder.build()
    batch.complete(10)
    assert [f.result().offset for f in futures] == list(range(10, 10 + len(records)))
    assert [f.result().timestamp for f in futures] == [BASE_TS + dt for dt, _, _ in records]


def test_bytes_like_keys_and_values_encode_as_bytes():
    batch, builder = ProducerBatch("t", 0, 0.0, 1 << 20), BatchBuilder()
    for key, value in ((bytearray(b"k1"), memoryview(b"v1")), (memoryview(b"xkx")[1:2], bytearray())):
        batch.append(BASE_TS, key, value)
        builder.append(BASE_TS, bytes(key), bytes(value))
    assert batch.seal() == builder.build()


def test_a_record_past_the_limit_is_refused_and_changes_nothing():
    batch = ProducerBatch("t", 0, 0.0, BATCH_HEADER_SIZE + 2 * 109)
    assert batch.append(BASE_TS, None, b"x" * 100) is not None  # 109 bytes with its length
    assert batch.append(BASE_TS, None, b"x" * 101) is None  # one byte over the limit
    assert batch.append(BASE_TS, None, b"x" * 100) is not None  # exactly at the limit
    before = bytes(batch.buf)
    assert batch.append(BASE_TS, None, b"") is None
    assert bytes(batch.buf) == before and batch.count == 2 and len(batch.timestamps) == 2


def test_the_first_record_always_fits_and_sets_the_base_timestamp():
    batch = ProducerBatch("t", 0, 0.0, BATCH_HEADER_SIZE + 10)
    assert batch.append(BASE_TS + 7, None, b"y" * 1000) is not None
    assert batch.count == 1 and batch.base_ts == BASE_TS + 7
    assert batch.append(BASE_TS, None, b"") is None


def test_no_timestamp_means_now_in_milliseconds():
    batch = ProducerBatch("t", 0, 0.0, 1 << 20)
    before = time.time_ns() // 1_000_000
    batch.append(None, None, b"v")
    after = time.time_ns() // 1_000_000
    assert before <= batch.timestamps[0] <= after and batch.base_ts == batch.timestamps[0]


@pytest.mark.parametrize("key, value, error", [
    (None, "text", TypeError), ("text", b"v", TypeError), (None, 5, TypeError),
])
def test_bad_records_raise_before_anything_changes(key, value, error):
    batch = ProducerBatch("t", 0, 0.0, 1 << 20)
    batch.append(BASE_TS, None, b"first")
    before = bytes(batch.buf)
    with pytest.raises(error):
        batch.append(BASE_TS, key, value)
    assert bytes(batch.buf) == before and batch.count == 1 and batch.timestamps == [BASE_TS]


@pytest.mark.parametrize("timestamp, error", [(1.5, TypeError), ("now", TypeError), (1 << 70, OverflowError)])
def test_bad_timestamps_raise(timestamp, error):
    batch = ProducerBatch("t", 0, 0.0, 1 << 20)
    with pytest.raises(error):
        batch.append(timestamp, None, b"v")
    assert batch.count == 0 and len(batch.buf) == BATCH_HEADER_SIZE


def test_a_sealed_batch_refuses_appends():
    batch = ProducerBatch("t", 0, 0.0, 1 << 20)
    batch.append(BASE_TS, None, b"v")
    batch.seal()
    with pytest.raises(RuntimeError):
        batch.append(BASE_TS, None, b"v")


class PlainFuture(tuple):
    """Tuple's __new__, object's __init__: made without a Python call."""


class CountingFuture(tuple):
    made = 0

    def __init__(self, pair):
        CountingFuture.made += 1


def test_futures_are_the_type_asked_for_holding_result_and_index():
    batch = ProducerBatch("t", 0, 0.0, 1 << 20)
    default = batch.append(BASE_TS, None, b"a")
    plain = batch.append(BASE_TS, None, b"b", PlainFuture)
    counted = batch.append(BASE_TS, None, b"c", CountingFuture)
    via_lambda = batch.append(BASE_TS, None, b"d", lambda pair: ("made", pair))
    assert type(default) is RecordFuture and (default[0], default[1]) == (batch.result, 0)
    assert type(plain) is PlainFuture and tuple(plain) == (batch.result, 1)
    assert type(counted) is CountingFuture and CountingFuture.made == 1 and counted[1] == 2
    assert via_lambda == ("made", (batch.result, 3))


def test_constructor_checks_its_arguments():
    with pytest.raises(TypeError):
        MemoryRecordsBuilder(b"not a bytearray", [], 100, None, tuple)
    with pytest.raises(ValueError):
        MemoryRecordsBuilder(bytearray(61), [1], 100, None, tuple)
    with pytest.raises(ValueError):
        MemoryRecordsBuilder(bytearray(200), [], 100, None, tuple)


def test_appending_leaks_no_references():
    value, key = b"v" * 50, b"k"

    def fill():
        batch = ProducerBatch("t", 0, 0.0, 1 << 20)
        for _ in range(200):
            batch.append(BASE_TS, key, value)
            batch.append(None, None, value, PlainFuture)
            batch.append(BASE_TS, None, memoryview(value))
        try:
            batch.append(BASE_TS, None, "bad")
        except TypeError:
            pass

    fill()
    gc.collect()
    refs = sys.getrefcount(value), sys.getrefcount(key)
    blocks = sys.getallocatedblocks()
    for _ in range(20):
        fill()
    gc.collect()
    assert (sys.getrefcount(value), sys.getrefcount(key)) == refs
    assert sys.getallocatedblocks() - blocks < 200  # 12,000 records appended and dropped


def test_a_batch_whose_buffer_was_deleted_refuses_appends():
    batch = ProducerBatch("t", 0, 0.0, 1 << 20)
    del batch.buf
    with pytest.raises(RuntimeError):
        batch.append(BASE_TS, None, b"v")


def test_use_before_init_is_refused():
    """A builder whose __init__ never ran has no timestamps, result or future type: append
    must refuse it, even with a ``buf`` set through the attribute."""
    class SkipsInit(MemoryRecordsBuilder):
        def __init__(self) -> None:
            self.buf = bytearray(BATCH_HEADER_SIZE)

    for builder in (MemoryRecordsBuilder.__new__(MemoryRecordsBuilder), SkipsInit()):
        with pytest.raises(RuntimeError, match="__init__"):
            builder.append(BASE_TS, b"k", b"v")
        with pytest.raises(RuntimeError, match="__init__"):
            builder.append(None, None, b"v", RecordFuture)


@pytest.mark.parametrize("count", [2**31 - 1, 2**31, sys.maxsize, -1, -sys.maxsize - 1])
def test_count_never_leaves_the_int32_range(count):
    """A v2 batch counts its records (and numbers their offset deltas) in int32: at
    2**31 - 1 records, or with ``count`` set out of range, append refuses and changes nothing
    (it used to write offset delta 2**31 - 1 and beyond, and overflow at sys.maxsize)."""
    batch = ProducerBatch("t", 0, 0.0, 1 << 20)
    batch.append(BASE_TS, None, b"first")
    batch.count = count
    before = bytes(batch.buf)
    with pytest.raises(OverflowError):
        batch.append(BASE_TS, None, b"v")
    assert bytes(batch.buf) == before and batch.count == count and len(batch.timestamps) == 1


def test_the_last_int32_record_is_numbered_2_pow_31_minus_2():
    batch = ProducerBatch("t", 0, 0.0, 1 << 20)
    batch.append(BASE_TS, None, b"first")
    batch.count = 2**31 - 2
    future = batch.append(BASE_TS, None, b"v")
    assert future[1] == 2**31 - 2 and batch.count == 2**31 - 1


def test_append_holds_its_own_references_while_python_code_runs():
    """Python code may run in the middle of an append (the future type's call here; a key's
    ``__buffer__`` from Python 3.12, a garbage collection's finalizers anywhere) and re-run
    ``__init__``, dropping the builder's references to its buf, timestamps and result. The
    append holds its own: seen from inside that code, each keeps as many references as
    before (the builder's replaced by the append's), and the record and its future use the
    objects the append started with. (An append used to borrow them: with nothing else
    holding the buf, it would have written into freed memory.)"""
    class Result:
        pass

    buf, timestamps = bytearray(BATCH_HEADER_SIZE), []
    seen = {}

    def future_type(pair):
        seen["before"] = sys.getrefcount(buf), sys.getrefcount(timestamps)
        builder.__init__(bytearray(BATCH_HEADER_SIZE), [], 1 << 20, Result(), tuple)
        seen["after"] = sys.getrefcount(buf), sys.getrefcount(timestamps)
        return pair

    builder = MemoryRecordsBuilder(buf, timestamps, 1 << 20, Result(), future_type)
    old_result = weakref.ref(builder.result)
    future = builder.append(BASE_TS, b"k", b"v")
    # Before: ours, the builder's, the append's and getrefcount's argument; after the
    # builder dropped its own, the append's is still there.
    assert seen["before"] == (4, 4) and seen["after"] == (3, 3)
    assert sys.getrefcount(buf) == sys.getrefcount(timestamps) == 2  # only ours now
    assert future[0] is not builder.result and future[1] == 0
    assert old_result() is future[0]  # (kept alive by the future alone)
    assert len(buf) > BATCH_HEADER_SIZE and timestamps == [BASE_TS]
    assert builder.count == 0 and builder.buf == bytearray(BATCH_HEADER_SIZE)
