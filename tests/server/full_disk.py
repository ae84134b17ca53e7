"""A broker whose ``log.dirs`` is on a tiny filesystem that a test fills up and frees.

``TinyFilesystem`` mounts a size-limited tmpfs (root only: the tests that use it are
skipped, saying so, elsewhere; CI runs as root) and always unmounts it. ``fill()`` writes a
ballast file until the filesystem refuses (ENOSPC), ``free()`` deletes it. On tmpfs a write
needs a new 4 KiB page only past the last page a file already has, so after ``fill()`` an
append that fits in the tail of its segment's last page still succeeds, and one that needs
a new page fails: tests pick batch sizes accordingly.

Use the ``full_disk`` fixture (import it into the test module): it yields a
``FullDiskBroker`` (an ``InProcessBroker`` on the filesystem, plus ``fs``), restartable on
the same data with ``restart()``.
"""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from odradek.testing.broker import InProcessBroker

SIZE = 8 << 20  # room for the metadata, a few small topics and a ballast


class TinyFilesystem:
    def __init__(self, path, size: int = SIZE) -> None:
        self.path = str(path)
        self.size = size
        self.ballast = os.path.join(self.path, "ballast")
        self._mounted = False

    def mount(self) -> "TinyFilesystem":
        if os.geteuid() != 0:
            pytest.skip("a full disk is simulated with a tmpfs, which only root can mount (CI runs as root)")
        os.makedirs(self.path, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size}", "tmpfs", self.path],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        self._mounted = True
        return self

    def unmount(self) -> None:
        if self._mounted:
            # Lazy: a descriptor a failed test left open must not keep the mount alive.
            subprocess.run(["umount", "-l", self.path], check=False)
            self._mounted = False

    def fill(self) -> None:
        """Take every free block (the ballast grows until ENOSPC)."""
        chunk = b"\0" * (64 << 10)
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    if len(chunk) == 1:
                        return
                    chunk = chunk[: len(chunk) // 2]
        finally:
            os.close(fd)

    def free(self) -> None:
        os.unlink(self.ballast)

    def __enter__(self) -> "TinyFilesystem":
        return self.mount()

    def __exit__(self, *exc) -> None:
        self.unmount()


class FullDiskBroker(InProcessBroker):
    """An in-process broker with its data on ``fs`` (a mounted ``TinyFilesystem``)."""

    def __init__(self, fs: TinyFilesystem, **overrides) -> None:
        super().__init__(os.path.join(fs.path, "data"), **overrides)
        self.fs = fs

    def restart(self) -> None:
        self.stop()
        self.__init__(self.fs, props=self.props)
        self.start()


@pytest.fixture
def full_disk(tmp_path, request):
    """A broker on a tiny tmpfs (not yet full: the test calls ``broker.fs.fill()``); broker
    settings may be given by indirect parametrization (a dict of ``test_config`` overrides)."""
    overrides = {"log_index_interval_bytes": 0, **getattr(request, "param", {})}
    with TinyFilesystem(tmp_path / "mnt") as fs:
        broker = FullDiskBroker(fs, **overrides)
        try:
            broker.start()
            yield broker
        finally:
            broker.stop()
