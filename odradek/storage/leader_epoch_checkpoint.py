"""``LeaderEpochCheckpointFile``: the ``leader-epoch-checkpoint`` file of one partition log.

It lives in the partition's directory and persists its ``LeaderEpochFileCache``. The format is
Kafka's (``LeaderEpochCheckpointFile``, a ``CheckpointFile`` of version 0); text, ``\\n`` line
ends::

    0            version
    2            number of entries
    0 0          leader epoch (int32), start offset (int64): the first offset written in it
    3 1250

Writes are atomic, as for the other checkpoints (``checkpoint``): the new content goes to
``leader-epoch-checkpoint.tmp``, is fsynced, renamed over the old file, and the directory is
fsynced, so a crash leaves the old file or the new one, never a torn one; one writer at a time
(``file_ops.replace_durably``'s lock per path), even for two caches of one partition directory.

Reading, as Kafka's ``CheckpointFile.read``: a missing file is None (never written), an empty
file or one with only its version line holds no entries (Kafka creates the file empty), and
anything else that does not parse (unknown version, a malformed line, a count that does not
match the lines) raises CheckpointError. Kafka then takes the whole log directory offline;
``leader_epoch_cache.open_leader_epoch_cache`` instead rebuilds the cache from the batches of
the log, which are the truth it was derived from, and says so at ERROR level.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from odradek.storage.errors import CheckpointError
from odradek.storage.file_ops import replace_durably

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
VERSION = 0
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


class EpochEntry(NamedTuple):
    """Kafka's ``EpochEntry``: leader epoch ``epoch`` begins at offset ``start_offset``."""

    epoch: int
    start_offset: int


class LeaderEpochCheckpointFile:
    """The checkpoint file at ``path`` (``<partition dir>/leader-epoch-checkpoint``)."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def in_directory(cls, directory: str) -> LeaderEpochCheckpointFile:
        return cls(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))

    def write(self, entries) -> None:
        """Atomically replace the file with ``entries`` (``EpochEntry`` in epoch order)."""
        entries = list(entries)
        lines = [str(VERSION), str(len(entries))] + [f"{e} {o}" for e, o in entries]
        replace_durably(self.path, ("\n".join(lines) + "\n").encode("ascii"))

    def read(self) -> list[EpochEntry] | None:
        """The entries; None when the file does not exist; CheckpointError when it does not
        parse (see the module docstring)."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            raise CheckpointError(f"{self.path}: not a text file") from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            return []
        if _int(self.path, lines[0]) != VERSION:
            raise CheckpointError(f"{self.path}: unrecognised version {lines[0]!r}, expected {VERSION}")
        if len(lines) == 1:
            return []
        count = _int(self.path, lines[1])
        entries = []
        for line in lines[2:]:
            fields = line.split()
            if len(fields) != 2:
                raise CheckpointError(f"{self.path}: malformed line {line!r}")
            epoch, offset = _int(self.path, fields[0]), _int(self.path, fields[1])
            if not (0 <= epoch <= _INT32_MAX and 0 <= offset <= _INT64_MAX):
                raise CheckpointError(f"{self.path}: entry out of range {line!r}")
            entries.append(EpochEntry(epoch, offset))
        if len(entries) != count:
            raise CheckpointError(f"{self.path}: expected {count} entries, found {len(entries)}")
        for before, after in zip(entries, entries[1:]):
            if not (before.epoch < after.epoch and before.start_offset <= after.start_offset):
                raise CheckpointError(f"{self.path}: entries out of order: {before} then {after}")
        return entries


def _int(path: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise CheckpointError(f"{path}: malformed line {text!r}") from None
