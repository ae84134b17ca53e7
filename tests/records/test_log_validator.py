"""The C log validator (``records/_log_validator.c``) against the Python produce path, and its
record walk against the Python record decoder.

The Python path (``replication/partition.py``) is the source of truth: for every input the C
call either returns None and leaves the buffer byte-identical, or returns exactly the summary
``Partition._assign_offsets`` builds and patches exactly the same bytes. ``python_path`` below
composes the Python functions themselves; it reimplements none of their checks.
"""

import json
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol import codec
from odradek.records import batch as rb
from odradek.records import compression as codecs
from odradek.records._log_validator import check_records, validate_and_assign
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.errors import CorruptRecordError, InvalidRecordError
from odradek.records.log_validator import INLINE_DECOMPRESSED, inline_decompress
from odradek.records.record import decode_records
from odradek.replication import partition as pp
from odradek.replication import produce_validation as pv
from tests.records import bad_batches as bad
from tests.records.strategies import CODECS, blobs, header_lists

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# What settings_for makes of an unlimited bound: beyond any int64 timestamp.
UNLIMITED = pv.UNLIMITED
NOW = 1_700_000_000_000

BATCH_LENGTH, LAST_OFFSET_DELTA, BASE_TIMESTAMP, MAX_TIMESTAMP = 8, 23, 27, 35
PRODUCER_ID, RECORDS_COUNT = 43, 57


def python_path(records, base_offset, leader_epoch, max_message_bytes, low, high, compacted=False):
    """``(summary, patched bytes)`` from the Python produce path on a copy of ``records``, or
    None when it refuses them or would do more than the fast path does (convert a legacy
    message set, consult producer state for an idempotent or transactional batch, check
    records off the event loop).

    ``low``/``high`` are Python's bounds, which may lie beyond int64 (``UNLIMITED``).
    """
    buf = memoryview(bytearray(records))
    try:
        converted, batches = pv.split_batches(buf)
    except (CorruptRecordError, InvalidRecordError):
        return None
    if converted is not buf:
        return None  # legacy: Python converts
    partition = SimpleNamespace(log_end_offset=base_offset, leader_epoch=leader_epoch, topic="t", index=0,
                                log=SimpleNamespace(config=SimpleNamespace(max_message_bytes=max_message_bytes)))
    partition._check_records = lambda *args: pp.Partition._check_records(partition, *args)
    # The bounds as ProduceSettings holds them, around a clock at 0.
    settings = pv.ProduceSettings(None, -low, high, None, True, True, compacted,
                                  *pv.inline_settings(partition.log.config))
    try:
        summaries, _ = pp.Partition._check_batches(partition, buf, batches, partition.log.config, settings, 0, None)
    except (pv.ProduceError, pp.CheckOffLoop):
        return None
    if any(header.producer_id != rb.NO_PRODUCER_ID or header.is_transactional for _, _, header in batches):
        return None  # producer state is Python's
    batches = pv.set_max_timestamps(buf, batches, summaries)
    try:
        info = pp.Partition._assign_offsets(partition, buf, batches, -1, summaries)
    except (ValueError, struct.error):
        return None  # a negative first offset, or a batch's base offset beyond int64
    if info.last_offset > INT64_MAX:
        return None  # an offset the log cannot hold: the fast path refuses it
    return tuple(info), bytes(buf)


def clamp(bound):
    return max(INT64_MIN, min(INT64_MAX, bound))


def c_path(records, base_offset, leader_epoch, max_message_bytes, low, high, compacted=False):
    """``(result, bytes after)`` of the C call on a copy of ``records``."""
    buf = bytearray(records)
    result = validate_and_assign(buf, base_offset, leader_epoch, max_message_bytes, clamp(low), clamp(high),
                                 fast_decompress(max_message_bytes), compacted)
    return result, bytes(buf)


