"""Durable files of the embedded metadata store: a snapshot plus an append-only journal.

Why a journal and not a snapshot per mutation: creating a topic of 1,000 partitions writes
some 1,000 znodes, and leaders rewrite partition state znodes as ISRs change. Rewriting a
multi-megabyte snapshot (and fsyncing it) per write would make metadata writes cost O(size of
all metadata); appending the batch's changes costs O(change) plus one fdatasync (~0.2 ms here).
The journal is folded into a fresh snapshot once it outgrows ``1 MiB + 2 x snapshot``, so the
bytes rewritten stay proportional to the bytes journaled, and startup replays a bounded tail.

Directory layout::

    lock                  flock(2)ed while a store has the directory open
    snapshot.json         {"format": "odradek-metadata-snapshot", "version": 1,
                           "generation": G,
                           "nodes": [[path, data, version, cversion], ...]}   parents first
    journal-<G>.log       the batches committed since snapshot G, in order

File modes: the snapshot and journals are created 0600 (owner only), and those of an older
store found with wider modes are narrowed at load: they hold SCRAM credentials
(``/config/users``) and dynamic broker passwords (``/config/brokers``), unencoded here as in
Kafka's KRaft metadata log, so file permissions are what guards them. The directory is made
0700 when created.

Snapshot data strings are znode bytes mapped one-to-one to chars (latin-1). The snapshot is
replaced atomically: written to ``snapshot.json.tmp``, fsynced, renamed, directory fsynced.

A journal record is one committed batch::

    length   uint32 big-endian   bytes of payload
    crc      uint32 big-endian   CRC-32C of payload
    payload  UTF-8 JSON          a list of journal entries (see znode_tree)

Every batch is fdatasynced before the store reports success. At startup, records are read up
to the first one that is cut short or fails its CRC (a write torn by a crash); the file is
truncated there, as Kafka's log recovery truncates an invalid tail.

Compaction: create an empty ``journal-<G+1>.log``, write snapshot G+1 and rename it in, then
delete the old journal. The rename is the switch: before it, the old snapshot and its complete
journal are in charge (a failure there just abandons the attempt); after it, the new snapshot
and its empty journal are. Startup removes files of other generations. (Should the new journal
be missing anyway, it is recreated empty: the snapshot holds everything.)
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path

import crc32c

from odradek.metadata.errors import CorruptStoreError, StoreLockedError

log = logging.getLogger(__name__)

SNAPSHOT_FORMAT = "odradek-metadata-snapshot"
SNAPSHOT_VERSION = 1
COMPACT_MIN_BYTES = 1024 * 1024
FILE_MODE = 0o600  # credentials inside: see "File modes" above
DIR_MODE = 0o700
_HEADER = struct.Struct(">II")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _decode_records(raw: bytes) -> tuple[list[list[dict]], int]:
    """Parse journal bytes; return the batches and the length of the valid prefix."""
    batches: list[list[dict]] = []
    pos = 0
    while pos + _HEADER.size <= len(raw):
        length, crc = _HEADER.unpack_from(raw, pos)
        end = pos + _HEADER.size + length
        if end > len(raw):
            break
        payload = raw[pos + _HEADER.size : end]
        if crc32c.crc32c(payload) != crc:
            break
        try:
            batch = json.loads(payload)
        except ValueError as exc:
            raise CorruptStoreError(f"journal record at byte {pos} is not JSON") from exc
        if not isinstance(batch, list):
            raise CorruptStoreError(f"journal record at byte {pos} is not a list")
        batches.append(batch)
        pos = end
    return batches, pos


class Journal:
    """The snapshot and journal files of one embedded-store directory, opened exclusively."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        self._lock_fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise StoreLockedError(f"{self.directory} is in use by another store") from None
        self._fd = -1
        self.generation = 0
        self.snapshot_size = 0
        self.size = 0

    def load(self) -> tuple[list[tuple[str, bytes, int, int]], list[list[dict]]]:
        """Read the snapshot and journal; return the snapshot's nodes and the journal batches.

        Truncates a torn journal tail, removes files of other generations, and opens the
        journal for appending.
        """
        nodes = self._read_snapshot()
        self._narrow_modes()
        path = self._journal_path(self.generation)
        raw = path.read_bytes() if path.exists() else b""
        batches, valid = _decode_records(raw)
        if valid < len(raw):
            log.warning("%s: dropping %d bytes of torn journal tail", path, len(raw) - valid)
        self._remove_stale_files()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
        if valid < len(raw):
            os.ftruncate(self._fd, valid)
            os.fsync(self._fd)
        os.lseek(self._fd, valid, os.SEEK_SET)
        _fsync_dir(self.directory)
        self.size = valid
        return nodes, batches

    def _journal_path(self, generation: int) -> Path:
        return self.directory / f"journal-{generation}.log"

    def _read_snapshot(self) -> list[tuple[str, bytes, int, int]]:
        path = self.directory / "snapshot.json"
        if not path.exists():
            return []
        raw = path.read_bytes()
        try:
            doc = json.loads(raw)
            if doc.get("format") != SNAPSHOT_FORMAT or doc.get("version") != SNAPSHOT_VERSION:
                raise ValueError(f"unknown snapshot format {doc.get('format')!r}")
            self.generation = int(doc["generation"])
            nodes = [
                (str(p), str(d).encode("latin-1"), int(v), int(cv)) for p, d, v, cv in doc["nodes"]
            ]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptStoreError(f"{path} is unreadable: {exc}") from exc
        self.snapshot_size = len(raw)
        return nodes

    def _narrow_modes(self) -> None:
        """Files of an older store, created 0644, become 0600 (``chmod`` never widens: a
        mode already narrower stays)."""
        for entry in self.directory.iterdir():
            if entry.name == "snapshot.json" or entry.name.startswith("journal-"):
                mode = entry.stat().st_mode & 0o777
                if mode & ~FILE_MODE:
                    entry.chmod(mode & FILE_MODE)

    def _remove_stale_files(self) -> None:
        keep = self._journal_path(self.generation).name
        for entry in self.directory.iterdir():
            stale_journal = entry.name.startswith("journal-") and entry.name != keep
            if stale_journal or entry.name == "snapshot.json.tmp":
                entry.unlink()

    def append(self, entries: list[dict]) -> None:
        """Write one batch durably (write + fdatasync); on failure cut the file back."""
        payload = json.dumps(entries, separators=(",", ":")).encode()
        record = _HEADER.pack(len(payload), crc32c.crc32c(payload)) + payload
        try:
            _write_all(self._fd, record)
            os.fdatasync(self._fd)
        except OSError:
            try:
                os.ftruncate(self._fd, self.size)
                os.lseek(self._fd, self.size, os.SEEK_SET)
            except OSError:
                log.exception("could not cut the metadata journal back after a failed write")
            raise
        self.size += len(record)

    def needs_compaction(self) -> bool:
        return self.size > COMPACT_MIN_BYTES + 2 * self.snapshot_size

    def compact(self, nodes: Iterable[tuple[str, bytes, int, int]]) -> None:
        """Replace snapshot and journal by a snapshot of ``nodes`` (see the module docstring)."""
        generation = self.generation + 1
        doc = {
            "format": SNAPSHOT_FORMAT,
            "version": SNAPSHOT_VERSION,
            "generation": generation,
            "nodes": [[p, d.decode("latin-1"), v, cv] for p, d, v, cv in nodes],
        }
        raw = json.dumps(doc, separators=(",", ":")).encode()
        tmp = self.directory / "snapshot.json.tmp"
        new_path = self._journal_path(generation)
        # The new (empty) journal exists before the snapshot that needs it is renamed in, so
        # whatever fails before the rename leaves the old pair in charge: give up cleanly.
        fd = new_fd = -1
        try:
            new_fd = os.open(new_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
            _write_all(fd, raw)
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(tmp, self.directory / "snapshot.json")
        except BaseException:
            for leftover in (fd, new_fd):
                if leftover >= 0:
                    os.close(leftover)
            tmp.unlink(missing_ok=True)
            new_path.unlink(missing_ok=True)
            raise
        # From the rename on, the new snapshot and journal are the store's files.
        old_fd, old_path = self._fd, self._journal_path(self.generation)
        self._fd, self.generation, self.size, self.snapshot_size = new_fd, generation, 0, len(raw)
        os.close(old_fd)
        _fsync_dir(self.directory)
        old_path.unlink(missing_ok=True)

    def close(self) -> None:
        """Close the journal and release the directory lock. Idempotent."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
