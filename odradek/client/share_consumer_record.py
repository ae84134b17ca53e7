"""Records of a ShareFetch answer as a share consumer delivers them (KIP-932).

A share partition's answer carries record batches (whole, as the log has them) and
``AcquiredRecords``: ranges ``(first_offset, last_offset, delivery_count)`` of the offsets this
member now holds. Only records inside an acquired range are delivered, each with its range's
delivery count (1 the first time, one more on every redelivery); records outside are someone
else's (or already acknowledged) and are skipped. An acquired offset that yields no record
(compacted away, a control record, an aborted transaction's record the leader left in) is a
*gap*: acknowledged with GAP so the share partition does not hand it out again (Kafka's
``ShareCompletedFetch``).
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

from odradek.client.share_acknowledgements import Acknowledgements, AcknowledgeType
from odradek.records.reader import iter_batches

__all__ = ["ShareConsumerRecord", "acquired_records"]


class ShareConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()
    delivery_count: int = 1


def acquired_records(topic: str, partition: int, records, acquired) -> tuple[list[ShareConsumerRecord], Acknowledgements]:
    """The records of ``records`` (batch bytes) that ``acquired`` (objects with first_offset,
    last_offset, delivery_count) covers, in offset order, and the GAP acknowledgements of the
    acquired offsets without a record."""
    ranges = sorted((a.first_offset, a.last_offset, a.delivery_count) for a in acquired)
    gaps = Acknowledgements()
    if not ranges:
        return [], gaps
    starts = [r[0] for r in ranges]
    out: list[ShareConsumerRecord] = []
    seen: set[int] = set()
    if records:
        for batch in iter_batches(records):
            if batch.last_offset < ranges[0][0] or batch.base_offset > ranges[-1][1]:
                continue
            if getattr(batch, "is_control", False):
                continue
            for r in batch.records():
                count = _delivery_count(ranges, starts, r.offset)
                if count is None:
                    continue
                seen.add(r.offset)
                out.append(ShareConsumerRecord(topic, partition, r.offset, r.timestamp, r.key, r.value,
                                               tuple(r.headers), count))
    for first, last, _ in ranges:
        for offset in range(first, last + 1):
            if offset not in seen:
                gaps.add(offset, AcknowledgeType.GAP)
    return out, gaps


def _delivery_count(ranges, starts, offset: int) -> int | None:
    i = bisect.bisect_right(starts, offset) - 1
    if i < 0:
        return None
    first, last, count = ranges[i]
    return count if first <= offset <= last else None
