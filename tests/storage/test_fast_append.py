"""``_fast_append.append_to_active_segment``: Log.append's common case in one C call.

Contract: True means the call did exactly what ``log.append(data, LogAppendInfo(*info))``
does in that state (same bytes at the same position, same segment size, first batch
timestamp, index entries, largest timestamp, bytes since the last entry, log end offset; no
roll, no reservation, no handle-cache touch); False means nothing changed and the caller must
make that call itself, as it must whenever Log.append might roll, reserve disk space, read
the wall clock or the file, open the file, touch the cache, or raise.

``decline_reason`` restates those conditions in Python. The differential test runs random
operation sequences on twin logs (A: the C call, falling back to Log.append; B: Log.append
only) and compares everything observable after every step. The examples here pin the
appends it takes, the reservation boundary, a failing write, an eviction and bad arguments;
``test_fast_append_declines.py`` pins each reason to decline.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
from collections import Counter

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from odradek.storage import segment as segment_module
from odradek.storage._fast_append import append_to_active_segment
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.file_handle_cache import FileHandleCache
from odradek.storage.log import Log
from odradek.storage.segment import RESERVE_FROM
from tests.storage.fast_append_support import (
    batch_at,
    decline_reason,
    declines,
    fast,
    log_append,
    open_log,
    read_bytes,
    slow,
    state,
)
from tests.storage.helpers import T0, make_batch, read_records

INT32_MAX = 2**31 - 1

# -- the differential test ------------------------------------------------------------------


class CoarseJitter:
    """A seeded jitter source drawing whole 100 ms (still below ``stop``)."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def randrange(self, stop):
        return self.rng.randrange(stop) // 100 * 100


class Side:
    """One twin: a main log and a neighbour sharing its handle cache."""

    def __init__(self, root, config, capacity, clock, seed, fast):
        self.root, self.config, self.clock, self.fast = root, config, clock, fast
        self.cache = FileHandleCache(capacity)
        self.rngs = {"main": CoarseJitter(seed), "other": CoarseJitter(seed + 1)}
        self.main, self.other = self.open("main"), self.open("other")

    def open(self, name, **kw):
        return Log.open(os.path.join(self.root, f"{name}-0"), name, 0, self.config, self.clock,
                        self.cache, rng=self.rngs[name], **kw)

    def append(self, log, data, info, counts):
        """The C call then, if it declined, Log.append (A); Log.append only (B). A decline
        must change nothing, and each outcome must be the one the contract demands."""
        if not self.fast:
            return log_append(log, data, info)
        reason = decline_reason(log, len(data), info)
        before = state(log)
        took = append_to_active_segment(log, data, info)
        counts[took] += 1
        event(f"taken: {took}; contract: {reason or 'may take'}")
        if took:
            assert reason is None, f"took an append it must decline ({reason}): {info}"
            return None
        assert state(log) == before, "declined but changed the state"
        assert reason is not None, f"declined an append the contract lets it take: {info}"
        return log_append(log, data, info)

    def reopen(self):
        old = self.main
        old.close()
        self.main = self.open("main", recovery_point=old.log_end_offset,
                              log_start_offset=old.log_start_offset, clean_shutdown=True)


def build_append(leo, op, ts_cursor):
    """The bytes and info of an append ``op`` at log end offset ``leo``; the new cursor."""
    _, batches, gap, ts_step, info_mode = op
    offset = {"below": max(leo - 1 - gap, 0), "far": leo + INT32_MAX - 1}.get(info_mode, leo + gap)
    ts, parts = ts_cursor + ts_step, []
    for count, value_size, ts_mode, spread in batches:
        # Out of order within the batch; the first record's timestamp is the largest.
        stamps = [-1 if ts_mode == "none" else ts - (i * spread) % 7 for i in range(count)]
        if ts_mode == "mixed":
            stamps[-1] = -1
        parts.append(make_batch(offset, count, timestamps=stamps, value_size=value_size))
        offset += count
    data = b"".join(parts)
    first, last, max_ts, ts_offset = LogAppendInfo.from_batches(data)
    last = first + INT32_MAX + 1 if info_mode == "span" else last
    ts_offset = {"no_ts_offset": -1, "past_ts_offset": last + 10}.get(info_mode, ts_offset)
    return data, (first, last, max_ts, ts_offset), ts


