"""``LogDirLocks``: a directory that cannot be used is offline, not fatal, unless none can be
used; one held by another broker always refuses the start."""

from __future__ import annotations

import pytest

from odradek.storage.log_dir_lock import LogDirError, LogDirLocks


def test_an_unusable_dir_is_returned_and_the_others_are_locked(tmp_path):
    (tmp_path / "file").write_text("a file where a log directory should be")
    locks = LogDirLocks([str(tmp_path / "a"), str(tmp_path / "file")])
    unusable = locks.acquire()
    try:
        assert list(unusable) == [str(tmp_path / "file")] and "cannot use" in unusable[str(tmp_path / "file")]
        with pytest.raises(LogDirError, match="in use by another odradek broker"):
            LogDirLocks([str(tmp_path / "a")]).acquire()
    finally:
        locks.release()


def test_no_usable_dir_refuses(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(LogDirError, match="cannot use"):
        LogDirLocks([str(tmp_path / "file" / "data"), str(tmp_path / "file")]).acquire()
    held = LogDirLocks([str(tmp_path / "a")])
    held.acquire()
    try:  # a held directory refuses even beside an unusable one, and releases what it took
        with pytest.raises(LogDirError, match="in use"):
            LogDirLocks([str(tmp_path / "b"), str(tmp_path / "file"), str(tmp_path / "a")]).acquire()
        again = LogDirLocks([str(tmp_path / "b")])
        assert again.acquire() == {}  # b was released
        again.release()
    finally:
        held.release()
