"""Disk blocks reserved ahead of appends (``file_ops.reserve_space``, ``LogSegment``): the
file's size is always exactly the bytes written, a busy active segment holds at most as many
reserved blocks again (and at most ``RESERVE_AHEAD_MAX``), quiet segments hold none, and
sealing frees them; a crash leaves them to the next seal, and reads never see them."""

from __future__ import annotations

import os

from odradek.storage import file_ops
from odradek.storage.segment import RESERVE_AHEAD_MAX, RESERVE_FROM
from tests.storage.helpers import append, open_log, read_records

BLOCK = 4096
VALUE = 10_000  # bytes per record: a few appends pass RESERVE_FROM


def allocated(path) -> int:
    return os.stat(path).st_blocks * 512


def fill(log, bytes_wanted: int) -> None:
    while log.active_segment.size < bytes_wanted:
        append(log, 10, value_size=VALUE)


def test_reserve_space_keeps_the_size(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 5000)
    fd = os.open(path, os.O_RDWR)
    try:
        assert file_ops.reserve_space(fd, 5000, 1 << 20)
    finally:
        os.close(fd)
    assert os.stat(path).st_size == 5000
    assert allocated(path) >= (1 << 20)


def test_a_busy_segment_reserves_ahead_and_frees_the_rest_when_sealed(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3 * RESERVE_FROM)
    segment = log.active_segment
    path = segment.log_path
    assert os.stat(path).st_size == segment.size
    assert segment.size + BLOCK < allocated(path) <= 2 * segment.size + 2 * BLOCK
    records = read_records(log)
    log.roll()
    assert segment.sealed and os.stat(path).st_size == segment.size
    assert allocated(path) < segment.size + 2 * BLOCK
    assert read_records(log) == records
    log.close()


def test_the_reservation_stops_growing_at_its_maximum(tmp_path):
    log = open_log(tmp_path)
    fill(log, RESERVE_AHEAD_MAX + 2 * RESERVE_FROM)
    segment = log.active_segment
    assert allocated(segment.log_path) <= segment.size + RESERVE_AHEAD_MAX + 2 * VALUE * 10 + 2 * BLOCK
    log.close()
    assert allocated(segment.log_path) < segment.size + 2 * BLOCK


def test_a_quiet_segment_reserves_nothing(tmp_path):
    log = open_log(tmp_path)
    for _ in range(20):
        append(log, 3)
    segment = log.active_segment
    assert segment.size < RESERVE_FROM
    assert allocated(segment.log_path) < segment.size + 2 * BLOCK
    log.close()


def test_after_a_crash_the_reserved_blocks_are_invisible_and_freed_at_the_next_seal(tmp_path):
    log = open_log(tmp_path)
    fill(log, 2 * RESERVE_FROM)
    records = read_records(log)
    path = log.active_segment.log_path
    assert allocated(path) > os.stat(path).st_size + BLOCK
    # No close: the files stay as a crash leaves them, reserved blocks included.
    reopened = open_log(tmp_path)
    assert read_records(reopened) == records
    append(reopened, 2)
    reopened.close()
    assert allocated(path) < os.stat(path).st_size + 2 * BLOCK
    assert read_records(open_log(tmp_path))[: len(records)] == records


def test_appends_go_on_when_nothing_can_be_reserved(tmp_path, monkeypatch):
    calls = []

    def refuse(fd, offset, length):
        calls.append((offset, length))
        return False

    monkeypatch.setattr("odradek.storage.segment.reserve_space", refuse)
    log = open_log(tmp_path)
    fill(log, 3 * RESERVE_FROM)
    assert len(calls) == 1  # refused once: the segment stops asking
    assert len(read_records(log)) == log.log_end_offset
    log.close()