# Mostly whole 100 ms steps, as thresholds and jitters are: the roll clock often lands exactly
# on max_segment_ms - roll_jitter_ms.
TS_STEP = st.one_of(st.integers(-4, 15).map(lambda k: 100 * k), st.integers(-400, 1500))
BATCH = st.tuples(st.integers(1, 4), st.sampled_from([0, 10, 30, 120]),
                  st.sampled_from(["ts", "ts", "ts", "none", "mixed"]), st.integers(0, 6))
INFO_MODES = ["exact"] * 10 + ["no_ts_offset", "past_ts_offset"] * 2 + ["below", "span", "far"]
OPS = {
    "append": st.tuples(st.just("append"), st.lists(BATCH, min_size=1, max_size=3),
                        st.sampled_from([0] * 8 + [1, 5]), TS_STEP, st.sampled_from(INFO_MODES)),
    "other": st.tuples(st.just("other"), st.lists(BATCH, min_size=1, max_size=2), st.just(0),
                       TS_STEP, st.just("exact")),
    "advance": st.tuples(st.just("advance"), st.integers(1, 3000)),
    "roll": st.tuples(st.just("roll")),
    "read": st.tuples(st.just("read"), st.integers(0, 10**6)),
    "config": st.tuples(st.just("config")),
    "reopen": st.tuples(st.just("reopen")),
}
# Mostly appends to the main log (sampled_from weighs by repetition, one_of would not).
OP = st.sampled_from(["append"] * 10 + ["other"] * 2 + list(OPS)[2:]).flatmap(OPS.__getitem__)
# The first value of each is the plain case (Hypothesis starts from it).
CONFIG = st.builds(
    LogConfig,
    segment_bytes=st.sampled_from([2000, 500, 1000, 8000]),
    index_interval_bytes=st.sampled_from([100, 0, 400, 4096]),
    segment_index_bytes=st.sampled_from([4096, 40, 80, 400, 4096, 4]),
    segment_ms=st.sampled_from([10**9, 2000, 200, 1]),
    segment_jitter_ms=st.sampled_from([0, 500, 1500]),
    cleanup_policy=st.sampled_from([("delete",), ("compact",), ("compact", "delete")]),
    max_compaction_lag_ms=st.sampled_from([2**63 - 1, 3000, 300]),
)


class Twins:
    def __init__(self, root, configs, capacity, seed, counts):
        self.clock, self.configs, self.counts, self.ts = FakeClock(T0), configs, counts, T0
        self.a = Side(os.path.join(root, "a"), configs[0], capacity, self.clock, seed, True)
        self.b = Side(os.path.join(root, "b"), configs[0], capacity, self.clock, seed, False)

    def apply(self, op):
        kind, a, b = op[0], self.a, self.b
        if kind in ("append", "other"):
            log_a, log_b = (a.main, b.main) if kind == "append" else (a.other, b.other)
            data, info, self.ts = build_append(log_a.log_end_offset, op, self.ts)
            outcome = a.append(log_a, data, info, self.counts)
            assert outcome == b.append(log_b, data, info, self.counts), (op, info)
        elif kind == "advance":
            self.clock.advance(op[1])
        elif kind == "roll":
            a.main.roll()
            b.main.roll()
        elif kind == "read":  # touches, and may evict, cached handles
            span = a.main.log_end_offset - a.main.log_start_offset + 1
            offset = a.main.log_start_offset + op[1] % span
            assert a.main.read(offset, 300).read() == b.main.read(offset, 300).read()
        elif kind == "config":
            self.configs = self.configs[::-1]
            a.main.update_config(self.configs[0])
            b.main.update_config(self.configs[0])
        elif kind == "reopen":
            a.reopen()
            b.reopen()

    def check(self, all_files=False):
        for log_a, log_b in ((self.a.main, self.b.main), (self.a.other, self.b.other)):
            assert state(log_a, all_files) == state(log_b, all_files), log_a

    def close(self):
        for log in (self.a.main, self.a.other, self.b.main, self.b.other):
            log.abandon()


