"""``OffsetCheckpointFile``: Kafka's per-log-directory checkpoint text files.

Used for ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``cleaner-offset-checkpoint``. Format (text, ``\\n`` line ends)::

    0                      version
    2                      number of entries
    my_topic 0 1234        topic, partition, offset
    my_topic 1 987

Writes are atomic: the new content goes to ``<name>.tmp``, is fsynced, renamed over the old
file, and the directory is fsynced, so a crash leaves either the old or the new checkpoint.
One writer of a file at a time (``file_ops.replace_durably`` holds a lock per path throughout),
so writers in different threads never share the ``.tmp`` file.
A file that does not parse raises CheckpointError; callers fall back to the safe value
(recovering from offset 0, or the first segment's base offset).
"""

from __future__ import annotations


from odradek.storage.errors import CheckpointError
from odradek.storage.file_ops import replace_durably

VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

TopicPartition = tuple[str, int]
# Refuse absurd files instead of allocating for them.
_MAX_ENTRIES = 10_000_000


class OffsetCheckpointFile:
    """One checkpoint file: a map from (topic, partition) to an offset."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, offsets: dict[TopicPartition, int]) -> None:
        """Atomically replace the file with ``offsets``."""
        lines = [str(VERSION), str(len(offsets))]
        lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
        replace_durably(self.path, ("\n".join(lines) + "\n").encode("utf-8"))

    def read(self) -> dict[TopicPartition, int]:
        """The entries; {} when the file does not exist; CheckpointError when malformed."""
        try:
            with open(self.path, "rb") as f:
                text = f.read().decode("utf-8")
        except FileNotFoundError:
            return {}
        except UnicodeDecodeError:
            raise CheckpointError(f"{self.path}: not UTF-8 text") from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2 or lines[0].strip() != str(VERSION):
            raise CheckpointError(f"{self.path}: missing or unknown version")
        count = _parse_int(self.path, lines[1])
        if not 0 <= count <= _MAX_ENTRIES or len(lines) != count + 2:
            raise CheckpointError(f"{self.path}: expected {count} entries, found {len(lines) - 2}")
        result: dict[TopicPartition, int] = {}
        for line in lines[2:]:
            parts = line.split()
            if len(parts) != 3:
                raise CheckpointError(f"{self.path}: malformed line {line!r}")
            partition = _parse_int(self.path, parts[1])
            offset = _parse_int(self.path, parts[2])
            if partition < 0 or offset < 0:
                raise CheckpointError(f"{self.path}: negative value in {line!r}")
            result[(parts[0], partition)] = offset
        return result


def _parse_int(path: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise CheckpointError(f"{path}: {text!r} is not an integer") from None
