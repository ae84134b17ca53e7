"""A flush whose fsync fails (EIO) takes its log directory offline, as an append that fails
does (Kafka's ``maybeHandleIOException`` around ``flush``): whether the flush was due by
policy (the broker's flush task), by a roll, or at shutdown. The recovery point stays where
it was (the data above it may be lost), no later flush of that log syncs again, and the
other directory's logs flush on. A sync refused for space (ENOSPC) fails the directory too,
unlike an append refused for space: the data write() accepted may be gone, and a later sync
succeeding would not prove it durable."""

from __future__ import annotations

import errno

import pytest

from odradek.storage.config import LogConfig
from odradek.storage.log_dir_failure_channel import LogDirFailureChannel, SyncFailed
from tests.storage.failing_fsync import failing_fsync  # noqa: F401 (the fixture)
from tests.storage.helpers import T0, append, read_records
from tests.storage.test_log_manager import manager


def two_dirs(tmp_path, config=None):
    """A log manager on dirs ``good`` and ``bad``, ``t-0`` in the first and ``t-1`` in the
    second, each holding 3 unflushed records; the failed directories it reported."""
    good, bad = str(tmp_path / "good"), str(tmp_path / "bad")
    m = manager([good, bad], config)
    failed: list[str] = []
    m.failure_channel.set_listener(failed.append)
    for p in range(2):
        append(m.get_or_create_log("t", p), 3)
    assert [m.log_dir_of("t", p) for p in range(2)] == [good, bad]
    return m, good, bad, failed


def test_a_failed_policy_flush_takes_its_dir_offline(tmp_path, failing_fsync):  # noqa: F811
    m, good, bad, failed = two_dirs(tmp_path, LogConfig(flush_messages=1))
    failing_fsync.fail(bad)
    tasks = {task.log.partition: task for task in m.flush_due(T0)}
    assert sorted(tasks) == [0, 1]
    with pytest.raises(OSError) as raised:
        tasks[1].run()  # what the broker's flush task runs in a worker thread
    assert raised.value.errno == errno.EIO and failing_fsync.failed == 1
    assert failed == [bad]
    assert m.get_log("t", 1).recovery_point == 0  # nothing above it is known to be on disk
    append(m.get_log("t", 1), 1)  # (written before the directory is dropped)
    with pytest.raises(OSError) as again:
        m.get_log("t", 1).flush()  # no second sync: it could succeed and vouch for lost pages
    assert again.value.errno == errno.EIO and failing_fsync.failed == 1
    assert m.get_log("t", 1).recovery_point == 0
    tasks[0].run()
    assert m.get_log("t", 0).recovery_point == 3
    assert m.handle_log_dir_failure(bad) == [("t", 1)]
    assert m.log_dirs == [good]
    append(m.get_log("t", 0), 2)
    assert m.run_flush(T0) == 1 and m.get_log("t", 0).recovery_point == 5
    assert m.shutdown()


def test_a_failed_flush_after_a_roll_or_at_shutdown_takes_its_dir_offline(tmp_path, failing_fsync):  # noqa: F811
    m, good, bad, failed = two_dirs(tmp_path)
    assert m.flush_due(T0) == []  # the default policy waits for a roll
    for p in range(2):
        m.get_log("t", p).roll()
    failing_fsync.fail(bad)
    tasks = {task.log.partition: task for task in m.flush_due(T0)}
    tasks[0].run()
    with pytest.raises(OSError):
        tasks[1].run()
    assert failed == [bad] and m.get_log("t", 1).recovery_point == 0
    assert m.get_log("t", 0).recovery_point == 3

    m2, good2, bad2, failed2 = two_dirs(tmp_path / "second")
    failing_fsync.fail(bad2)
    assert not m2.shutdown()  # no clean-shutdown marker: the next start recovers the logs
    assert failed2 == [bad2]
    again = manager([good2])
    assert [r[0] for r in read_records(again.get_log("t", 0))] == [0, 1, 2]
    again.shutdown()
    m.shutdown()


def test_a_sync_refused_for_space_fails_the_dir_but_an_append_does_not(tmp_path, failing_fsync):  # noqa: F811
    channel = LogDirFailureChannel()
    assert not channel.report("/d", "appending", OSError(errno.ENOSPC, "No space left on device"))
    assert not channel.report("/d", "flushing", SyncFailed(errno.EMFILE, "Too many open files"))
    assert channel.report("/d", "flushing", SyncFailed(errno.ENOSPC, "No space left on device"))

    m, good, bad, failed = two_dirs(tmp_path, LogConfig(flush_messages=1))
    failing_fsync.fail(bad, errno.ENOSPC)
    tasks = {task.log.partition: task for task in m.flush_due(T0)}
    with pytest.raises(OSError) as raised:
        tasks[1].run()
    assert raised.value.errno == errno.ENOSPC and type(raised.value) is OSError  # raised as it came
    assert failed == [bad] and m.get_log("t", 1).recovery_point == 0
    m.shutdown()
