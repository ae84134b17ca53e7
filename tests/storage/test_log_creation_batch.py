"""LogManager.creation_batch (storage/log_creation_batch.py, deferred_sync.py): the logs
created in a batch, and the leader-epoch-checkpoints written in it, are made durable once per
log directory when the batch ends; a failed sync fails the batch's logs of that directory;
logs of an ended batch survive kill -9."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import uuid

import pytest

from odradek.storage import deferred_sync
from odradek.storage import log_manager as log_manager_module
from odradek.storage.clock import SystemClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager

TOPIC_ID = uuid.UUID("5a0f8c1e-1d8b-4f0e-9a55-2c8e4f9b7d31")


def _manager(tmp_path, dirs=2):
    paths = [str(tmp_path / f"d{i}") for i in range(dirs)]
    for p in paths:
        os.makedirs(p)
    manager = LogManager(paths, LogConfig(), SystemClock())
    manager.startup()
    return manager, paths


def test_one_directory_fsync_per_log_dir_when_the_batch_ends(tmp_path, monkeypatch):
    manager, paths = _manager(tmp_path)
    synced, fsynced = [], []
    monkeypatch.setattr(deferred_sync, "sync_paths", synced.append)
    monkeypatch.setattr(log_manager_module, "fsync_directory", fsynced.append)
    with manager.creation_batch() as batch:
        for p in range(6):
            manager.get_or_create_log("b", p, topic_id=TOPIC_ID).assign_leader_epoch(3)
        assert synced == [] and fsynced == []  # not yet: once per directory, at the end
    assert sorted(s[-1] for s in synced) == paths and batch.failed == {}
    checkpoints = sorted(p for s in synced for p in s if p.endswith("leader-epoch-checkpoint"))
    assert len(checkpoints) == 6  # each with its partition directory
    assert all(os.path.dirname(c) in s for s in synced for c in s if c.endswith("checkpoint"))
    manager.get_or_create_log("b", 9, topic_id=TOPIC_ID)  # outside a batch: its own fsync at once
    assert len(synced) == 2 and fsynced == [manager._dir_of[("b", 9)]]
    manager.shutdown()


def test_a_failed_directory_fsync_fails_that_directory_s_logs_of_the_batch(tmp_path, monkeypatch):
    manager, paths = _manager(tmp_path)
    real = deferred_sync.sync_paths

    def sync(synced):
        if synced[-1] == paths[0]:
            raise OSError(errno.EIO, "I/O error")
        real(synced)

    monkeypatch.setattr(deferred_sync, "sync_paths", sync)
    with manager.creation_batch() as batch:
        for p in range(4):
            manager.get_or_create_log("f", p, topic_id=TOPIC_ID)
    in_first = {tp for tp, d in manager._dir_of.items() if d == paths[0]}
    assert len(batch.failed) == 2 and not in_first
    assert all(manager.get_log(*tp) is None for tp in batch.failed)
    assert all(manager.get_log("f", p) is not None for p in range(4) if ("f", p) not in batch.failed)
    assert manager.failure_channel.offline_log_dirs == [paths[0]]


_CHILD = """
import sys, time, uuid
from odradek.storage.clock import SystemClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
manager = LogManager(sys.argv[1:], LogConfig(), SystemClock())
manager.startup()
with manager.creation_batch():
    for p in range(30):
        log = manager.get_or_create_log("k", p, topic_id=uuid.UUID(%r))
        if p %% 3 == 0:
            log.assign_leader_epoch(4)
print("created", flush=True)
time.sleep(60)
"""


def test_the_logs_of_an_ended_batch_survive_kill_9(tmp_path):
    paths = [str(tmp_path / "a"), str(tmp_path / "b")]
    for p in paths:
        os.makedirs(p)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = subprocess.Popen([sys.executable, "-c", _CHILD % str(TOPIC_ID), *paths], stdout=subprocess.PIPE,
                             cwd=root, text=True)
    try:
        assert child.stdout.readline().strip() == "created"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    manager = LogManager(paths, LogConfig(), SystemClock())
    manager.startup()
    logs = manager.all_logs()
    assert sorted(p for t, p in logs if t == "k") == list(range(30))
    assert all(manager.topic_id("k", p) == TOPIC_ID for p in range(30))
    assert all(os.path.exists(os.path.join(logs[("k", p)].directory, "leader-epoch-checkpoint"))
               for p in range(0, 30, 3))
    manager.shutdown()
