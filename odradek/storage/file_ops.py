"""Small filesystem steps the storage layer repeats: whole-file reads and writes, fsync of a
file by path or of a directory (which makes creations and renames in it durable)."""

from __future__ import annotations

import os


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_file(path: str, data: bytes) -> None:
    """Replace the content of ``path`` with ``data`` (no fsync)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def fsync_path(path: str) -> None:
    """fsync the file at ``path``; a file deleted meanwhile has nothing left to sync."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(path: str) -> None:
    """fsync a directory, making file creations and renames in it durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
