"""Appends written off the loop (``storage/pending_appends.py``, ``_segment_writer.c``).

The contract: nothing a reader sees moves before the bytes are written and the append is
settled; appends of a log land in the order begun, whatever else takes the log's lock in
between (a roll, a plain append, a flush on another thread); a failed write fails it and
every append behind it, and leaves the log as it was. ``_segment_writer.hold()`` keeps the
writer's thread from writing, so a test can look at the log while appends are pending.
"""

from __future__ import annotations

import errno
import os
import random
import threading

import pytest

from odradek.storage import _segment_writer
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.config import LogConfig
from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.pending_appends import APPLIED, PENDING
from tests.storage.helpers import append, make_batch, open_log, read_records


@pytest.fixture
def held():
    _segment_writer.hold()
    try:
        yield
    finally:
        _segment_writer.release()


def begin(log, count: int = 3, value_size: int = 20):
    """Begin an append of one batch at ``next_offset``: (its records' values, the pending)."""
    first = log.next_offset
    data = make_batch(first, count, value_size=value_size)
    pending = log.begin_append(bytearray(data), tuple(LogAppendInfo.from_batches(data)))
    assert pending is not None
    return [(first + i, (b"v%d-" % (first + i)).ljust(value_size, b"x")) for i in range(count)], pending


def plain_append(log, count: int, value_size: int = 20):
    """``Log.append`` of a batch at ``next_offset`` (as the generic produce path assigns
    offsets once the pending appends are settled); its records' values."""
    first = log.next_offset
    data = make_batch(first, count, value_size=value_size)
    log.append(data, LogAppendInfo.from_batches(data))
    return [(first + i, (b"v%d-" % (first + i)).ljust(value_size, b"x")) for i in range(count)]


def values(log):
    return [(offset, value) for offset, _, value in read_records(log)]


def test_nothing_is_visible_before_the_write_and_its_settling(tmp_path, held):
    log = open_log(tmp_path)
    append(log, 2)  # (a pending append behind an empty segment's first is refused: its roll clock)
    segment = log.active_segment
    size, before = segment.size, values(log)
    expected = list(before)
    pendings = []
    for _ in range(3):
        records, pending = begin(log)
        expected += records
        pendings.append(pending)
    # Offsets are taken, but the log end offset, the segment and reads are where they were.
    assert log.next_offset == 11 and log.log_end_offset == 2
    assert segment.size == size and os.path.getsize(segment.log_path) == size
    assert log.read(2, 1 << 20).length == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 1 << 20)
    assert values(log) == before
    log.settle_appends(block=False)  # nothing written yet: nothing to settle
    assert [p.state for p in pendings] == [PENDING] * 3 and log.log_end_offset == 2

    _segment_writer.release()
    for pending in pendings:
        pending.job.wait()
    # Written, not settled: still invisible.
    assert os.path.getsize(segment.log_path) > size
    assert log.log_end_offset == 2 and values(log) == before
    log.settle_appends(block=False)
    assert [p.state for p in pendings] == [APPLIED] * 3
    assert log.log_end_offset == 11 and values(log) == expected


def test_taking_the_lock_settles_first(tmp_path, held):
    """Log.append (and every other change) waits for the pending appends and lands after."""
    log = open_log(tmp_path)
    append(log, 1)
    expected = values(log)
    records, pending = begin(log)
    expected += records
    threading.Timer(0.05, _segment_writer.release).start()
    expected += plain_append(log, 2)  # blocks until the timer lets the writer write
    assert pending.state is APPLIED
    assert values(log) == expected and [o for o, _ in expected] == list(range(6))


@pytest.mark.parametrize("seed", range(4))
def test_appends_land_in_order_whatever_the_interleaving(tmp_path, seed):
    """Random begins (of sizes that make rolls and reservations due), plain appends, settles
    and reads, with a flush thread taking the log's lock meanwhile: after every step the log
    reads back exactly the prefix of what was appended up to its log end offset."""
    rng = random.Random(seed)
    log = open_log(tmp_path, LogConfig(segment_bytes=64 * 1024))
    append(log, 1)
    expected = values(log)
    stop = threading.Event()
    begun = declined = 0

    def flusher():
        while not stop.is_set():
            log.flush()

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for _ in range(120):
            op = rng.random()
            if op < 0.6:
                first = log.next_offset
                count = rng.randint(1, 8)
                data = make_batch(first, count, value_size=rng.choice((20, 500, 3000)))
                pending = log.begin_append(bytearray(data), tuple(LogAppendInfo.from_batches(data)))
                if pending is None:  # a roll is due: the plain append waits for the pending ones
                    log.append(data, LogAppendInfo.from_batches(data))
                    declined += 1
                else:
                    begun += 1
                expected += [(offset, value) for offset, _, value in _records(data)]
            elif op < 0.7:
                expected += plain_append(log, rng.randint(1, 3))
            else:
                log.settle_appends(block=op < 0.8)
            end_before = log.log_end_offset  # (the flusher may settle meanwhile)
            seen = values(log)
            assert end_before <= len(seen) <= log.log_end_offset and seen == expected[:len(seen)]
        log.settle_appends()
        assert log.log_end_offset == len(expected) and values(log) == expected
        assert len(log.segments) > 1 and begun > 3 * declined, (begun, declined)
    finally:
        stop.set()
        thread.join()


def _records(data):
    from odradek.records.reader import iter_batches
    return [(r.offset, r.key, r.value) for batch in iter_batches(bytes(data)) for r in batch.records()]


def test_a_failed_write_fails_it_and_every_append_behind_it(tmp_path, held):
    log = open_log(tmp_path)
    append(log, 2)
    segment = log.active_segment
    size, before = segment.size, values(log)
    file = segment._file
    good_fd, read_only = file.fd, os.open(segment.log_path, os.O_RDONLY)
    file.fd = read_only  # the first append's write fails (EBADF), the others' succeed
    try:
        _, first = begin(log)
    finally:
        file.fd = good_fd
    _, second = begin(log)
    _, third = begin(log)
    _segment_writer.release()
    log.settle_appends()
    os.close(read_only)
    assert isinstance(first.state, OSError) and first.state.errno == errno.EBADF
    assert second.state is first.state and third.state is first.state
    # As before the failed append: the written ones behind it are cut off the file too.
    assert log.log_end_offset == log.next_offset == 2 and segment.size == size
    assert os.path.getsize(segment.log_path) == size and values(log) == before
    append(log, 1)
    assert [o for o, _ in values(log)] == [0, 1, 2]
