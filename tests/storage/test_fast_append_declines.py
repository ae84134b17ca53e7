"""``_fast_append.append_to_active_segment`` declines, one example per reason in its contract:
the call answers False and changes nothing, and ``Log.append`` then does what it always did
(rolls, raises, reads the first timestamp from the file)."""


from __future__ import annotations

import pytest

from odradek.storage.append_info import LogAppendInfo
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.errors import (
    InvalidAppendOffsetError,
    LogClosedError,
    RecordBatchTooLargeError,
)
from odradek.storage.file_handle_cache import FileHandleCache
from tests.storage.fast_append_support import (
    Draws,
    batch_at,
    declines,
    fast,
    open_log,
    slow,
)
from tests.storage.helpers import T0

INT32_MAX = 2**31 - 1

def rolled(count, *more):
    """Check: the log has ``count`` segments, then the C call takes ``more`` appends."""
    return lambda log: len(log.segments) == count and all(fast(log, **kw) for kw in more)


def closed(tmp_path):
    log = open_log(tmp_path)
    fast(log)
    log.close()
    return (log, *batch_at(log), LogClosedError)


def abandoned(tmp_path):
    log = open_log(tmp_path)
    fast(log)
    log.abandon()
    log.active_segment.handle()  # still unsealed, open again, last in the cache
    return (log, *batch_at(log), LogClosedError)


def below_log_end(tmp_path):
    log = open_log(tmp_path)
    fast(log, 3)
    return (log, *batch_at(log, offset=2), InvalidAppendOffsetError)


def empty_data(tmp_path):
    log = open_log(tmp_path)
    fast(log)
    return log, b"", (1, 1, T0, 1), ValueError


def negative_first_offset(tmp_path):
    log = open_log(tmp_path)
    data, (_, last, ts, ts_offset) = batch_at(log)
    return log, data, (-1, last, ts, ts_offset), ValueError  # LogAppendInfo refuses it


def last_offset_before_the_first(tmp_path):
    log = open_log(tmp_path)
    data, (first, _, ts, _) = batch_at(log, offset=5)
    return log, data, (first, first - 1, ts, first), ValueError


def larger_than_a_segment(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=500))
    fast(log)
    return (log, *batch_at(log, 5, value_size=100), RecordBatchTooLargeError)


def span_beyond_int32(tmp_path):
    log = open_log(tmp_path)
    fast(log)
    data, (first, _, ts, _) = batch_at(log)
    return log, data, (first, first + INT32_MAX + 1, ts, first), InvalidAppendOffsetError


def not_fitting_the_segment(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=400))
    fast(log, 2)  # 119 bytes, and 337 more do not fit
    return (log, *batch_at(log, 4, value_size=60), rolled(2))


def offsets_beyond_int32_of_the_base(tmp_path):
    log = open_log(tmp_path)
    fast(log)
    return (log, *batch_at(log, 2, offset=INT32_MAX), rolled(2, {}))


def offset_index_full(tmp_path, step=0):
    """Constant timestamps fill the offset index first, rising ones the time index."""
    log = open_log(tmp_path, LogConfig(index_interval_bytes=0, segment_index_bytes=24))
    index = log.active_segment.index()
    for _ in range(4 - step):  # (not "until full": a C call adding no entry must not hang)
        fast(log, timestamp=T0 + step * log.log_end_offset)
    assert (index.offsets.is_full, index.times.is_full) == (not step, bool(step))
    return (log, *batch_at(log, timestamp=T0 + 100), rolled(2, {"timestamp": T0 + 101}))


def time_index_full(tmp_path):
    return offset_index_full(tmp_path, step=1)


def index_full_on_an_empty_segment(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_index_bytes=4))  # room for no entry
    return (log, *batch_at(log, offset=5), lambda log: log.segments[0].base_offset == 5)


JITTERED = LogConfig(segment_ms=1000, segment_jitter_ms=500)


def roll_clock_reached(tmp_path, config=JITTERED):
    log = open_log(tmp_path, config, rng=Draws(300))
    fast(log, timestamp=T0)
    fast(log, timestamp=T0 + 699)  # the roll clock at 699 < 1000 - 300
    return (log, *batch_at(log, timestamp=T0 + 700), rolled(2, {"timestamp": T0 + 800}))


def compaction_lag_reached(tmp_path):
    return roll_clock_reached(tmp_path, LogConfig(
        segment_ms=10**9, segment_jitter_ms=500, cleanup_policy=("compact",),
        max_compaction_lag_ms=1000))