def check_agrees(records, base_offset=0, leader_epoch=0, max_message_bytes=10**9, low=-UNLIMITED,
                 high=UNLIMITED, compacted=False):
    """Assert C and Python agree on ``records``; return the C result."""
    expected = python_path(records, base_offset, leader_epoch, max_message_bytes, low, high, compacted)
    result, after = c_path(records, base_offset, leader_epoch, max_message_bytes, low, high, compacted)
    if expected is None:
        assert result is None
        assert after == bytes(records)
    else:
        assert (result, after) == expected
    return result


def build(count=3, codec=0, timestamps=None, value=b"v", **spec):
    builder = BatchBuilder(BatchSpec(compression=codec, **spec))
    for i in range(count):
        ts = NOW + i if timestamps is None else timestamps[i]
        builder.append(ts, b"k%d" % i, value * (i + 1))
    return builder.build()


def patched(batch, offset, fmt, value, fix_crc=True):
    """``batch`` with the field at ``offset`` set (and the CRC recomputed, so that only that
    field's check can fail)."""
    out = bytearray(batch)
    struct.pack_into(fmt, out, offset, value)
    if fix_crc:
        rb.update_crc(out, 0, len(out))
    return bytes(out)


def fast_decompress(max_message_bytes):
    """The fast path's decompressor for a topic of that ``max.message.bytes``."""
    return pv.inline_settings(SimpleNamespace(max_message_bytes=max_message_bytes))[1]


def assert_refused(records, *args, compacted=False):
    buf = bytearray(records)
    assert validate_and_assign(buf, *args, fast_decompress(args[2]), compacted) is None
    assert buf == records


def refuse(records, base_offset=0, leader_epoch=0, max_message_bytes=10**9, low=INT64_MIN, high=INT64_MAX,
           compacted=False):
    assert_refused(records, base_offset, leader_epoch, max_message_bytes, low, high, compacted=compacted)
    assert python_path(records, base_offset, leader_epoch, max_message_bytes, low, high, compacted) is None


# --- agreement on valid input ----------------------------------------------------------------

timestamps = st.just(rb.NO_TIMESTAMP) | st.integers(NOW - 10**6, NOW + 10**6) | st.integers(-(2**40), 2**45)


@st.composite
def batches(draw):
    """One v2 batch of 1-8 consecutive records of random codec, keys, values, headers and
    timestamps, as a client's producer writes it."""
    spec = BatchSpec(
        base_offset=draw(st.integers(0, 2**40)),
        compression=draw(st.sampled_from(CODECS)),
        partition_leader_epoch=draw(st.integers(INT32_MIN, INT32_MAX)),
    )
    builder = BatchBuilder(spec)
    for _ in range(draw(st.integers(1, 8))):
        builder.append(draw(timestamps), draw(blobs), draw(blobs), draw(header_lists))
    return builder.build()


bounds = st.tuples(
    st.just(-UNLIMITED) | st.integers(NOW - 2 * 10**6, NOW) | st.integers(INT64_MIN, INT64_MAX),
    st.just(UNLIMITED) | st.integers(NOW, NOW + 2 * 10**6) | st.integers(INT64_MIN, INT64_MAX),
)
base_offsets = st.integers(0, 2**40) | st.integers(INT64_MAX - 2**12, INT64_MAX)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batches(), min_size=1, max_size=5), base_offsets, st.integers(INT32_MIN, INT32_MAX),
       st.sampled_from([10**9, 400, 2000]), bounds)
def test_agrees_with_python_path(parts, base_offset, leader_epoch, max_message_bytes, bound):
    check_agrees(b"".join(parts), base_offset, leader_epoch, max_message_bytes, *bound)


def test_assigns_offsets_and_epoch_and_summary():
    first, second = build(3, timestamps=[NOW, NOW + 9, NOW + 2]), build(2, codec=4, timestamps=[NOW, NOW + 5])
    buf = bytearray(first + second)
    # The largest timestamp is the second record's: offset 1001.
    assert validate_and_assign(buf, 1000, 7, 10**6, INT64_MIN, INT64_MAX, inline_decompress, False) == (
        1000, 1004, NOW + 9, 1001)
    a, b = rb.validate(buf, 0), rb.validate(buf, len(first))
    assert (a.base_offset, a.partition_leader_epoch, b.base_offset, b.partition_leader_epoch) == (1000, 7, 1003, 7)
    # Only base_offset and partition_leader_epoch changed.
    assert buf[:len(first)][16:] == first[16:] and buf[len(first):][16:] == second[16:]


