"""Acknowledgements of a share consumer (KIP-932): what it tells a share partition about the
records it acquired.

``AcknowledgeType`` has Kafka's wire ids (``AcknowledgeType`` and the internal GAP): GAP 0 (an
acquired offset with no record: compacted away, or a control record), ACCEPT 1 (processed),
RELEASE 2 (give it to someone again: redelivered, its delivery count one higher), REJECT 3 (never
deliver it again: archived).

``Acknowledgements`` holds one partition's acknowledgements (offset → type), as Kafka's
``Acknowledgements``, and turns them into the wire's AcknowledgementBatches: runs of consecutive
offsets; a run whose offsets share one type carries that one type, a mixed run carries one
type per offset (``AcknowledgeTypes`` is a list either of length 1 or of the run's length).
Example: {5: ACCEPT, 6: ACCEPT, 7: RELEASE, 9: ACCEPT} gives batches (5, 7, [1, 1, 2]) and
(9, 9, [1]).

``TopicIdPartition`` names a share partition as Kafka does: topic id, topic name, partition.
"""

from __future__ import annotations

import enum
import uuid
from typing import NamedTuple

__all__ = ["AcknowledgeType", "Acknowledgements", "TopicIdPartition"]


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class TopicIdPartition(NamedTuple):
    topic_id: uuid.UUID
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class Acknowledgements:
    """One partition's acknowledgements, offset → ``AcknowledgeType``. An offset acknowledged
    twice keeps the later type (the application changed its mind before it was sent)."""

    __slots__ = ("_types",)

    def __init__(self, types: dict[int, int] | None = None) -> None:
        self._types: dict[int, int] = dict(types or {})

    def add(self, offset: int, ack_type: int) -> None:
        self._types[offset] = int(ack_type)

    def merge(self, other: Acknowledgements) -> None:
        self._types.update(other._types)

    def __len__(self) -> int:
        return len(self._types)

    def __bool__(self) -> bool:
        return bool(self._types)

    def __eq__(self, other) -> bool:
        return isinstance(other, Acknowledgements) and self._types == other._types

    def __repr__(self) -> str:
        return f"Acknowledgements({self._types!r})"

    def offsets(self) -> set[int]:
        """The offsets acknowledged (a GAP included)."""
        return set(self._types)

    def batches(self) -> list[tuple[int, int, list[int]]]:
        """``(first_offset, last_offset, acknowledge_types)`` runs, ascending (see the module
        doc)."""
        out: list[tuple[int, int, list[int]]] = []
        first = last = None
        types: list[int] = []
        for offset in sorted(self._types):
            if last is not None and offset == last + 1:
                last = offset
                types.append(self._types[offset])
                continue
            if first is not None:
                out.append(_batch(first, last, types))
            first = last = offset
            types = [self._types[offset]]
        if first is not None:
            out.append(_batch(first, last, types))
        return out


def _batch(first: int, last: int, types: list[int]) -> tuple[int, int, list[int]]:
    if all(t == types[0] for t in types):
        return first, last, [types[0]]
    return first, last, list(types)
