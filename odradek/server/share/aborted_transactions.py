"""Which fetched offsets belong to aborted transactions (read_committed share fetches).

A share partition in a group with share.isolation.level=read_committed delivers no record of
an aborted transaction: it archives those offsets instead (Kafka's
SharePartition.filterAbortedTransactionalAcquiredRecords). The fetch path gives the aborted
transactions overlapping the range read as ``(producer_id, first_offset)`` pairs
(``odradek/replication/transactions.aborted_transactions``, the ``AbortedTransaction`` entries
of a Fetch response); with the batch headers that is enough, the way a read_committed
consumer decides (Kafka's CompletedFetch): walking the batches in offset order, a producer's
aborted transaction becomes open at the first batch whose last offset reaches its first
offset; a transactional data batch of a producer with an open aborted transaction is aborted;
that producer's next control batch (its abort marker) closes it. Control batches themselves
are not archived here: they stay in the acquired ranges and the consumer acknowledges their
offsets as gaps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from odradek.server.share.share_types import FetchedBatch

__all__ = ["aborted_offset_runs"]


def aborted_offset_runs(batches: Sequence[FetchedBatch],
                        aborted: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive ``(first, last)`` runs of the aborted data batches among ``batches``."""
    waiting = sorted(((first, pid) for pid, first in aborted), reverse=True)
    open_pids: set[int] = set()
    runs: list[tuple[int, int]] = []
    for batch in batches:
        while waiting and waiting[-1][0] <= batch.last_offset:
            open_pids.add(waiting.pop()[1])
        if batch.is_control:
            open_pids.discard(batch.producer_id)
        elif batch.is_transactional and batch.producer_id in open_pids:
            if runs and runs[-1][1] + 1 == batch.base_offset:
                runs[-1] = (runs[-1][0], batch.last_offset)
            else:
                runs.append((batch.base_offset, batch.last_offset))
    return runs