def test_max_timestamp_first_batch_wins_ties_and_none_means_last_offset():
    tied = build(1, timestamps=[NOW]) + build(1, timestamps=[NOW])
    assert check_agrees(tied, base_offset=5) == (5, 6, NOW, 5)
    untimed = build(2, timestamps=[-1, -1]) + build(1, timestamps=[-1])
    assert check_agrees(untimed, base_offset=5) == (5, 7, -1, 7)


def test_last_offset_at_int64_max_is_accepted_one_beyond_refused():
    batch = build(3)
    assert check_agrees(batch, base_offset=INT64_MAX - 2)[:2] == (INT64_MAX - 2, INT64_MAX)
    refuse(batch, base_offset=INT64_MAX - 1)
    refuse(batch + build(1), base_offset=INT64_MAX - 2)


def test_negative_base_offset_refused():
    refuse(build(1), base_offset=-1)


# --- refusals --------------------------------------------------------------------------------


def test_empty_buffer_refused():
    refuse(b"")


@pytest.mark.parametrize("codec", CODECS)
def test_bad_crc_refused(codec):
    batch = build(4, codec=codec, value=b"payload")
    for pos in (rb.ATTRIBUTES_OFFSET, MAX_TIMESTAMP, rb.BATCH_HEADER_SIZE, len(batch) - 1):
        corrupt = bytearray(batch)
        corrupt[pos] ^= 0x01
        refuse(bytes(corrupt))
        refuse(build(1) + bytes(corrupt))
    refuse(patched(batch, rb.CRC_OFFSET, ">I", rb.compute_crc(batch) ^ 0x80000000, fix_crc=False))


def test_count_and_delta_must_agree():
    batch = build(3)  # last_offset_delta 2, records_count 3
    refuse(patched(batch, RECORDS_COUNT, ">i", 2))
    refuse(patched(batch, RECORDS_COUNT, ">i", 4))
    refuse(patched(batch, LAST_OFFSET_DELTA, ">i", 3))
    refuse(patched(patched(batch, RECORDS_COUNT, ">i", INT32_MAX), LAST_OFFSET_DELTA, ">i", INT32_MAX))
    refuse(patched(patched(batch, RECORDS_COUNT, ">i", INT32_MIN), LAST_OFFSET_DELTA, ">i", INT32_MAX))
    # Consistent but negative: -1 + 1 == 0.
    refuse(patched(patched(batch, RECORDS_COUNT, ">i", 0), LAST_OFFSET_DELTA, ">i", -1))
    refuse(patched(patched(batch, RECORDS_COUNT, ">i", -1), LAST_OFFSET_DELTA, ">i", -2))
    # Consistent but more records than the batch holds.
    refuse(patched(patched(batch, RECORDS_COUNT, ">i", INT32_MAX), LAST_OFFSET_DELTA, ">i", INT32_MAX - 1))


def test_empty_batch_refused():
    refuse(BatchBuilder().build())  # delta 0, count 0


def test_control_batch_refused():
    refuse(build(1, control=True))
    refuse(build(2) + build(1, control=True))


def test_idempotent_and_transactional_left_to_python():
    idempotent = build(2, producer_id=42, producer_epoch=0, base_sequence=0)
    assert_refused(idempotent, 0, 0, 10**9, INT64_MIN, INT64_MAX)
    assert_refused(build(2) + idempotent, 0, 0, 10**9, INT64_MIN, INT64_MAX)
    # Other negative producer ids are not -1 either: left to Python too.
    assert_refused(patched(build(1), PRODUCER_ID, ">q", -2), 0, 0, 10**9, INT64_MIN, INT64_MAX)
    # The transactional bit without a producer id: Python accepts it, the fast path does not.
    transactional = patched(build(1), rb.ATTRIBUTES_OFFSET, ">h", rb.TRANSACTIONAL_BIT)
    assert_refused(transactional, 0, 0, 10**9, INT64_MIN, INT64_MAX)
    check_agrees(transactional)


