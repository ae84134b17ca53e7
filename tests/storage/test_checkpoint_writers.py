"""Checkpoint files have one writer at a time (``file_ops.replace_durably``'s lock per path;
``LogManager.checkpoint_dir``'s per log directory).

Threads write one checkpoint at once in a broker: the periodic pass and a topic deletion (the
recovery-point, log-start-offset and cleaner checkpoints), the high watermark pass and the
shutdown's (``replication-offset-checkpoint``). Sharing the ``.tmp`` file, the second rename
found it gone (ENOENT) and the log directory was taken offline. Here several threads write
the same file at once: none fails, and the file holds one whole write, the last. And a
directory's checkpoint taken before a deletion never lands after the deletion's own.
"""

from __future__ import annotations

import os
import threading

import pytest

from odradek.storage import log_manager as log_manager_module
from odradek.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.leader_epoch_checkpoint import EpochEntry, LeaderEpochCheckpointFile
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0, append

THREADS, WRITES = 6, 40


def offsets_of(writer: int, n: int) -> dict:
    return {(f"t{writer}", p): n for p in range(50)}


def epochs_of(writer: int, n: int) -> list[EpochEntry]:
    return [EpochEntry(writer * 100 + e, n * 1000 + e) for e in range(20)]


CHECKPOINTS = {
    "offsets": (OffsetCheckpointFile, offsets_of),
    "leader epochs": (LeaderEpochCheckpointFile, epochs_of),
}


@pytest.mark.parametrize("kind", CHECKPOINTS)
def test_concurrent_writes_of_one_checkpoint_all_succeed_and_leave_the_last(tmp_path, kind):
    checkpoint_class, content_of = CHECKPOINTS[kind]
    path = str(tmp_path / "checkpoint")
    start, errors = threading.Barrier(THREADS), []

    def writer(i: int) -> None:
        start.wait()
        for n in range(WRITES):
            try:  # a new object per write, as high_watermark_checkpoint makes them
                checkpoint_class(path).write(content_of(i, n))
            except Exception as e:
                errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # The last write to finish is its thread's last: one whole write of one writer.
    found = checkpoint_class(path).read()
    assert any(found == content_of(i, WRITES - 1) for i in range(THREADS)), found
    assert not os.path.exists(path + ".tmp")


def test_a_checkpoint_snapshotted_before_a_deletion_does_not_land_after_it(tmp_path, monkeypatch):
    """The periodic pass snapshots the directory with the topic, then is slow to write; the
    topic is deleted meanwhile. The deletion's checkpoint, without it, must be the one left."""
    manager = LogManager([str(tmp_path)], LogConfig(), FakeClock(T0))
    manager.startup()
    append(manager.get_or_create_log("doomed", 0), 3)
    append(manager.get_or_create_log("kept", 0), 3)
    real_write, in_write, go_on = log_manager_module._write_checkpoints, threading.Event(), threading.Event()

    def slow_first_write(directory, logs, cleaner):
        if not in_write.is_set():
            in_write.set()
            go_on.wait(10)
        real_write(directory, logs, cleaner)

    monkeypatch.setattr(log_manager_module, "_write_checkpoints", slow_first_write)
    periodic = threading.Thread(target=manager.checkpoint_dir, args=(str(tmp_path),))
    periodic.start()
    assert in_write.wait(10)
    deletion = threading.Thread(target=manager.delete_log, args=("doomed", 0))
    deletion.start()
    deletion.join(1)  # finished here only if it does not wait for the periodic write
    go_on.set()
    periodic.join()
    deletion.join()
    recovery_points = OffsetCheckpointFile(str(tmp_path / RECOVERY_POINT_CHECKPOINT)).read()
    assert set(recovery_points) == {("kept", 0)}
    assert manager.failure_channel.offline_log_dirs == []
