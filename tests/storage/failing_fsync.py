"""fsync and fdatasync that answer EIO for the files of one log directory, as a disk whose
writeback failed does (the data was accepted by write() but never reached the disk).

``failing_fsync.fail(directory)`` (the fixture, monkeypatching ``os.fsync`` and
``os.fdatasync`` for the test) makes every sync of a descriptor whose file lies under
``directory`` raise ``OSError(EIO)`` (or the ``code`` given: ENOSPC, as writeback to a full
thin-provisioned or network disk answers); other descriptors sync as usual. A descriptor's file is
found through ``/proc/self/fd`` (Linux), so descriptors opened before the fault fail too.
Unlike ``failing_filesystem`` it needs no root and leaves reads and writes working: only the
sync fails, which is what it tests.
"""

from __future__ import annotations

import errno
import os

import pytest


class FailingFsync:
    def __init__(self, monkeypatch) -> None:
        self._dirs: list[tuple[str, int]] = []
        self.failed = 0  # syncs refused so far
        for name in ("fsync", "fdatasync"):
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name)))

    def fail(self, directory, code: int = errno.EIO) -> None:
        """Every later sync of a file under ``directory`` raises ``OSError(code)``."""
        self._dirs.append((os.path.realpath(directory) + os.sep, code))

    def _wrap(self, real):
        def sync(fd: int) -> None:
            if self._dirs:
                try:
                    path = os.readlink(f"/proc/self/fd/{fd}") + os.sep
                except OSError:
                    path = ""
                for directory, code in self._dirs:
                    if path.startswith(directory):
                        self.failed += 1
                        raise OSError(code, os.strerror(code))
            real(fd)

        return sync


@pytest.fixture
def failing_fsync(monkeypatch):
    return FailingFsync(monkeypatch)
