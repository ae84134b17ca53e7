"""Values crossing the SharePartition API (``share_partition.py``).

- ``FetchedBatch``: what acquisition needs of a fetched log batch. ``odradek.records.batch``'s
  ``BatchHeader`` fits (``base_offset``, ``last_offset``, ``producer_id``,
  ``is_transactional``, ``is_control``); tests pass small stand-ins.
- ``AcquiredRecords``: one acquired inclusive offset run, as ShareFetch's AcquiredRecords
  (FirstOffset, LastOffset, DeliveryCount).
- ``AcknowledgementBatch``: one ShareAcknowledge/ShareFetch AcknowledgementBatches entry:
  ``[first_offset, last_offset]`` with one acknowledge type for the whole run or one per
  offset (Kafka's ShareAcknowledgementBatch).
- ``SharePartitionConfig``: the group configs a share partition obeys, with Kafka 4.2's
  names and defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["FetchedBatch", "AcquiredRecords", "AcknowledgementBatch", "SharePartitionConfig"]


class FetchedBatch(Protocol):
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """``acknowledge_types``: one type (whole run) or ``last - first + 1`` types, in order."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]

    def type_at(self, offset: int) -> int:
        types = self.acknowledge_types
        return types[0] if len(types) == 1 else types[offset - self.first_offset]


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    """``record_lock_duration_ms``: group.share.record.lock.duration.ms (30000);
    ``delivery_count_limit``: group.share.delivery.count.limit (5);
    ``max_record_locks``: group.share.partition.max.record.locks (2000), the largest in-flight
    window ``[start offset, end offset]``;
    ``auto_offset_reset``: share.auto.offset.reset ("latest", "earliest" or
    "by_duration:<ISO-8601 duration>", ``auto_offset_reset.py``)."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000
    auto_offset_reset: str = "latest"