def test_the_fast_path_matches_log_append_on_random_operations():
    counts = Counter()

    @settings(max_examples=100)
    @given(configs=st.tuples(CONFIG, CONFIG), capacity=st.sampled_from([64, 3, 2, 1]),
           seed=st.integers(0, 2**16), ops=st.lists(OP, min_size=5, max_size=40))
    def run(configs, capacity, seed, ops):
        with tempfile.TemporaryDirectory() as root:
            twins = Twins(root, configs, capacity, seed, counts)
            try:
                for op in ops:
                    twins.apply(op)
                    twins.check()
                twins.check(all_files=True)
                assert read_records(twins.a.main) == read_records(twins.b.main)
            finally:
                twins.close()

    run()
    assert counts[True] > 50 and counts[False] > 50, counts


# -- examples: appends the C call takes -----------------------------------------------------


def test_appends_that_need_nothing_else_are_taken_exactly_as_log_append(tmp_path):
    config = LogConfig(index_interval_bytes=100)
    log, twin = open_log(tmp_path, config), open_log(tmp_path, config, name="twin")
    for i in range(12):
        data, info = batch_at(log, 3, T0 + 10 * i - 5 * (i % 3))
        assert append_to_active_segment(log, data, info) is True
        twin.append(data, LogAppendInfo(*info))
        assert state(log)[:7] == state(twin)[:7]
        assert state(log)[-1] == state(twin)[-1]
    assert len(log.active_segment.index().offsets) > 3
    assert [r[0] for r in read_records(log)] == list(range(36))


@pytest.mark.parametrize("ts_offset", [-1, 0, 3, 4, 5, 99])
def test_the_offset_of_the_max_timestamp_is_clamped_into_the_append(tmp_path, ts_offset):
    config = LogConfig(index_interval_bytes=0)
    log, twin = open_log(tmp_path, config), open_log(tmp_path, config, name="twin")
    for timestamp in (T0, T0 + 10, T0 + 20):
        data, (first, last, max_ts, _) = batch_at(log, 3, timestamp)
        info = (first, last, max_ts, ts_offset + first)
        assert append_to_active_segment(log, data, info) is True
        twin.append(data, LogAppendInfo(*info))
        assert state(log)[:7] == state(twin)[:7]
    assert log.active_segment.index().max_timestamp == (T0 + 22, min(max(ts_offset, 0), 2) + 6)


def test_any_buffer_and_a_log_append_info_are_accepted(tmp_path):
    log = open_log(tmp_path)
    for wrap in (bytes, bytearray, memoryview):
        data, info = batch_at(log, 2)
        assert append_to_active_segment(log, wrap(data), LogAppendInfo(*info)) is True
    assert [r[0] for r in read_records(log)] == list(range(6))


def test_the_append_that_exactly_fills_the_segment_is_taken(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=2 * len(make_batch(0))))
    assert fast(log) and fast(log) and len(log.segments) == 1
    declines(log, *batch_at(log))


# -- examples: one per reason to decline ----------------------------------------------------
# Each sets a log up and returns (log, data, info, then): ``then`` is the exception Log.append
# must raise afterwards, or a check of the log after Log.append did the append.


# -- disk space reservation -----------------------------------------------------------------

BIG = 100_000  # bytes per record: the eleventh append passes RESERVE_FROM


def batch_of_length(log, length):
    """A batch at the log end offset of exactly ``length`` bytes (values sized to fit)."""
    for count in (1, 2):
        guess = (length - len(make_batch(log.log_end_offset, count, value_size=0))) // count
        for value_size in range(max(guess - 4, 0), guess + 4):
            data, info = batch_at(log, count, value_size=value_size)
            if len(data) == length:
                return data, info
    raise AssertionError(f"no batch of {length} bytes")