def lowered_segment_ms(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_ms=10**6))
    fast(log, timestamp=T0)
    fast(log, timestamp=T0 + 500)
    log.update_config(LogConfig(segment_ms=400))
    return (log, *batch_at(log, timestamp=T0 + 501), rolled(2))


def unknown_first_timestamp(tmp_path):
    log = open_log(tmp_path)
    fast(log, timestamp=T0)
    log.close()
    log = open_log(tmp_path, recovery_point=1, clean_shutdown=True)
    log.active_segment.handle()  # open and last in the cache: only the timestamp is missing
    assert log.active_segment._first_batch_ts is None and log.active_segment.size > 0
    return (log, *batch_at(log, timestamp=T0 + 1),
            lambda log: log.active_segment._first_batch_ts == T0 and rolled(1, {})(log))


class NegativeFirstTimestamp:
    """The roll clock runs on the wall clock (T0 - -1 is far below segment.ms)."""

    def __call__(self, tmp_path):
        self.clock = FakeClock(T0)
        log = open_log(tmp_path, LogConfig(segment_ms=10**13), clock=self.clock)
        fast(log, 2, timestamps=[-1, -1])  # an empty segment needs no roll clock: taken
        assert log.active_segment._first_batch_ts == -1
        return (log, *batch_at(log, timestamp=T0), self.then)

    def then(self, log):
        unrolled = len(log.segments) == 1
        self.clock.advance(10**13)
        slow(log)
        return unrolled and len(log.segments) == 2


def negative_incoming_timestamp(tmp_path):
    log = open_log(tmp_path)
    fast(log, timestamp=T0)
    return (log, *batch_at(log, 2, timestamps=[-1, -1]), rolled(1, {"timestamp": T0 + 1}))


def evicted_handle(tmp_path):
    cache = FileHandleCache(1)
    log, other = open_log(tmp_path, cache=cache), open_log(tmp_path, cache=cache, name="other")
    slow(log)
    slow(other)
    assert log.active_segment._file is None
    return (log, *batch_at(log), rolled(1, {}))


def not_last_in_the_cache(tmp_path):
    cache = FileHandleCache(64)
    log, other = open_log(tmp_path, cache=cache), open_log(tmp_path, cache=cache, name="other")
    slow(log)
    slow(other)
    assert log.active_segment._file is not None and cache.last is not log.active_segment
    return (log, *batch_at(log), rolled(1, {}))


def older_segment_read(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    while len(log.segments) < 3:
        slow(log, 2)
    log.roll()
    fast(log)
    log.read(0, 100)
    return (log, *batch_at(log), rolled(4, {}))


def refused_offset_entry(tmp_path):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=0))
    fast(log)
    log.active_segment.index().offsets.append(1000, 1)  # past every offset of the append
    return (log, *batch_at(log), ValueError)


def refused_time_entry(tmp_path):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=0))
    fast(log)
    log.active_segment.index().times.maybe_append(1, 1000)  # older, at a later offset
    return (log, *batch_at(log, timestamp=T0 + 5), ValueError)


def time_entry_below_the_segment(tmp_path):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=0))
    fast(log)
    log.roll()
    fast(log, timestamp=T0 + 1)
    log.active_segment.index().max_timestamp = (T0 + 100, 0)  # below the base offset 1
    return (log, *batch_at(log, timestamp=T0 + 2), ValueError)


DECLINES = [
    closed, abandoned, below_log_end, empty_data, negative_first_offset,
    last_offset_before_the_first, larger_than_a_segment, span_beyond_int32,
    not_fitting_the_segment, offsets_beyond_int32_of_the_base, offset_index_full,
    time_index_full, index_full_on_an_empty_segment, roll_clock_reached, compaction_lag_reached,
    lowered_segment_ms, unknown_first_timestamp, NegativeFirstTimestamp(),
    negative_incoming_timestamp, evicted_handle, not_last_in_the_cache, older_segment_read,
    refused_offset_entry, refused_time_entry, time_entry_below_the_segment,
]


@pytest.mark.parametrize("setup", DECLINES, ids=lambda f: getattr(f, "__name__", type(f).__name__))
def test_a_decline_changes_nothing_and_log_append_does_the_rest(tmp_path, setup):
    log, data, info, then = setup(tmp_path)
    declines(log, data, info)
    if isinstance(then, type):
        with pytest.raises(then):
            log.append(data, LogAppendInfo(*info))
    else:
        log.append(data, LogAppendInfo(*info))
        assert then(log)
