"""The records of producer state: one producer's entry, its cached batches, a completed transaction.

Pure data, shared by ``producer_state`` (the rules) and ``producer_snapshot`` (the file format).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.records.batch import NO_SEQUENCE

NUM_BATCHES_TO_RETAIN = 5
# Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH, used for "no coordinator epoch seen yet".
NO_COORDINATOR_EPOCH = -1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is remembered of one appended batch: its sequence and offset ranges."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """The state of one producer id in one partition.

    ``batches`` holds at most 5 batches, oldest first, all written with ``epoch``.
    ``last_offset``/``last_timestamp`` describe the newest batch or marker of this producer.
    ``current_txn_first_offset``: the first offset of its open transaction (None: none open).
    ``coordinator_epoch``: the coordinator epoch of the newest transaction marker seen (-1:
    none); a marker with an older one comes from a fenced (zombie) coordinator.
    """

    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...]
    last_offset: int
    last_timestamp: int
    current_txn_first_offset: int | None = None
    coordinator_epoch: int = NO_COORDINATOR_EPOCH

    @property
    def last_seq(self) -> int:
        """Last sequence appended in this epoch, NO_SEQUENCE (-1) when none is cached."""
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        """First sequence of the oldest cached batch, NO_SEQUENCE (-1) when none is cached."""
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker just ended (Kafka's ``CompletedTxn``): the producer's data from
    ``first_offset`` up to the marker at ``last_offset``. ``last_stable_offset`` is the
    partition's LSO once it completes, as far as the producer state knows (the first offset
    of another open transaction, else the marker's offset + 1): the fourth field of the
    aborted transaction index's entries (``storage/transaction_index.py``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int
