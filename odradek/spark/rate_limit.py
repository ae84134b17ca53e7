"""Admission control: how far each partition may advance in one micro-batch.

``maxOffsetsPerTrigger`` bounds the records of a micro-batch; the budget is shared by lag,
so a partition twice as far behind gets about twice the records. Unlike Spark's Kafka
source (which rounds small shares up and may exceed the limit by up to one record per
partition), the bound here is strict. While the budget allows, every lagging partition
first gets one record, so none starves; the rest is shared in proportion to what each has
left, rounded down, and the records left over go one each to the largest remainders (ties
to the partition furthest behind, then the first in order).

Example: lags a=100, b=300, limit 10: one each, then 8 shared as 1.99 and 6.01, rounded
down to 1 and 6; the leftover record goes to a (remainder .99): a advances 3, b 7.
"""

from __future__ import annotations

__all__ = ["allot"]


def allot(start: dict, latest: dict, limit: int) -> dict:
    """The end offsets of a micro-batch reading at most ``limit`` records from ``start``
    towards ``latest`` (both ``{partition: offset}``, same keys). Partitions not behind
    keep their start."""
    lags = {tp: latest[tp] - start[tp] for tp in latest if latest[tp] > start[tp]}
    end = {tp: latest[tp] if tp in lags else start[tp] for tp in latest}
    if sum(lags.values()) <= limit:
        return end
    order = sorted(lags, key=lambda tp: (-lags[tp], tp))
    grant: dict = {}
    budget = limit
    if limit >= len(lags):  # one each first, so that no lagging partition starves
        grant = {tp: 1 for tp in lags}
        budget -= len(lags)
        remaining = {tp: lags[tp] - 1 for tp in lags}
    else:
        remaining = dict(lags)
    remaining_total = sum(remaining.values())
    if budget and remaining_total:
        shares = {tp: budget * remaining[tp] / remaining_total for tp in order}
        floors = {tp: min(int(shares[tp]), remaining[tp]) for tp in order}
        left = budget - sum(floors.values())
        by_remainder = sorted(order, key=lambda tp: (-(shares[tp] - floors[tp]), -lags[tp], tp))
        for tp in by_remainder:
            if left <= 0:
                break
            if floors[tp] < remaining[tp]:
                floors[tp] += 1
                left -= 1
        for tp, n in floors.items():
            grant[tp] = grant.get(tp, 0) + n
    for tp, n in grant.items():
        end[tp] = start[tp] + n
    return end