def test_max_message_bytes_per_batch():
    small, large = build(1), build(5, value=b"x" * 50)
    assert check_agrees(small + large, max_message_bytes=len(large)) is not None
    refuse(small + large, max_message_bytes=len(large) - 1)
    refuse(large + small, max_message_bytes=len(large) - 1)


def test_timestamp_bounds():
    batch = build(3, timestamps=[NOW, NOW + 10, NOW + 5])  # base NOW, max NOW + 10
    assert check_agrees(batch, low=NOW, high=NOW + 10) is not None
    refuse(batch, low=NOW + 1, high=NOW + 10)
    refuse(batch, low=NOW, high=NOW + 9)
    refuse(build(1) + batch, low=NOW, high=NOW + 9)
    # -1 is not a timestamp and is never checked, at either end.
    untimed = build(2, timestamps=[-1, -1])
    assert check_agrees(untimed, low=NOW, high=-2) == (0, 1, -1, 1)
    first_untimed = build(2, timestamps=[-1, NOW])  # base -1, max NOW
    assert check_agrees(first_untimed, low=NOW + 1, high=NOW) is not None
    refuse(first_untimed, low=NOW + 1, high=NOW - 1)


def test_unlimited_bounds_clamped_to_int64_are_exact():
    assert check_agrees(build(1, timestamps=[INT64_MAX]), low=-UNLIMITED, high=UNLIMITED) == (0, 0, INT64_MAX, 0)
    # A first timestamp of INT64_MIN passes too; below -1 it counts as no timestamp.
    assert check_agrees(build(1, timestamps=[INT64_MIN]), low=-UNLIMITED, high=UNLIMITED) == (0, 0, -1, 0)


@pytest.mark.parametrize("codec", [0, 3])
def test_truncated_at_every_length(codec):
    one, two = build(3, codec=codec), build(2, codec=codec)
    for n in range(len(one)):
        refuse(one[:n])
    joined = one + two
    for n in range(len(one) + 1, len(joined)):
        refuse(joined[:n])
    assert check_agrees(joined[:len(one)]) is not None


def test_trailing_garbage_refused():
    batch = build(2)
    for tail in (b"\x00", b"\xff" * 11, b"\x00" * 12, b"\x00" * 61, build(1)[:-1], build(1)[:12]):
        refuse(batch + tail)


def test_batch_length_too_small_or_too_large_refused():
    batch = build(2)
    for length in (rb.MIN_BATCH_LENGTH - 1, 0, -1, INT32_MIN, len(batch) - 11, INT32_MAX):
        refuse(patched(batch, BATCH_LENGTH, ">i", length, fix_crc=False))
    # A header-only buffer whose length field claims less than a header.
    header_only = BatchBuilder().build()
    cut = patched(header_only, BATCH_LENGTH, ">i", rb.MIN_BATCH_LENGTH - 1, fix_crc=False)[:-1]
    refuse(cut)


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_magic_other_than_2_refused(magic):
    batch = bytearray(build(2))
    batch[rb.MAGIC_OFFSET] = magic
    assert_refused(bytes(batch), 0, 0, 10**9, INT64_MIN, INT64_MAX)
    assert_refused(build(1) + bytes(batch), 0, 0, 10**9, INT64_MIN, INT64_MAX)


def test_legacy_message_set_left_to_python():
    from odradek.records.legacy import build_message_set
    from odradek.records.record import Record

    legacy = build_message_set([Record(0, NOW, b"k", b"v", ())], magic=1)
    assert_refused(legacy, 0, 0, 10**9, INT64_MIN, INT64_MAX)
    assert python_path(legacy, 0, 0, 10**9, INT64_MIN, INT64_MAX) is None  # converted


# --- argument errors -------------------------------------------------------------------------


