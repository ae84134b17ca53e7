"""An append the disk refuses half-way (ENOSPC, EIO, EFBIG after a short write) raises
OSError and leaves the log as it was: log end offset, segments, indexes, and the file cut
back to its size (no torn batch past the end); the next append, and a restart, find
exactly the appended batches. Python path (``Log.append``) and C path
(``_fast_append.append_to_active_segment``) alike, and a roll that fails half-way."""

import contextlib
import errno
import os
import resource
import signal

import pytest

from odradek.storage import log as log_module
from odradek.storage import segment as segment_module
from odradek.storage._fast_append import append_to_active_segment
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.config import LogConfig
from tests.storage.fast_append_support import batch_at, fast, open_log, state
from tests.storage.helpers import T0, append, read_records


def enospc():
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@contextlib.contextmanager
def pwrite_fails_half_way(monkeypatch):
    """``os.pwrite`` writes half of what it is given, then fails with ENOSPC."""
    real = os.pwrite
    calls = []

    def half_then_full(fd, data, position):
        calls.append(len(data))
        if len(calls) > 1:
            raise enospc()
        return real(fd, memoryview(data)[: len(data) // 2], position)

    monkeypatch.setattr(os, "pwrite", half_then_full)
    yield calls
    monkeypatch.setattr(os, "pwrite", real)


@contextlib.contextmanager
def file_size_limit(limit):
    """Writes past ``limit`` bytes are short, then fail with EFBIG (RLIMIT_FSIZE, with
    SIGXFSZ ignored): a partial write inside C code, where no monkeypatch reaches."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def filled(tmp_path, config=None):
    log = open_log(tmp_path, config or LogConfig(index_interval_bytes=0))
    for _ in range(3):
        fast(log, count=4)
    return log


def check_unchanged_then_resumes(tmp_path, log, before, expected_offsets):
    assert state(log, all_files=True) == before
    assert os.path.getsize(log.active_segment.log_path) == log.active_segment.size
    assert [r[0] for r in read_records(log)] == expected_offsets
    data, info = batch_at(log, count=2)
    log.append(data, LogAppendInfo(*info))  # writes resume as soon as the disk takes them
    expected = expected_offsets + [info[0], info[0] + 1]
    assert [r[0] for r in read_records(log)] == expected
    log.close()
    for clean in (True, False):  # loading with and without recovery finds the same
        again = open_log(tmp_path, clean_shutdown=clean)
        assert [r[0] for r in read_records(again)] == expected
        again.close()


def test_python_append_failing_half_way_changes_nothing(tmp_path, monkeypatch):
    log = filled(tmp_path)
    before = state(log, all_files=True)
    data, info = batch_at(log, count=5)
    with pwrite_fails_half_way(monkeypatch) as calls:
        with pytest.raises(OSError) as caught:
            log.append(data, LogAppendInfo(*info))
    assert caught.value.errno == errno.ENOSPC and len(calls) == 2
    check_unchanged_then_resumes(tmp_path, log, before, list(range(12)))


def test_c_append_failing_half_way_changes_nothing(tmp_path):
    log = filled(tmp_path)
    before = state(log, all_files=True)
    data, info = batch_at(log, count=5)
    with file_size_limit(log.active_segment.size + len(data) // 2):
        with pytest.raises(OSError) as caught:
            append_to_active_segment(log, data, info)
    assert caught.value.errno == errno.EFBIG
    check_unchanged_then_resumes(tmp_path, log, before, list(range(12)))


def test_python_append_refused_by_a_file_size_limit_changes_nothing(tmp_path):
    log = filled(tmp_path)
    before = state(log, all_files=True)
    data, info = batch_at(log, count=5)
    with file_size_limit(log.active_segment.size + len(data) // 2):
        with pytest.raises(OSError):
            log.append(data, LogAppendInfo(*info))
    check_unchanged_then_resumes(tmp_path, log, before, list(range(12)))


@pytest.mark.parametrize("step", ["index files", "new segment"])
def test_a_roll_failing_half_way_keeps_the_old_segment_active(tmp_path, monkeypatch, step):
    log = filled(tmp_path, LogConfig(index_interval_bytes=0, segment_bytes=600))
    segments = log.segments
    data, info = batch_at(log, count=5)
    assert log.active_segment.size + len(data) > 600  # this append rolls
    if step == "index files":
        monkeypatch.setattr(segment_module.SegmentIndex, "write", lambda *a: (_ for _ in ()).throw(enospc()))
    else:
        monkeypatch.setattr(log_module.LogSegment, "create", lambda *a, **k: (_ for _ in ()).throw(enospc()))
    leo = log.log_end_offset
    with pytest.raises(OSError):
        log.append(data, LogAppendInfo(*info))
    monkeypatch.undo()
    assert log.segments == segments and not log.active_segment.sealed
    assert log.log_end_offset == leo
    assert [r[0] for r in read_records(log)] == list(range(12))
    log.append(data, LogAppendInfo(*info))
    assert len(log.segments) == len(segments) + 1
    log.close()
    again = open_log(tmp_path, LogConfig(index_interval_bytes=0, segment_bytes=600))
    assert [r[0] for r in read_records(again)] == list(range(17))


def test_a_log_recovered_on_a_full_disk_opens_and_rebuilds_its_indexes_later(tmp_path, monkeypatch):
    """Recovery rewrites index files; when the disk refuses them the log still opens (the
    in-memory indexes serve reads), no stale or torn index file is left to be read back,
    and a later load rebuilds them."""
    config = LogConfig(index_interval_bytes=0, segment_bytes=600)
    log = open_log(tmp_path, config)
    for i in range(8):
        append(log, 4, timestamp=T0 + i)
    expected = [r[0] for r in read_records(log)]
    lookups = [log.offset_for_timestamp(T0 + i) for i in range(10)]
    sealed = [s.base_offset for s in log.segments[:-1]]
    assert sealed
    log.close()
    monkeypatch.setattr(segment_module.SegmentIndex, "write", lambda *a: (_ for _ in ()).throw(enospc()))
    again = open_log(tmp_path, config, clean_shutdown=False)  # recovers every segment
    assert [r[0] for r in read_records(again)] == expected
    names = os.listdir(again.directory)
    assert not [n for n in names for base in sealed if n.startswith(f"{base:020d}.") and "index" in n]
    monkeypatch.undo()
    third = open_log(tmp_path, config, clean_shutdown=True)  # index files missing: rebuilt
    assert [r[0] for r in read_records(third)] == expected
    assert [third.offset_for_timestamp(T0 + i) for i in range(10)] == lookups
