"""``PendingTransactionalOffsets``: offsets committed inside transactions not yet ended.

A TxnOffsetCommit writes its offsets to ``__consumer_offsets`` in a transactional batch of the
producer (its producer id and epoch, base sequence -1). Replayed, they land here, not in the
group's committed offsets: they stay pending, per producer id, until the transaction's marker
(a control batch of that producer on the same partition) is replayed. A COMMIT marker moves
them into the committed offsets, an ABORT marker drops them (Kafka's
``OffsetMetadataManager.pendingTransactionalOffsets`` / ``replayEndTransactionMarker``).

Layout::

    by_producer  producer id -> group id -> (topic, partition) -> (record offset, OffsetAndMetadata)
    open_by_group  group id -> {producer ids with pending offsets of that group}

The record offset (the position of the offset record in ``__consumer_offsets``) decides, at
commit, between a pending offset and one committed outside the transaction after it: the one
written later in the log wins, so a compacted log replays to the same state (Kafka's rule).

Invariants: ``open_by_group[g]`` holds ``pid`` iff ``by_producer[pid]`` has an entry for
``g`` (possibly emptied by tombstones: the transaction stays open for the group until its
marker, as in Kafka); a producer id appears in ``by_producer`` only between its first
transactional offset record and its marker.
"""

from __future__ import annotations

from odradek.coordinator.group.offset_and_metadata import OffsetAndMetadata

TopicPartition = tuple[str, int]
Positioned = tuple[int, OffsetAndMetadata]


class PendingTransactionalOffsets:
    def __init__(self) -> None:
        self.by_producer: dict[int, dict[str, dict[TopicPartition, Positioned]]] = {}
        self.open_by_group: dict[str, set[int]] = {}

    def __bool__(self) -> bool:
        return bool(self.by_producer)

    def put(self, producer_id: int, group_id: str, tp: TopicPartition, record_offset: int,
            value: OffsetAndMetadata) -> None:
        """A transactional offset record replayed: pending until ``producer_id``'s marker."""
        self.by_producer.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = (record_offset, value)
        self.open_by_group.setdefault(group_id, set()).add(producer_id)

    def remove_partition(self, group_id: str, tp: TopicPartition) -> None:
        """An offset tombstone replayed: every open transaction's offset of ``tp`` goes."""
        for pid in self.open_by_group.get(group_id, ()):
            self.by_producer.get(pid, {}).get(group_id, {}).pop(tp, None)

    def end(self, producer_id: int) -> dict[str, dict[TopicPartition, Positioned]]:
        """A marker of ``producer_id`` replayed: its pending offsets, now no longer pending
        (empty when it had none)."""
        ended = self.by_producer.pop(producer_id, {})
        for group_id in ended:
            open_txns = self.open_by_group.get(group_id)
            if open_txns is not None:
                open_txns.discard(producer_id)
                if not open_txns:
                    del self.open_by_group[group_id]
        return ended

    def has_open_transactions(self, group_id: str) -> bool:
        return group_id in self.open_by_group

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset of ``tp`` for ``group_id``."""
        return any(tp in self.by_producer.get(pid, {}).get(group_id, {})
                   for pid in self.open_by_group.get(group_id, ()))

    def partitions(self, group_id: str) -> set[TopicPartition]:
        """Every partition with a pending offset of ``group_id``."""
        out: set[TopicPartition] = set()
        for pid in self.open_by_group.get(group_id, ()):
            out.update(self.by_producer.get(pid, {}).get(group_id, {}))
        return out

    def pending(self, producer_id: int, group_id: str, tp: TopicPartition) -> OffsetAndMetadata | None:
        """The pending offset of one producer (for tests and tools)."""
        positioned = self.by_producer.get(producer_id, {}).get(group_id, {}).get(tp)
        return None if positioned is None else positioned[1]

    def clear(self) -> None:
        self.by_producer.clear()
        self.open_by_group.clear()