def test_read_only_or_non_buffer_records_raise_type_error():
    batch = build(1)
    for records in (batch, memoryview(bytearray(batch)).toreadonly(), "text", None):
        with pytest.raises(TypeError):
            validate_and_assign(records, 0, 0, 10**9, INT64_MIN, INT64_MAX, None, False)
    with pytest.raises(TypeError):
        validate_and_assign(memoryview(bytearray(batch * 2))[::2], 0, 0, 10**9, INT64_MIN, INT64_MAX, None, False)
    with pytest.raises(TypeError):
        validate_and_assign(bytearray(batch), 0, 0, 10**9, INT64_MIN, INT64_MAX)
    with pytest.raises(TypeError):
        validate_and_assign(bytearray(batch), 0, 0, 10**9, INT64_MIN, INT64_MAX, "not callable", False)


@pytest.mark.parametrize("args", [
    (2**63, 0, 10**9, 0, 0),
    (0, 2**31, 10**9, 0, 0),
    (0, -(2**31) - 1, 10**9, 0, 0),
    (0, 0, 2**64, 0, 0),
    (0, 0, 10**9, -(2**63) - 1, 0),
    (0, 0, 10**9, 0, 2**63),
])
def test_out_of_range_ints_raise_overflow_error(args):
    buf = bytearray(build(1))
    before = bytes(buf)
    with pytest.raises(OverflowError):
        validate_and_assign(buf, *args, None, False)
    assert buf == before


def test_accepts_memoryview_slices_in_place():
    batch = build(2)
    backing = bytearray(b"\xaa" * 7 + batch + b"\xbb" * 5)
    view = memoryview(backing)[7:7 + len(batch)]
    assert validate_and_assign(view, 3, 1, 10**9, INT64_MIN, INT64_MAX, None, False) == (3, 4, NOW + 1, 4)
    assert backing[:7] == b"\xaa" * 7 and backing[-5:] == b"\xbb" * 5
    assert rb.read_header(backing, 7).base_offset == 3


# --- mutations: whenever C says yes, Python says the same ------------------------------------

mutations = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("length"), st.integers(0, 4), st.integers(INT32_MIN, INT32_MAX)
              | st.integers(rb.MIN_BATCH_LENGTH - 2, 400)),
    st.tuples(st.just("field"), st.integers(0, 10**6),
              st.sampled_from([(LAST_OFFSET_DELTA, ">i"), (RECORDS_COUNT, ">i"), (BASE_TIMESTAMP, ">q"),
                               (MAX_TIMESTAMP, ">q"), (PRODUCER_ID, ">q"), (rb.ATTRIBUTES_OFFSET, ">h"),
                               (0, ">q"), (12, ">i")])),
)


def batch_starts(buf):
    """Where batches start by their length fields, as far as those make sense (at least 0)."""
    starts, pos = [0], 0
    while len(buf) - pos >= rb.LOG_OVERHEAD:
        (length,) = struct.unpack_from(">i", buf, pos + BATCH_LENGTH)
        pos += rb.LOG_OVERHEAD + length
        if length < 0 or pos >= len(buf):
            break
        starts.append(pos)
    return starts


def mutate(records, mutation, draw_value):
    buf = bytearray(records)
    kind, where, arg = mutation
    if kind == "flip" and buf:
        buf[where % len(buf)] ^= arg
    elif kind == "truncate":
        del buf[where % (len(buf) + 1):]
    elif kind == "length":
        starts = [p for p in batch_starts(buf) if p + rb.LOG_OVERHEAD <= len(buf)]
        if starts:
            struct.pack_into(">i", buf, starts[where % len(starts)] + BATCH_LENGTH, arg)
    elif kind == "field":
        # A header field rewritten with the CRC fixed up: reaches the checks behind the CRC.
        starts = [p for p in batch_starts(buf) if p + rb.BATCH_HEADER_SIZE <= len(buf)]
        if starts:
            pos = starts[where % len(starts)]
            offset, fmt = arg
            size = struct.calcsize(fmt) * 8
            struct.pack_into(fmt, buf, pos + offset, draw_value(size))
            size = rb.LOG_OVERHEAD + struct.unpack_from(">i", buf, pos + BATCH_LENGTH)[0]
            if rb.BATCH_HEADER_SIZE <= size <= len(buf) - pos:
                rb.update_crc(buf, pos, size)
    return bytes(buf)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batches(), min_size=1, max_size=3), st.lists(mutations, min_size=1, max_size=3),
       base_offsets, st.integers(INT32_MIN, INT32_MAX), st.sampled_from([10**9, 300]), bounds, st.data())