@pytest.mark.parametrize("end", [RESERVE_FROM - 1, RESERVE_FROM])
def test_reservation_is_due_from_reserve_from(tmp_path, end):
    log = open_log(tmp_path)
    for _ in range(9):
        fast(log, value_size=BIG)
    data, info = batch_of_length(log, end - log.active_segment.size)
    if end < RESERVE_FROM:
        assert append_to_active_segment(log, data, info) is True
    else:
        declines(log, data, info)
        log.append(data, LogAppendInfo(*info))
    assert log.active_segment.size == end
    assert log.active_segment._reserved_to == (0 if end < RESERVE_FROM else 2 * end)


def test_appends_within_the_reservation_are_taken_up_to_its_end(tmp_path):
    log = open_log(tmp_path)
    for _ in range(10):
        fast(log, value_size=BIG)
    segment = log.active_segment
    slow(log, value_size=BIG)  # passes RESERVE_FROM: Log.append reserves as much again
    reserved = segment._reserved_to
    assert reserved == 2 * segment.size > 2 * RESERVE_FROM
    for _ in range(200):  # (bounded: a C call not growing the size must fail, not hang)
        if segment.size + 2 * BIG > reserved:
            break
        fast(log, value_size=BIG)
        assert segment._reserved_to == reserved
    data, info = batch_of_length(log, reserved - segment.size)
    assert append_to_active_segment(log, data, info) is True
    assert segment.size == segment._reserved_to == reserved
    declines(log, *batch_at(log))  # one byte past the reservation: reserve again
    slow(log)
    assert segment._reserved_to > reserved and fast(log)
    assert len(read_records(log)) == log.log_end_offset


def test_after_a_refused_reservation_every_append_is_taken(tmp_path, monkeypatch):
    monkeypatch.setattr(segment_module, "reserve_space", lambda fd, offset, length: False)
    log = open_log(tmp_path)
    for _ in range(11):  # the eleventh passes RESERVE_FROM
        data, info = batch_at(log, value_size=BIG)
        assert append_to_active_segment(log, data, info) or log_append(log, data, info) is None
    assert log.active_segment._reserved_to == 1 << 62  # asked once, refused: never again
    for _ in range(15):
        fast(log, value_size=BIG)


def test_large_appends_across_several_reservations_match_log_append(tmp_path):
    rng = random.Random(7)
    config = LogConfig(segment_bytes=5 << 20, index_interval_bytes=50_000)
    a, b = open_log(tmp_path, config, name="a"), open_log(tmp_path, config, name="b")
    taken = Counter()
    for _ in range(500):  # (bounded: a C call never declining must fail, not fill the disk)
        if len(a.segments) == 3:
            break
        data, info = batch_at(a, rng.randint(1, 3), T0 + a.log_end_offset,
                              value_size=rng.randint(10_000, 100_000))
        took = append_to_active_segment(a, data, info)
        taken[took] += 1
        assert took or log_append(a, data, info) is None
        b.append(data, LogAppendInfo(*info))
        sa, sb = state(a), state(b)
        assert (sa[:6], len(sa[-1])) == (sb[:6], len(sb[-1]))  # (whole files compared below)
    sa, sb = state(a, all_files=True), state(b, all_files=True)
    assert sa[:7] == sb[:7] and sa[-1] == sb[-1]
    assert len(a.segments) == 3 and taken[True] > 10 and taken[False] >= 4, taken


# -- a failing write, eviction during the append, the lock ----------------------------------


def test_a_failing_write_raises_and_changes_nothing(tmp_path):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=0))
    fast(log)
    fast(log)
    file = log.active_segment._file
    writable, file.fd = file.fd, os.open(file.path, os.O_RDONLY)
    try:
        data, info = batch_at(log)
        before = state(log, all_files=True)
        with pytest.raises(OSError):
            append_to_active_segment(log, data, info)
        assert state(log, all_files=True) == before
        assert log_append(log, data, info) is not None  # as Log.append fails: nothing changed
        assert state(log, all_files=True) == before
    finally:
        os.close(file.fd)
        file.fd = writable
    assert fast(log) and [r[0] for r in read_records(log)] == [0, 1, 2]


