"""The Log keeps its ``leader_epoch_cache`` in step with its batches."""

import logging
import os

from odradek.records import batch as rb
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.config import LogConfig
from odradek.storage.leader_epoch_checkpoint import LEADER_EPOCH_CHECKPOINT
from tests.storage.helpers import T0, make_batch, open_log


def _batch(base_offset: int, count: int, epoch: int) -> bytes:
    data = bytearray(make_batch(base_offset, count))
    rb.set_partition_leader_epoch(data, 0, epoch)
    return bytes(data)


def append_epoch(log, count: int, epoch: int) -> None:
    data = _batch(log.log_end_offset, count, epoch)
    log.append(data, LogAppendInfo.from_batches(data))


def _log_with(tmp_path, epochs_and_counts, **kw):
    log = open_log(tmp_path, **kw)
    for epoch, count in epochs_and_counts:
        append_epoch(log, count, epoch)
    return log


def _checkpoint_path(log) -> str:
    return os.path.join(log.directory, LEADER_EPOCH_CHECKPOINT)


def test_appends_record_each_new_epoch(tmp_path):
    log = _log_with(tmp_path, [(0, 3), (0, 2), (3, 4), (5, 1)])
    assert log.leader_epoch_cache.entries == ((0, 0), (3, 5), (5, 9))
    assert log.end_offset_for_epoch(5) == (5, 10)
    assert log.end_offset_for_epoch(4) == (3, 9)
    with open(_checkpoint_path(log), "rb") as f:
        assert f.read() == b"0\n3\n0 0\n3 5\n5 9\n"


def test_a_follower_append_of_several_epochs(tmp_path):
    log = open_log(tmp_path)
    data = _batch(0, 2, 1) + _batch(2, 2, 1) + _batch(4, 3, 2) + _batch(7, 1, 4)
    log.append(data, LogAppendInfo.from_batches(data))
    assert log.leader_epoch_cache.entries == ((1, 0), (2, 4), (4, 7))


def test_batches_without_an_epoch_are_not_recorded(tmp_path):
    log = open_log(tmp_path)
    data = make_batch(0, 2)  # partition_leader_epoch -1
    log.append(data, LogAppendInfo.from_batches(data))
    assert log.leader_epoch_cache.entries == ()
    assert not os.path.exists(_checkpoint_path(log))


def test_becoming_leader_begins_the_epoch_at_the_log_end(tmp_path):
    log = _log_with(tmp_path, [(0, 3)])
    assert log.assign_leader_epoch(2)
    assert not log.assign_leader_epoch(2)
    assert log.end_offset_for_epoch(0) == (0, 3)
    append_epoch(log, 2, 2)
    assert log.leader_epoch_cache.entries == ((0, 0), (2, 3))
    assert log.end_offset_for_epoch(2) == (2, 5)


def test_truncation_cuts_the_epochs_it_removes(tmp_path):
    log = _log_with(tmp_path, [(1, 5), (2, 5), (3, 5)])
    log.truncate_to(12)  # inside epoch 2's batch 10..14: the batch goes, the log ends at 10
    assert log.log_end_offset == 10
    assert log.leader_epoch_cache.entries == ((1, 0), (2, 5))
    log.truncate_to(5)
    assert log.leader_epoch_cache.entries == ((1, 0),)
    append_epoch(log, 1, 4)
    assert log.leader_epoch_cache.entries == ((1, 0), (4, 5))
    log.truncate_fully(100)
    assert log.leader_epoch_cache.entries == ()
    with open(_checkpoint_path(log), "rb") as f:
        assert f.read() == b"0\n0\n"


def test_delete_records_moves_the_first_epoch(tmp_path):
    log = _log_with(tmp_path, [(1, 5), (2, 5), (3, 5)])
    log.delete_records(3)  # inside the only segment
    assert log.leader_epoch_cache.entries == ((1, 3), (2, 5), (3, 10))
    log.delete_records(7)
    assert log.leader_epoch_cache.entries == ((2, 7), (3, 10))


def test_retention_moves_the_first_epoch(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300, retention_ms=1000))
    for epoch in range(6):
        append_epoch(log, 2, epoch)
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    assert log.delete_old_segments(T0 + 10**9) == 2
    assert log.log_start_offset == 8
    assert log.leader_epoch_cache.entries == ((4, 8), (5, 10))
    with open(_checkpoint_path(log), "rb") as f:
        assert f.read() == b"0\n2\n4 8\n5 10\n"


def _reopen(log, tmp_path, **kw):
    log.close()
    return open_log(tmp_path, **kw)


def test_the_cache_survives_a_restart(tmp_path):
    log = _log_with(tmp_path, [(0, 3), (2, 3)])
    log = _reopen(log, tmp_path, clean_shutdown=True)
    assert log.leader_epoch_cache.entries == ((0, 0), (2, 3))


def test_entries_past_the_log_end_are_cut_at_open(tmp_path):
    # A crash after the checkpoint was written and before the batches of the new epoch were.
    log = _log_with(tmp_path, [(0, 3), (2, 3)])
    log.assign_leader_epoch(5)
    log.leader_epoch_cache.checkpoint.write([(0, 0), (2, 3), (5, 6), (7, 9)])
    log = _reopen(log, tmp_path, clean_shutdown=True)
    assert log.leader_epoch_cache.entries == ((0, 0), (2, 3))


def test_an_unclean_start_assigns_the_epochs_of_the_recovered_batches(tmp_path):
    log = _log_with(tmp_path, [(0, 3), (2, 3), (4, 3)])
    # As if the entry of epoch 4 never reached the file.
    log.leader_epoch_cache.checkpoint.write([(0, 0), (2, 3)])
    log = _reopen(log, tmp_path, recovery_point=3, clean_shutdown=False)
    assert log.leader_epoch_cache.entries == ((0, 0), (2, 3), (4, 6))


def test_a_missing_file_is_rebuilt_from_the_batches(tmp_path):
    # A log written before odradek kept epochs.
    log = _log_with(tmp_path, [(0, 3), (2, 3), (4, 3)], config=LogConfig(segment_bytes=300))
    log.close()
    os.unlink(_checkpoint_path(log))
    log = open_log(tmp_path, LogConfig(segment_bytes=300), clean_shutdown=True)
    assert log.leader_epoch_cache.entries == ((0, 0), (2, 3), (4, 6))
    with open(_checkpoint_path(log), "rb") as f:
        assert f.read() == b"0\n3\n0 0\n2 3\n4 6\n"


def test_a_garbled_file_is_rebuilt_from_the_batches_loudly(tmp_path, caplog):
    log = _log_with(tmp_path, [(0, 3), (2, 3)])
    log.close()
    with open(_checkpoint_path(log), "wb") as f:
        f.write(b"0\n2\n0 0\n2")  # torn
    with caplog.at_level(logging.ERROR):
        log = open_log(tmp_path, clean_shutdown=True)
    assert log.leader_epoch_cache.entries == ((0, 0), (2, 3))
    assert any("rebuilding the leader epoch cache" in r.getMessage() for r in caplog.records)
    with open(_checkpoint_path(log), "rb") as f:
        assert f.read() == b"0\n2\n0 0\n2 3\n"