def test_mutations_c_accepts_only_what_python_accepts(parts, muts, base_offset, epoch, max_bytes, bound, data):
    def draw_value(bits):
        near = st.integers(-2, 10) | (st.sampled_from([NOW, NOW + 10**7]) if bits == 64 else st.nothing())
        return data.draw(near | st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))

    records = b"".join(parts)
    for mutation in muts:
        records = mutate(records, mutation, draw_value)
    result, after = c_path(records, base_offset, epoch, max_bytes, *bound)
    if result is None:
        assert after == records
    # Where the first magic is 2 (no legacy conversion of garbage), agreement both ways.
    if result is not None or records[rb.MAGIC_OFFSET:rb.MAGIC_OFFSET + 1] == b"\x02":
        expected = python_path(records, base_offset, epoch, max_bytes, *bound)
        assert (result, after) == (expected or (None, records))


# --- the records of each batch ---------------------------------------------------------------

@pytest.mark.parametrize("make", [bad.garbage_gzip, bad.garbage_snappy, bad.codec_7, bad.broken_framing,
                                  bad.count_mismatch, bad.wrong_offset_delta, lambda: bad.gzip_bomb(8 << 20)])
def test_invalid_records_refused_by_both_paths(make):
    refuse(make())
    refuse(build(2) + make())


def test_records_without_key_refused_on_compacted_topics_only():
    refuse(bad.unkeyed(3, keyed_at=(0, 2)), compacted=True)
    assert check_agrees(bad.unkeyed(3, keyed_at=(0, 2))) is not None
    assert check_agrees(bad.unkeyed(3, keyed_at=(0, 1, 2)), compacted=True) is not None


@pytest.mark.parametrize("codec", CODECS)
def test_max_timestamp_set_from_the_records_and_crc_fixed(codec):
    sent = bad.max_timestamp_unset([NOW + 5, NOW + 50, NOW + 20], codec=codec)
    result = check_agrees(sent, base_offset=10)
    assert result == (10, 12, NOW + 50, 11)
    buf = bytearray(sent)
    validate_and_assign(buf, 10, 0, 10**9, INT64_MIN, INT64_MAX, inline_decompress, False)
    header = rb.validate(buf)  # the CRC holds
    assert header.max_timestamp == NOW + 50
    assert buf[rb.BATCH_HEADER_SIZE:] == sent[rb.BATCH_HEADER_SIZE:]


def test_a_header_claiming_a_larger_max_timestamp_gets_the_records_one():
    lying = bad.patched(build(2, timestamps=[NOW, NOW + 1]), MAX_TIMESTAMP, ">q", NOW + 10**6)
    assert check_agrees(lying, low=NOW, high=NOW + 10) == (0, 1, NOW + 1, 1)


