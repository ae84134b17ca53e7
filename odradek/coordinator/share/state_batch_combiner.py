"""Merging state batches (Kafka's PersisterStateBatchCombiner).

A share-partition's durable state is a set of non-overlapping inclusive offset runs, each with
one delivery state and delivery count. A write carries runs that changed; they are painted over
the stored runs (the newer run wins where they overlap), everything below the start offset is
cut away, and neighbouring runs with the same state and count are joined.

Worked example, start offset 10::

    stored   [5-19 AVAILABLE/1] [20-29 ACKNOWLEDGED/1]
    update   [15-24 ARCHIVED/5]
    result   [10-14 AVAILABLE/1] [15-24 ARCHIVED/5] [25-29 ACKNOWLEDGED/1]

Cost: O((n + m) log n) for n stored and m new runs; runs are bounded by
group.share.partition.max.record.locks in practice.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from odradek.coordinator.share.persister import PersisterStateBatch

__all__ = ["combine_state_batches"]


def combine_state_batches(stored: Iterable[PersisterStateBatch],
                          updates: Iterable[PersisterStateBatch],
                          start_offset: int) -> tuple[PersisterStateBatch, ...]:
    """Paint ``updates`` (in order, later wins) over ``stored``, trim below ``start_offset``.

    ``stored`` need not be sorted or disjoint: it is painted in order too. The result is sorted
    by first offset, disjoint, without runs below ``start_offset`` and with equal neighbours
    joined. Runs with ``last_offset < first_offset`` are ignored.
    """
    runs: list[PersisterStateBatch] = []
    for batch in stored:
        _paint(runs, batch)
    for batch in updates:
        _paint(runs, batch)
    return tuple(_join(_trim(runs, start_offset)))


def _paint(runs: list[PersisterStateBatch], batch: PersisterStateBatch) -> None:
    """Overlay ``batch`` on the sorted disjoint ``runs`` in place."""
    if batch.last_offset < batch.first_offset:
        return
    firsts = [r.first_offset for r in runs]
    # The first run that may overlap: the one before the insertion point can reach into batch.
    lo = bisect_left(firsts, batch.first_offset)
    if lo > 0 and runs[lo - 1].last_offset >= batch.first_offset:
        lo -= 1
    hi = lo
    while hi < len(runs) and runs[hi].first_offset <= batch.last_offset:
        hi += 1
    kept: list[PersisterStateBatch] = []
    if lo < hi:
        head, tail = runs[lo], runs[hi - 1]
        if head.first_offset < batch.first_offset:
            kept.append(_slice(head, head.first_offset, batch.first_offset - 1))
        kept.append(batch)
        if tail.last_offset > batch.last_offset:
            kept.append(_slice(tail, batch.last_offset + 1, tail.last_offset))
    else:
        kept.append(batch)
    runs[lo:hi] = kept


def _trim(runs: list[PersisterStateBatch], start_offset: int) -> list[PersisterStateBatch]:
    out = []
    for run in runs:
        if run.last_offset < start_offset:
            continue
        if run.first_offset < start_offset:
            run = _slice(run, start_offset, run.last_offset)
        out.append(run)
    return out


def _join(runs: list[PersisterStateBatch]) -> list[PersisterStateBatch]:
    out: list[PersisterStateBatch] = []
    for run in runs:
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset + 1 == run.first_offset
                and prev.delivery_state == run.delivery_state
                and prev.delivery_count == run.delivery_count):
            out[-1] = _slice(prev, prev.first_offset, run.last_offset)
        else:
            out.append(run)
    return out


def _slice(run: PersisterStateBatch, first: int, last: int) -> PersisterStateBatch:
    return PersisterStateBatch(first, last, run.delivery_state, run.delivery_count)
