"""A log directory on a filesystem that a test makes fail, as a dying disk does.

``FailingFilesystem(path)`` formats a small ext4 image and loop-mounts it at ``path`` (root
only: the tests that use it are skipped, saying so, elsewhere; CI runs as root). ``fail()``
shuts the filesystem down (``EXT4_IOC_SHUTDOWN``, what ext4 does itself after I/O errors with
``errors=remount-ro``, and what xfs_io's ``shutdown`` does): from then on every read, write,
fsync and create on it answers EIO, including on descriptors opened before. ``unmount()``
(always called by the fixture) detaches it lazily, so descriptors a broker still holds do not
keep the mount alive; the loop device goes with the last of them.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
from pathlib import Path

import pytest

SIZE = 64 << 20
EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2  # stop at once, as a disk that is gone


class FailingFilesystem:
    def __init__(self, path, size: int = SIZE) -> None:
        self.path = Path(path)
        self.image = self.path.with_name(self.path.name + ".ext4")
        self.size = size
        self._mounted = False

    def mount(self) -> FailingFilesystem:
        if os.geteuid() != 0:
            pytest.skip("a failing disk is an ext4 loop mount shut down by ioctl: root only (CI runs as root)")
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(self.size)
        for argv in (["mkfs.ext4", "-q", "-F", str(self.image)],
                     ["mount", "-o", "loop", str(self.image), str(self.path)]):
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"cannot {argv[0]} a loop filesystem here: {done.stderr.strip()}")
        self._mounted = True
        return self

    def fail(self) -> None:
        """Every operation on the filesystem answers EIO from now on."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
        finally:
            os.close(fd)

    def unmount(self) -> None:
        if self._mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)
            self._mounted = False
        self.image.unlink(missing_ok=True)

    def __enter__(self) -> FailingFilesystem:
        return self.mount()

    def __exit__(self, *exc) -> None:
        self.unmount()


@pytest.fixture
def failing_fs(tmp_path):
    """A mounted `FailingFilesystem` at ``tmp_path / "failing"``, unmounted after the test."""
    with FailingFilesystem(tmp_path / "failing") as fs:
        yield fs
