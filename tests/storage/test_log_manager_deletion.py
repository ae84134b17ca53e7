"""Deleting a topic's logs is all-or-nothing and restartable: a disk error at any step
(checkpoint, rename) neither stops the other partitions' removal nor lets the deleted data
be loaded, reused or served again, after a restart either."""

import errno
import os

import pytest

from odradek.storage import log_manager as log_manager_module
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0, append, read_records


def manager(path, clock=None):
    m = LogManager([str(path)], LogConfig(segment_bytes=400), clock or FakeClock(T0))
    m.startup()
    return m


def filled(path, partitions=3, records=12):
    m = manager(path)
    for p in range(partitions):
        log = m.get_or_create_log("t", p)
        for _ in range(records // 3):
            append(log, 3)
        log.delete_records(2)  # a log start offset a new topic must not inherit
    append(m.get_or_create_log("kept", 0), 2)
    m.checkpoint()
    return m


def enospc(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def restarted(path):
    """A crash (no shutdown) and a new start-up that keeps only the topic ``kept``."""
    m = manager(path)
    m.delete_stray_logs(lambda topic: topic == "kept")
    return m


def assert_topic_gone_and_recreated_empty(path):
    m = restarted(path)
    assert [tp for tp in m.all_logs() if tp[0] == "t"] == []
    for p in range(3):
        log = m.get_or_create_log("t", p)
        assert (log.log_start_offset, log.log_end_offset) == (0, 0)
        assert read_records(log) == []
    assert [r[0] for r in read_records(m.get_log("kept", 0))] == [0, 1]


def test_failed_checkpoint_removes_every_partition(tmp_path, monkeypatch):
    m = filled(tmp_path)
    monkeypatch.setattr(OffsetCheckpointFile, "write", enospc)
    assert m.delete_logs([("t", p) for p in range(3)]) == 3
    assert all(m.get_log("t", p) is None for p in range(3))
    assert not any(n.startswith("t-") and not n.endswith("-delete") for n in os.listdir(tmp_path))
    # The checkpoint still names the deleted logs: a new log of the same name must not
    # start from them, and cannot be created before the checkpoint is written.
    with pytest.raises(OSError):
        m.get_or_create_log("t", 0)
    monkeypatch.undo()
    assert m.get_or_create_log("t", 0).log_start_offset == 0
    # (written before the new log was added: no entry of the deleted ones is left)
    assert OffsetCheckpointFile(str(tmp_path / "log-start-offset-checkpoint")).read() == {("kept", 0): 0}
    assert_topic_gone_and_recreated_empty(tmp_path)


@pytest.mark.parametrize("failing", [0, 1, 2])
def test_failed_rename_leaves_nothing_to_serve(tmp_path, monkeypatch, failing):
    m = filled(tmp_path)
    rename = os.rename

    def rename_failing_once(src, dst):
        if os.path.basename(src) == f"t-{failing}":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return rename(src, dst)

    monkeypatch.setattr(log_manager_module.os, "rename", rename_failing_once)
    assert m.delete_logs([("t", p) for p in range(3)]) == 3
    assert all(m.get_log("t", p) is None for p in range(3))
    # Still on disk under its own name: a new log there must not load it.
    assert (tmp_path / f"t-{failing}").exists()
    with pytest.raises(Exception):
        m.get_or_create_log("t", failing)
    monkeypatch.undo()
    log = m.get_or_create_log("t", failing)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    append(log, 1)  # the new topic's own data, which the restart keeps
    m2 = manager(tmp_path)
    assert m2.get_log("t", failing).log_end_offset == 1


@pytest.mark.parametrize("failing", [0, 1, 2])
def test_restart_after_a_failed_rename_removes_the_stray_log(tmp_path, monkeypatch, failing):
    m = filled(tmp_path)
    rename = os.rename

    def rename_failing(src, dst):
        if os.path.basename(src) == f"t-{failing}":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return rename(src, dst)

    monkeypatch.setattr(log_manager_module.os, "rename", rename_failing)
    m.delete_logs([("t", p) for p in range(3)])
    monkeypatch.undo()
    assert_topic_gone_and_recreated_empty(tmp_path)


def test_crash_before_any_rename_removes_every_log_at_restart(tmp_path):
    filled(tmp_path)  # the metadata said "deleted", then the broker died
    assert_topic_gone_and_recreated_empty(tmp_path)


def test_rename_retried_by_the_periodic_pass(tmp_path, monkeypatch):
    clock = FakeClock(T0)
    m = manager(tmp_path, clock)
    append(m.get_or_create_log("t", 0), 3)
    monkeypatch.setattr(log_manager_module.os, "rename", enospc)
    m.delete_log("t", 0)
    monkeypatch.undo()
    assert (tmp_path / "t-0").exists()
    m.remove_deleted(clock.milliseconds())
    assert not (tmp_path / "t-0").exists()