def test_records_beyond_what_the_loop_decompresses_are_left_to_the_generic_path():
    builder = BatchBuilder(BatchSpec(compression=1))
    for _ in range(3):
        builder.append(NOW, b"k", bytes(INLINE_DECOMPRESSED // 2))
    large = builder.build()
    assert python_path(large, 0, 0, 10**9, -UNLIMITED, UNLIMITED) is None  # CheckOffLoop
    assert_refused(large, 0, 0, 10**9, INT64_MIN, INT64_MAX)


def test_second_pass_writes_where_the_first_pass_checked():
    """Pass 2 uses the sizes pass 1 checked: a batch length changed in between (here by the
    decompress callback, which runs Python code; in production another thread could while
    crc32c released the GIL) cannot make it write elsewhere."""
    first, second = build(2, codec=1), build(3)
    buf = bytearray(first + second)

    def decompress_and_meddle(codec, data):
        struct.pack_into(">i", buf, BATCH_LENGTH, INT32_MAX)  # the first batch's length
        return codecs.decompress(codec, data)

    assert validate_and_assign(buf, 100, 5, 10**9, INT64_MIN, INT64_MAX, decompress_and_meddle, False) == (
        100, 104, NOW + 2, 104)
    second_header = rb.read_header(buf, len(first))
    assert (second_header.base_offset, second_header.partition_leader_epoch) == (102, 5)
    assert len(buf) == len(first) + len(second)


def test_check_records_verdicts():
    ok = build(3, timestamps=[NOW, NOW + 7, NOW + 3])
    assert check_records(ok[61:], 3, NOW, False) == (0, 3, NOW + 7, 1, [])
    assert check_records(bad.broken_framing()[61:], 3, NOW, False)[:2] == (1, 1)
    assert check_records(bad.wrong_offset_delta()[61:], 3, NOW, False)[:2] == (2, 1)
    assert check_records(ok[61:], 4, NOW, False)[:2] == (3, 3)
    assert check_records(ok[61:] + b"\x00", 3, NOW, False)[:2] == (4, 3)
    assert check_records(b"", 0, NOW, False) == (0, 0, -1, -1, [])
    assert check_records(bad.unkeyed(3, keyed_at=(1,))[61:], 3, NOW, True)[4] == [0, 2]


# --- fuzz: mutated records, both paths and the Python decoder --------------------------------

def _rebuilt(batch: bytes, records: bytes) -> bytes:
    """``batch`` with ``records`` as its (uncompressed) records, recompressed in its codec."""
    header = rb.read_header(batch)
    section = codecs.compress(header.compression, records) if header.compression else records
    return bad.with_section(section, header.compression, header.records_count, template=batch)


record_mutations = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("set"), st.integers(0, 10**6), st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, 0x0F, 0x10])),
    st.tuples(st.just("cut"), st.integers(0, 10**6), st.integers(1, 8)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.binary(min_size=1, max_size=6)),
)


def mutate_records(records: bytes, mutation) -> bytes:
    kind, where, arg = mutation
    out = bytearray(records)
    if not out:
        return bytes(arg) if kind == "insert" else records
    at = where % len(out)
    if kind == "flip":
        out[at] ^= arg
    elif kind == "set":
        out[at] = arg
    elif kind == "cut":
        del out[at:at + arg]
    else:
        out[at:at] = arg
    return bytes(out)


def _client_batches() -> list[bytes]:
    """The batches of the Produce requests captured from kafka-python, confluent-kafka,
    aiokafka and kcat, with each codec (tests/protocol/fixtures)."""
    fixtures = Path(__file__).resolve().parent.parent / "protocol" / "fixtures"
    out = []
    for entry in json.loads((fixtures / "index.json").read_text())["fixtures"]:
        if entry["api_name"] == "Produce" and entry["direction"] == "request":
            _, request = codec.decode_request((fixtures / entry["file"]).read_bytes())
            for topic in request.topic_data:
                for part in topic.partition_data:
                    out += [bytes(part.records[pos:pos + size]) for pos, size in rb.iter_batch_positions(part.records)]
    return out


CLIENT_BATCHES = _client_batches()


def test_every_client_batch_passes_the_walk():
    assert len(CLIENT_BATCHES) >= 20
    for batch in CLIENT_BATCHES:
        header = rb.validate(batch)
        records = codecs.decompress(header.compression, batch[rb.BATCH_HEADER_SIZE:])
        assert check_records(records, header.records_count, header.base_timestamp, True)[0] == 0
        check_agrees(batch)  # idempotent ones: both leave them to the producer state


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches() | st.sampled_from(CLIENT_BATCHES), st.lists(record_mutations, min_size=1, max_size=3),
       st.booleans(), st.booleans())
