"""``LogDirs`` (the log manager's directories) and ``LogDirFailureChannel``: new partitions
on the emptiest live directory, and a failed directory taking only its own logs: a real
failure of an ext4 filesystem shut down under one directory (``failing_filesystem``), and a
directory that cannot be loaded at start-up."""

from __future__ import annotations

import errno
import os

import pytest

from odradek.storage.errors import OfflineLogDirsError, StorageError
from odradek.storage.log_dir_failure_channel import LogDirFailureChannel, is_log_dir_failure
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE
from tests.storage.failing_filesystem import failing_fs  # noqa: F401 (the fixture)
from tests.storage.helpers import append, read_records
from tests.storage.test_log_manager import manager


def dir_counts(m) -> list[int]:
    return [len(m.logs_by_dir().get(d, {})) for d in m.all_log_dirs]


def test_new_partitions_go_to_the_live_dir_with_fewest(tmp_path):
    m = manager([tmp_path / "a", tmp_path / "b", tmp_path / "c"])
    for p in range(5):
        m.get_or_create_log("t", p)
    assert dir_counts(m) == [2, 2, 1]
    m.delete_log("t", 0)  # in a: now a and c hold one each, a listed first
    assert m.log_dir_of("t", 5) is None
    m.get_or_create_log("t", 5)
    assert m.log_dir_of("t", 5) == m.all_log_dirs[0]
    m.failure_channel.maybe_add_offline_log_dir(m.all_log_dirs[2], "test")
    m.handle_log_dir_failure(m.all_log_dirs[2])
    m.get_or_create_log("t", 6, is_new=True)  # new replicas: a failed directory cannot hold them
    m.get_or_create_log("t", 7, is_new=True)
    assert dir_counts(m) == [3, 3, 0]
    m.shutdown()


def test_channel_reports_each_dir_once_and_not_a_full_disk():
    seen = []
    channel = LogDirFailureChannel()
    channel.set_listener(seen.append)
    assert not channel.report("/d", "appending", OSError(errno.ENOSPC, "No space left on device"))
    assert not is_log_dir_failure(OSError(errno.EMFILE, "Too many open files"))
    assert channel.report("/d", "appending", OSError(errno.EIO, "Input/output error"))
    assert not channel.report("/d", "flushing", OSError(errno.EIO, "Input/output error"))
    assert (seen, channel.offline_log_dirs) == (["/d"], ["/d"])
    late = []
    channel.set_listener(late.append)  # a listener set later hears of what failed before
    assert late == ["/d"]


def test_a_dir_that_cannot_be_loaded_is_left_out_at_startup(tmp_path):
    (tmp_path / "not-a-dir").write_text("a file where a log directory should be")
    m = manager([tmp_path / "a", tmp_path / "not-a-dir"])
    assert m.log_dirs == [str(tmp_path / "a")]
    assert m.failure_channel.offline_log_dirs == [str(tmp_path / "not-a-dir")]
    m.get_or_create_log("t", 0, is_new=True)
    assert m.log_dir_of("t", 0) == str(tmp_path / "a")
    m.shutdown()
    with pytest.raises(StorageError, match="none of the log directories"):
        manager([tmp_path / "not-a-dir"])


def test_a_failed_filesystem_takes_only_its_own_logs(tmp_path, failing_fs):
    good = tmp_path / "good"
    m = manager([good, failing_fs.path])
    failed_dirs = []
    m.failure_channel.set_listener(failed_dirs.append)
    logs = [m.get_or_create_log("t", p) for p in range(4)]  # 0, 2 in good; 1, 3 on the failing fs
    for log in logs:
        append(log, 3)
    assert [m.log_dir_of("t", p) for p in range(4)] == [str(good), str(failing_fs.path)] * 2
    failing_fs.fail()
    with pytest.raises(OSError) as raised:
        logs[1].flush()
    assert raised.value.errno == errno.EIO
    assert failed_dirs == [str(failing_fs.path)]
    assert m.handle_log_dir_failure(str(failing_fs.path)) == [("t", 1), ("t", 3)]
    assert m.get_log("t", 1) is None and logs[1].closed
    assert m.log_dirs == [str(good)] and not m.is_log_dir_online(str(failing_fs.path))
    # the good directory serves on: appends, flushes, new logs, checkpoints, a clean stop
    append(logs[0], 2)
    logs[0].flush()
    assert m.get_or_create_log("t", 4, is_new=True).directory.startswith(str(good))
    with pytest.raises(OfflineLogDirsError):  # t-1's log is in the failed directory
        m.get_or_create_log("t", 1)
    m.checkpoint()
    assert m.shutdown()
    assert (good / CLEAN_SHUTDOWN_FILE).exists()
    again = manager([good])
    assert [r[0] for r in read_records(again.get_log("t", 0))] == list(range(5))
    again.shutdown()


def test_creating_a_log_skips_a_dir_that_fails_then(tmp_path, failing_fs):
    m = manager([failing_fs.path, tmp_path / "good"])
    failing_fs.fail()
    log = m.get_or_create_log("t", 0)  # the failing dir (listed first, both empty) is tried first
    assert os.path.dirname(log.directory) == str(tmp_path / "good")
    assert m.failure_channel.offline_log_dirs == [str(failing_fs.path)]
    m.shutdown()


def test_a_restart_with_a_dir_still_failed_creates_no_log_that_dir_may_hold(tmp_path):
    # Kafka's getOrCreateLog: with a directory offline, a log not found in the live ones is
    # created only for a replica the controller says is new; any other may be in the failed
    # directory, and an empty log elsewhere would fork it.
    a, b = tmp_path / "a", tmp_path / "b"
    m = manager([a, b])
    for p in range(2):  # t-0 in a, t-1 in b
        append(m.get_or_create_log("t", p), 3)
    assert m.log_dir_of("t", 1) == str(b)
    assert m.shutdown()
    b.rename(tmp_path / "b.saved")
    b.write_text("a file where the log directory was: it cannot be loaded")
    m = manager([a, b])
    assert m.failure_channel.offline_log_dirs == [str(b)] and m.get_log("t", 1) is None
    with pytest.raises(OfflineLogDirsError, match="t-1"):
        m.get_or_create_log("t", 1)
    with pytest.raises(OfflineLogDirsError):  # nothing says which partitions b held
        m.get_or_create_log("t", 2)
    assert not (a / "t-1").exists() and not (a / "t-2").exists()
    assert [r[0] for r in read_records(m.get_or_create_log("t", 0))] == [0, 1, 2]  # found: served
    assert m.get_or_create_log("t", 2, is_new=True).directory == str(a / "t-2")
    assert m.shutdown()
    b.unlink()
    (tmp_path / "b.saved").rename(b)
    again = manager([a, b])  # the directory back: t-1's records are all there
    assert again.failure_channel.offline_log_dirs == []
    assert [r[0] for r in read_records(again.get_or_create_log("t", 1))] == [0, 1, 2]
    assert again.shutdown()
