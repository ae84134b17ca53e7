"""What the log cleaner does with transactions (Kafka's ``CleanedTransactionMetadata``):
which batches are aborted data, which transaction markers may go, and which aborted
transaction index entries the cleaned segments keep.

The cleaner walks the batches of its range in offset order, from the start of the log,
carrying one ``CleanedTransactions`` across the segment groups of a pass. The aborted
transactions overlapping the range come from the ``.txnindex`` files
(``transaction_index.collect_aborted``), sorted by first offset.

- **Aborted data**: a transaction becomes *ongoing aborted* once the walk reaches its first
  offset and stays so until its producer's next marker: every transactional data batch of
  that producer in between is aborted data, which the cleaner drops (and leaves out of its
  offset map, so an aborted record never shadows a committed one of the same key). Any other
  transactional data batch belongs to a committed transaction.
- **Markers** (``on_marker``): a COMMIT or ABORT marker is *removable* once no batch of its
  transaction remains before it in the log: the walk met no data batch of its producer since
  that producer's previous marker. Batches met count whatever the pass then does with them
  (dropped, emptied, kept), as in Kafka: so a marker is removable at the earliest in the
  pass after its transaction's last batch went, and never while its producer's last data
  batch (kept, maybe empty, for the producer's sequence) belongs to its transaction. The
  decision rests on the source segments only, so it holds even when the swap of an earlier
  group of the same pass is refused. What the cleaner then does with a removable marker
  (the ``delete.retention.ms`` delay, the producer's last marker) is in ``cleaner``'s
  ``clean_marker``.
- **The aborted transaction index**: an aborted transaction keeps its entry only while data
  of it was met (its marker then is not removable); the entry goes to the cleaned segment
  holding the marker (``take_index_entries`` after each group), in marker order. An aborted
  transaction whose data is gone needs no entry: read_committed consumers use entries only
  to skip data.

A control batch that holds no end-transaction marker is not passed to ``on_marker``: it
changes no transaction and is kept. The cleaner never reaches an undecided transaction: it
cleans only below the LSO (``Log.cleanable_limit``).
"""

from __future__ import annotations

from collections import deque

from odradek.records.batch import BatchHeader
from odradek.storage.transaction_index import AbortedTxn


class CleanedTransactions:
    """The transaction state of one cleaner walk, batch by batch in offset order."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda t: t.first_offset))
        self._aborted: dict[int, AbortedTxn] = {}  # producer id -> its ongoing aborted txn
        self._met_data: set[int] = set()  # producers whose current txn had a batch met
        self._entries: list[AbortedTxn] = []

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            txn = pending.popleft()
            self._aborted.setdefault(txn.producer_id, txn)

    def is_aborted(self, header: BatchHeader) -> bool:
        """Whether ``header``'s batch, the next one of the walk, is aborted data. A control
        batch is taken as a marker (``on_marker``) and is never aborted data."""
        if header.is_control:
            self.on_marker(header)
            return False
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        self._met_data.add(header.producer_id)
        return header.producer_id in self._aborted

    def on_marker(self, header: BatchHeader) -> bool:
        """The marker batch ``header``, the next one of the walk, ends its producer's
        transaction; whether it is removable (no batch of that transaction was met)."""
        self._reach(header.last_offset)
        producer_id = header.producer_id
        met = producer_id in self._met_data
        self._met_data.discard(producer_id)
        txn = self._aborted.pop(producer_id, None)
        if txn is not None and met:
            self._entries.append(txn)
        return not met

    def take_index_entries(self) -> list[AbortedTxn]:
        """The entries to keep for the markers met since the last call, in marker order."""
        entries, self._entries = self._entries, []
        return entries


AbortedBatches = CleanedTransactions  # the name before markers were cleaned
