"""storage/deferred_sync.py: replace_durably inside a batch leaves its fsyncs to the batch;
sync_paths makes many paths durable with one syncfs, few with fsyncs."""

from __future__ import annotations

import os

import pytest

from odradek.storage import deferred_sync, file_ops


def test_replace_durably_in_a_batch_notes_the_file_and_its_directory_instead_of_fsyncing(tmp_path, monkeypatch):
    fsyncs = []
    monkeypatch.setattr(file_ops.os, "fsync", fsyncs.append)
    path = str(tmp_path / "cp")
    with deferred_sync.deferring() as noted:
        file_ops.replace_durably(path, b"1\n")
    assert noted == [path, str(tmp_path)] and fsyncs == []
    assert open(path, "rb").read() == b"1\n"
    file_ops.replace_durably(path, b"2\n")  # outside a batch: file and directory fsynced at once
    assert len(fsyncs) == 2 and not deferred_sync.defer(path)


def _counted_syncs(tmp_path, monkeypatch) -> tuple[list, list[str]]:
    """The syncs made (``"syncfs"`` / ``"fsync"``, not made for real) and `SYNCFS_FROM` files."""
    calls: list = []
    monkeypatch.setattr(deferred_sync, "_syncfs", lambda fd: calls.append("syncfs") or 0)
    monkeypatch.setattr(deferred_sync.os, "fsync", lambda fd: calls.append("fsync"))
    paths = []
    for i in range(deferred_sync.SYNCFS_FROM):
        (tmp_path / str(i)).write_bytes(b"x")
        paths.append(str(tmp_path / str(i)))
    return calls, paths


def test_many_paths_one_syncfs_few_one_fsync_each(tmp_path, monkeypatch):
    calls, paths = _counted_syncs(tmp_path, monkeypatch)
    monkeypatch.setattr(deferred_sync, "_dirty_bytes", lambda: 0)
    deferred_sync.sync_paths(paths)
    assert calls == ["syncfs"]
    calls.clear()
    deferred_sync.sync_paths(paths[:2] + [str(tmp_path)])
    assert calls == ["fsync"] * 3
    monkeypatch.setattr(deferred_sync, "_syncfs", None)  # no syncfs here: one fsync each
    calls.clear()
    deferred_sync.sync_paths(paths)
    assert calls == ["fsync"] * len(paths) and os.path.exists(paths[0])


def test_a_path_deleted_before_its_sync_is_skipped_not_a_failure(tmp_path, monkeypatch):
    """A follower's checkpoint noted for a sync in another thread, its partition directory
    deleted meanwhile: the sync makes the rest durable and raises nothing (an OSError would
    take the whole log directory offline)."""
    synced = []
    monkeypatch.setattr(deferred_sync.os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")))
    kept = tmp_path / "kept"
    kept.write_bytes(b"x")
    deferred_sync.sync_paths([str(tmp_path / "gone" / "leader-epoch-checkpoint"), str(tmp_path / "gone"),
                              str(kept), str(tmp_path)])
    assert synced == [str(kept), str(tmp_path)]
    monkeypatch.setattr(deferred_sync, "_syncfs", lambda fd: 0)
    paths = [str(tmp_path / f"gone-{i}") for i in range(deferred_sync.SYNCFS_FROM)]
    deferred_sync.sync_paths(paths)  # the last one gone too: one fsync each, of nothing
    assert synced == [str(kept), str(tmp_path)]


def test_with_much_dirty_data_many_paths_are_fsynced_one_by_one(tmp_path, monkeypatch):
    """A syncfs writes back every dirty page of the filesystem, the logs' segments too: under
    load (GiBs dirty) it took hundreds of ms where one fsync per path took tens."""
    calls, paths = _counted_syncs(tmp_path, monkeypatch)
    monkeypatch.setattr(deferred_sync, "_dirty_bytes", lambda: deferred_sync.SYNCFS_DIRTY_MAX)
    deferred_sync.sync_paths(paths)
    assert calls == ["fsync"] * len(paths)
    calls.clear()
    monkeypatch.setattr(deferred_sync, "_dirty_bytes", lambda: deferred_sync.SYNCFS_DIRTY_MAX - 1)
    deferred_sync.sync_paths(paths)
    assert calls == ["syncfs"]


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="not Linux: no syncfs either")
def test_the_dirty_bytes_are_read_from_proc_meminfo(tmp_path):
    """32 MiB written and not synced are dirty (the kernel writes back after ~30 s, or from a
    tenth of memory on): the machine's count is at least most of them."""
    with open(tmp_path / "dirty", "wb") as f:
        f.write(os.urandom(1 << 20) * 32)
    assert deferred_sync._dirty_bytes() >= 16 << 20