def test_fuzz_mutated_records_same_verdict_on_both_paths(batch, muts, compacted, with_good_batch):
    header = rb.read_header(batch)
    records = codecs.decompress(header.compression, batch[rb.BATCH_HEADER_SIZE:])
    for mutation in muts:
        records = mutate_records(records, mutation)
    mutated = _rebuilt(batch, records)
    if with_good_batch:
        mutated = build(1) + mutated
    check_agrees(mutated, compacted=compacted)  # C and Python: same verdict, same bytes
    # The walk is never more lenient than the Python decoder, and agrees on the offsets.
    verdict, _, max_ts, _, _ = check_records(records, header.records_count, header.base_timestamp, False)
    try:
        decoded = decode_records(records, header.records_count, 0, header.base_timestamp)
    except CorruptRecordError:
        assert verdict != 0
        return
    if verdict == 0:
        assert [r.offset for r in decoded] == list(range(header.records_count))
        assert max_ts == max([r.timestamp for r in decoded if r.timestamp > -1], default=-1)


def test_small_max_message_bytes_bounds_what_is_decompressed_on_both_paths():
    """32 x max.message.bytes, at least 1 MiB: with 10,000 bytes, 1.5 MiB of records is
    refused outright (not left to the worker thread)."""
    builder = BatchBuilder(BatchSpec(compression=1))
    builder.append(NOW, b"k", bytes(1536 * 1024))
    batch = builder.build()
    assert len(batch) < 10_000
    refuse(batch, max_message_bytes=10_000)
    assert check_agrees(batch, max_message_bytes=len(batch)) is None
    partition = SimpleNamespace(topic="t", index=0, log=SimpleNamespace(config=SimpleNamespace(
        max_message_bytes=10_000)))
    with pytest.raises(pv.ProduceError) as refused:
        pp.Partition._check_records(partition, batch, 0, len(batch), rb.read_header(batch), False, 1 << 20)
    assert refused.value.error == pv.ErrorCode.INVALID_RECORD


def test_the_section_given_to_decompress_is_released_after_the_call():
    kept = []

    def decompress_and_keep(codec, data):
        kept.append(data)
        return codecs.decompress(codec, data)

    buf = bytearray(build(2, codec=1))
    assert validate_and_assign(buf, 0, 0, 10**9, INT64_MIN, INT64_MAX, decompress_and_keep, False) is not None
    with pytest.raises(ValueError):
        bytes(kept[0])  # released: no way back to the request's bytes


def test_a_section_claiming_more_than_the_loop_takes_goes_off_it_untried(monkeypatch):
    from odradek.records import log_validator as lv
    from odradek.records.errors import DecompressionLimitError

    bomb = bad.gzip_bomb(8 << 20)  # ISIZE says 8 MiB
    header = rb.read_header(bomb)
    calls = []
    monkeypatch.setattr(codecs, "decompress", lambda *args, **kw: calls.append(args))
    with pytest.raises(DecompressionLimitError):
        lv.records_section(bomb, 0, len(bomb), header, lv.INLINE_DECOMPRESSED, retry_larger=True)
    assert lv.inline_decompress(header.compression, bomb[rb.BATCH_HEADER_SIZE:]) is None
    assert calls == []


def test_a_claim_alone_never_refuses():
    """A gzip trailer claiming 4 GiB - 1 over three good records: decompressed and accepted
    where no larger bound is left to try."""
    from odradek.records import log_validator as lv

    batch = bytearray(build(3, codec=1))
    struct.pack_into("<I", batch, len(batch) - 4, 2**32 - 1)  # ISIZE
    rb.update_crc(batch, 0, len(batch))
    header = rb.read_header(batch)
    try:
        lv.check_batch_records(batch, 0, len(batch), header, "t-0", False, lv.INLINE_DECOMPRESSED)
    except CorruptRecordError as e:  # if the codec checks ISIZE: corrupt, never "too large"
        assert not isinstance(e, lv.DecompressionLimitError)
