"""Names of partitions and of positions in them, as the client's API passes them around.

``TopicPartition`` is a named tuple, so it hashes and compares by value and unpacks as
``topic, partition``. Offsets are Kafka's: the offset of the *next* record to read, so a
committed offset of 10 means records 0-9 were consumed.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """A committed offset of a group, its metadata string and the leader epoch it saw."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    """The answer of an offset lookup: the offset and the timestamp of its record (-1 when
    the lookup was earliest or latest)."""

    offset: int
    timestamp: int
    leader_epoch: int = -1
