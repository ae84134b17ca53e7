"""Deleting a topic's logs is all-or-nothing and restartable: a disk error at any step
(checkpoint, rename) neither stops the other partitions' removal nor lets the deleted data
be loaded, reused or served again, after a restart either."""

import errno
import os
import shutil
import threading
import types
import uuid

import pytest

from odradek.storage import log_deletion as log_deletion_module
from odradek.storage import log_manager as log_manager_module
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from odradek.storage.partition_metadata import read_topic_id, write_topic_id
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
    m.delete_stray_logs(lambda topic, _topic_id: topic == "kept")
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


# -- topic ids (partition.metadata): a new topic of the same name never gets an old log ----


def test_a_log_of_an_older_topic_id_is_replaced_by_an_empty_one(tmp_path):
    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    m = manager(tmp_path)
    append(m.get_or_create_log("t", 0, topic_id=old_id), 3)
    assert read_topic_id(m.get_log("t", 0).directory) == old_id
    assert m.get_or_create_log("t", 0, topic_id=old_id).log_end_offset == 3  # the same topic
    log = m.get_or_create_log("t", 0, topic_id=new_id)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert read_topic_id(log.directory) == new_id and m.topic_id("t", 0) == new_id


def test_a_log_without_a_recorded_id_takes_the_first_one_given(tmp_path):
    m = manager(tmp_path)
    append(m.get_or_create_log("t", 0), 3)  # as kept from before ids were recorded
    topic_id = uuid.uuid4()
    assert m.get_or_create_log("t", 0, topic_id=topic_id).log_end_offset == 3
    assert read_topic_id(m.get_log("t", 0).directory) == topic_id


def test_restart_removes_the_logs_of_a_recreated_topics_older_id(tmp_path):
    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    m = manager(tmp_path)
    append(m.get_or_create_log("t", 0, topic_id=old_id), 3)
    append(m.get_or_create_log("t", 1), 3)  # no id recorded: kept, the name being alive
    m.shutdown()
    again = manager(tmp_path)
    assert again.topic_id("t", 0) == old_id
    assert again.delete_stray_logs(lambda topic, topic_id: topic_id in (None, new_id)) == [("t", 0)]
    assert again.get_or_create_log("t", 0, topic_id=new_id).log_end_offset == 0
    assert again.get_log("t", 1).log_end_offset == 3


def test_partition_metadata_is_kafkas_format(tmp_path):
    topic_id = uuid.UUID("e5f2758c-4df3-4173-8f78-6b56ab4b3702")
    write_topic_id(str(tmp_path), topic_id)
    assert (tmp_path / "partition.metadata").read_text() == "version: 0\ntopic_id: 5fJ1jE3zQXOPeGtWq0s3Ag\n"
    assert read_topic_id(str(tmp_path)) == topic_id
    for bad in ("", "version: 1\ntopic_id: 5fJ1jE3zQXOPeGtWq0s3Ag\n", "version: 0\ntopic_id: !!\n",
                "version: 0\ntopic_id: AAAA\n"):
        (tmp_path / "partition.metadata").write_text(bad)
        assert read_topic_id(str(tmp_path)) is None


def test_a_recreated_log_does_not_inherit_a_deleted_ones_cleaner_offset(tmp_path, monkeypatch):
    m = filled(tmp_path)
    m.set_cleaner_offset("t", 0, 9)
    m.checkpoint()
    monkeypatch.setattr(OffsetCheckpointFile, "write", enospc)
    m.delete_logs([("t", 0)])  # the checkpoint still names t-0's cleaner offset
    monkeypatch.undo()
    again = restarted(tmp_path)
    assert again.get_or_create_log("t", 0).log_end_offset == 0
    assert again.cleaner_offset("t", 0) == 0


# -- speed at 10,000 partitions: one fsync per data directory, erasing in parallel --------------


def test_deleting_many_logs_syncs_their_data_directory_once(tmp_path, monkeypatch):
    """The renames of a deletion are made durable by one fsync of the data directory after
    them all, not one per partition (10,000 fsyncs were seconds of a deletion)."""
    m = filled(tmp_path, partitions=3)
    synced = []
    monkeypatch.setattr(log_deletion_module, "fsync_directory", synced.append)
    assert m.delete_logs([("t", p) for p in range(3)]) == 3
    assert synced == [str(tmp_path)]
    assert sorted(n.split(".")[0] for n in os.listdir(tmp_path) if n.endswith("-delete")) == ["t-0", "t-1", "t-2"]


def delete_two_erased_only_together(m, monkeypatch) -> None:
    """Two logs of ``m`` deleted; their directories can then be erased only two at a time:
    each ``rmtree`` waits at a barrier for the other (one at a time times out)."""
    for p in range(2):
        append(m.get_or_create_log("t", p), 3)
    m.delete_logs([("t", 0), ("t", 1)])
    both = threading.Barrier(2, timeout=5)

    def rmtree(path, ignore_errors=False):
        both.wait()
        shutil.rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(log_deletion_module, "shutil", types.SimpleNamespace(rmtree=rmtree))


def test_deleted_directories_are_erased_several_at_a_time(tmp_path, monkeypatch):
    """Erasing waits on the file system: two directories due together are erased by two
    threads at once (each waits at a barrier for the other; one at a time breaks it)."""
    clock = FakeClock(T0)
    m = manager(tmp_path, clock)
    delete_two_erased_only_together(m, monkeypatch)
    assert m.remove_deleted_dirs(clock.milliseconds() + m.default_config.file_delete_delay_ms) == 2
    assert [n for n in os.listdir(tmp_path) if n.startswith("t-")] == []


@pytest.mark.parametrize("when", ["shutdown", "start-up"])
def test_deleted_directories_left_at_shutdown_or_start_up_are_erased_together(tmp_path, monkeypatch, when):
    """A shutdown erases the directories still waiting for ``file.delete.delay.ms``, and a
    start-up those a crash left, several at a time too (a barrier of two: one at a time
    breaks it)."""
    m = manager(tmp_path)
    delete_two_erased_only_together(m, monkeypatch)
    if when == "shutdown":
        assert m.shutdown()
    else:
        manager(tmp_path)  # m crashed: its deleted directories are still there
    assert [n for n in os.listdir(tmp_path) if n.startswith("t-")] == []
