"""Shared by the ``_fast_append`` tests: observing a log's whole state, ``decline_reason``
(the C call's contract restated in Python), and small builders of logs and appends."""

from __future__ import annotations

import os

from odradek.storage._fast_append import append_to_active_segment

from odradek.storage.append_info import LogAppendInfo
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.errors import (
    StorageError,
)
from odradek.storage.file_handle_cache import FileHandleCache
from odradek.storage.log import Log
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.segment import RESERVE_FROM
from odradek.storage.segment_index import SegmentIndex
from odradek.storage.time_index import TimeIndex
from tests.storage.helpers import T0, make_batch

INT32_MAX = 2**31 - 1


# -- observing a log and restating the contract ---------------------------------------------


def segment_state(seg):
    index = seg._index
    return (seg.base_offset, seg.size, seg.sealed, seg._first_batch_ts, seg._reserved_to,
            seg.created_ms, seg.roll_jitter_ms, seg.suffix, seg._file is not None,
            index and (bytes(index.offsets._buf), bytes(index.times._buf), index.max_timestamp,
                       index.bytes_since_entry))


def holder_name(holder):
    """A cache holder named independently of the test's directory: (log dir name, base)."""
    return holder and (os.path.basename(holder.directory), holder.base_offset)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def state(log, all_files=False):
    """What an append may change, the handle cache's LRU order and last holder, the file
    names, and the active ``.log`` file's bytes (every file's with ``all_files``)."""
    names = sorted(os.listdir(log.directory))
    if all_files:
        files = {n: read_bytes(os.path.join(log.directory, n)) for n in names}
    else:
        files = read_bytes(log.active_segment.log_path)
    cache = log.file_cache
    return (log.log_end_offset, log.log_start_offset, log.recovery_point, log.closed,
            log._dir_dirty, tuple(segment_state(s) for s in log.segments),
            tuple((t, s.base_offset) for t, s in log._pending_deletes),
            [holder_name(h) for h in cache._holders], holder_name(cache.last), names, files)


def index_refuses(index, position, size, info):
    """Whether SegmentIndex.track would raise ValueError (tried on a copy)."""
    first, last, max_ts, ts_offset = info
    copy = SegmentIndex.__new__(SegmentIndex)
    copy.offsets = OffsetIndex(index.offsets.base_offset, index.offsets.max_entries,
                               bytes(index.offsets._buf))
    copy.times = TimeIndex(index.times.base_offset, index.times.max_entries,
                           bytes(index.times._buf))
    copy.max_timestamp, copy.bytes_since_entry = index.max_timestamp, index.bytes_since_entry
    copy._interval = index._interval
    try:
        copy.track(position, size, last, max_ts, min(max(ts_offset, first), last))
    except ValueError:
        return True
    return False


def decline_reason(log, size, info):
    """Why the contract requires a decline; None when the C call may take the append."""
    first, last, max_ts, _ = info
    config, seg = log.config, log.active_segment
    if (size == 0 or log.closed or first < log.log_end_offset or last - first > INT32_MAX
            or size > config.segment_bytes):
        return "Log.append raises"
    if seg.size > config.segment_bytes - size or last - seg.base_offset > INT32_MAX:
        return "roll: size or offsets"
    if seg._index.is_full:
        return "roll: index full"
    if seg.size > 0:
        first_ts = seg._first_batch_ts
        if first_ts is None or first_ts < 0 or max_ts < 0:
            return "roll clock needs the wall clock or the file"
        if max_ts - first_ts >= config.max_segment_ms - seg.roll_jitter_ms:
            return "roll: time"
    if seg._file is None or log.file_cache.last is not seg:
        return "handle evicted or not last"
    end = seg.size + size
    if end > seg._reserved_to and end >= RESERVE_FROM:
        return "reservation due"
    if index_refuses(seg._index, seg.size, size, info):
        return "index refuses"
    return None


def log_append(log, data, info):
    """Log.append's outcome: the exception type it raised, or None."""
    try:
        log.append(data, LogAppendInfo(*info))
    except (StorageError, ValueError, OSError) as e:  # compared between the twins
        return type(e)
    return None


# -- example helpers ------------------------------------------------------------------------


class Draws:
    """A jitter source answering ``values`` in turn, then 0."""

    def __init__(self, *values):
        self.values = list(values)

    def randrange(self, stop):
        return self.values.pop(0) if self.values else 0


def open_log(path, config=None, cache=None, name="topic", clock=None, rng=None, **kw):
    if cache is None:  # (not ``cache or``: an empty FileHandleCache is falsy)
        cache = FileHandleCache(64)
    return Log.open(os.path.join(str(path), f"{name}-0"), name, 0, config or LogConfig(),
                    clock or FakeClock(T0), cache, rng=rng or Draws(), **kw)


def batch_at(log, count=1, timestamp=T0, offset=None, **kw):
    """A batch at ``offset`` (default: the log end offset) and its info as a plain tuple."""
    data = make_batch(log.log_end_offset if offset is None else offset, count, timestamp, **kw)
    return data, tuple(LogAppendInfo.from_batches(data))


def fast(log, count=1, timestamp=T0, **kw):
    """Append through the C call, which must take it."""
    data, info = batch_at(log, count, timestamp, **kw)
    assert append_to_active_segment(log, data, info) is True
    assert log.log_end_offset == info[1] + 1
    return True


def slow(log, count=1, timestamp=T0, **kw):
    data, info = batch_at(log, count, timestamp, **kw)
    log.append(data, LogAppendInfo(*info))


def declines(log, data, info):
    """The C call declines and changes nothing."""
    before = state(log, all_files=True)
    assert append_to_active_segment(log, data, info) is False
    assert state(log, all_files=True) == before