def test_an_eviction_between_the_checks_and_the_write_cannot_redirect_the_write(tmp_path):
    """Another thread's cache touch may evict the active segment's handle while the append
    runs; by the FileHandleCache rule an operation in flight keeps its own reference, so its
    descriptor is never closed (and its number reused) under it. Simulated: the eviction
    happens when the append reads ``_reserved_to``, and a file opened right after it would get
    a freed descriptor number."""
    log = open_log(tmp_path)
    fast(log)
    decoy_path, opened = os.path.join(str(tmp_path), "decoy"), []

    class EvictedOnRead(type(log.active_segment)):
        @property
        def _reserved_to(self):
            if not opened:
                self.release_handles()
                opened.append(os.open(decoy_path, os.O_RDWR | os.O_CREAT))
            return self.__dict__["_reserved_to"]

        @_reserved_to.setter
        def _reserved_to(self, value):
            self.__dict__["_reserved_to"] = value

    segment = log.active_segment
    expected = read_bytes(segment.log_path)
    data, info = batch_at(log)
    segment.__class__ = EvictedOnRead
    try:
        assert append_to_active_segment(log, data, info) or log_append(log, data, info) is None
    finally:
        segment.__class__ = EvictedOnRead.__mro__[1]
        for fd in opened:
            os.close(fd)
    assert read_bytes(decoy_path) == b""
    assert read_bytes(segment.log_path) == expected + data


class CountingLock:
    """The log's RLock, counting acquires and releases."""

    def __init__(self):
        self.lock, self.calls = threading.RLock(), Counter()

    def acquire(self, *args):
        self.calls["acquire"] += 1
        return self.lock.acquire(*args)

    def release(self):
        self.calls["release"] += 1
        self.lock.release()

    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()


def test_the_log_lock_is_taken_and_released_whatever_the_outcome(tmp_path):
    log = open_log(tmp_path)
    log._lock = lock = CountingLock()
    fast(log)
    declines(log, *batch_at(log, offset=0))
    log._closed = True  # an outcome decided under the lock
    declines(log, *batch_at(log))
    log._closed = False
    file = log.active_segment._file
    writable, file.fd = file.fd, os.open(file.path, os.O_RDONLY)
    try:
        with pytest.raises(OSError):
            append_to_active_segment(log, *batch_at(log))
    finally:
        os.close(file.fd)
        file.fd = writable
    assert lock.calls["acquire"] == lock.calls["release"] >= 3
    assert lock.lock.acquire(blocking=False)  # (an RLock: only proves no other thread holds it)
    lock.lock.release()


# -- bad arguments --------------------------------------------------------------------------


@pytest.mark.parametrize("data", [None, "text", 5, [1, 2]])
def test_data_that_is_not_a_buffer_raises_type_error(tmp_path, data):
    log = open_log(tmp_path)
    fast(log)
    before = state(log, all_files=True)
    with pytest.raises(TypeError):
        append_to_active_segment(log, data, (1, 1, T0, 1))
    assert state(log, all_files=True) == before


@pytest.mark.parametrize("info", [
    None, [1, 1, T0, 1], (1, 1, T0), (1, 1, T0, 1, 0), (1, 1, "ts", 1), (1.0, 1, T0, 1),
    (1, None, T0, 1),
])
def test_info_that_is_not_four_ints_raises_type_error(tmp_path, info):
    log = open_log(tmp_path)
    fast(log)
    data, _ = batch_at(log)
    before = state(log, all_files=True)
    with pytest.raises(TypeError):
        append_to_active_segment(log, data, info)
    assert state(log, all_files=True) == before


def test_a_wrong_argument_count_raises_type_error(tmp_path):
    log = open_log(tmp_path)
    data, info = batch_at(log)
    with pytest.raises(TypeError):
        append_to_active_segment(log, data)
    with pytest.raises(TypeError):
        append_to_active_segment(log, data, info, info)
    assert log.log_end_offset == 0 and log.active_segment.size == 0
