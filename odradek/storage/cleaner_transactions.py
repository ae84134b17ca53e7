"""Which batches the log cleaner treats as aborted transactional data (Kafka's
``CleanedTransactionMetadata``, without marker removal).

The cleaner walks batches in offset order. The aborted transactions overlapping the cleaned
range come from the ``.txnindex`` files (``transaction_index.collect_aborted``), sorted by
first offset. A transaction becomes *ongoing aborted* once the walk reaches its first offset
and stays so until its producer's next marker: every transactional data batch of that
producer in between is aborted data, which the cleaner drops (and leaves out of its offset
map, so an aborted record never shadows a committed one of the same key). Markers themselves
are kept: consumers ignore a marker whose transaction left no data.

The cleaner never reaches an undecided transaction: it cleans only below the LSO
(``Log.cleanable_limit``).
"""

from __future__ import annotations

from collections import deque

from odradek.records.batch import BatchHeader
from odradek.storage.transaction_index import AbortedTxn


class AbortedBatches:
    """Answers, batch by batch in offset order, whether a batch is aborted data."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda t: t.first_offset))
        self._ongoing: set[int] = set()

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            self._ongoing.add(pending.popleft().producer_id)

    def is_aborted(self, header: BatchHeader) -> bool:
        """Whether ``header``'s batch, the next one of the walk, is aborted data. A marker
        (control batch) ends its producer's transaction and is never aborted data."""
        self._reach(header.last_offset)
        if header.is_control:
            self._ongoing.discard(header.producer_id)
            return False
        return header.is_transactional and header.producer_id in self._ongoing
