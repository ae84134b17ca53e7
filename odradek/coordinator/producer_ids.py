"""Producer ids for InitProducerId, reserved durably a block at a time so none is ever reused.

A producer id must not be handed out twice, not even across broker restarts: partitions keep
producer state (and snapshot it), so a reused id would inherit another producer's epoch and
sequence numbers and have its first batches refused or dropped as duplicates.

The manager hands out ids from a block ``[start, start + block_size)``. Before the first id of
a block leaves, it calls ``reserve(block_size)``, which must durably record that the block is
taken and return its start: the first id past every block recorded before (the broker reads
and writes the ``/latest_producer_id_block`` znode with a compare-and-set, so two brokers
sharing the metadata store never take the same block; ``server.metadata_setup``). After a
restart the next reservation lies past every id handed out before. A crash wastes at most
the unused rest of one block; ids are non-negative int64 values, so waste costs nothing in
practice. Kafka reserves blocks of 1000 ids the same way.

InitProducerId without a transactional id always gets a fresh id with epoch 0 (Kafka ignores
the producer id and epoch such a request carries). Epochs of transactional ids come later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

DEFAULT_BLOCK_SIZE = 1000
# Producer ids are int64 and -1 means "none", so the last usable id is 2**63 - 1.
MAX_PRODUCER_ID = (1 << 63) - 1


class ProducerIdsExhaustedError(Exception):
    """No block of producer ids is left below the int64 limit."""


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    """The answer to InitProducerId."""

    producer_id: int
    producer_epoch: int


class ProducerIdManager:
    """Hands out unique producer ids from durably reserved blocks; not thread-safe.

    ``reserve(block_size)`` records a new block and returns its start (raising
    ProducerIdsExhaustedError when no block is left below ``MAX_PRODUCER_ID``); if it raises,
    nothing is handed out and the next call tries again.
    """

    def __init__(self, reserve: Callable[[int], int], block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError(f"producer id block size must be positive, got {block_size}")
        self._reserve = reserve
        self._block_size = block_size
        # The current block is [_next_id, _block_end); empty until the first id is asked for,
        # so building a manager writes nothing.
        self._next_id = self._block_end = 0

    def next_producer_id(self) -> int:
        """A producer id never handed out before, by this manager, an earlier incarnation or
        another broker sharing the store."""
        if self._next_id >= self._block_end:
            start = self._reserve(self._block_size)  # durably recorded before any id is used
            if not 0 <= start <= MAX_PRODUCER_ID - self._block_size + 1:
                raise ProducerIdsExhaustedError(f"no block of {self._block_size} producer ids at {start}")
            self._next_id, self._block_end = start, start + self._block_size
        producer_id = self._next_id
        self._next_id += 1
        return producer_id

    def init_producer_id(self) -> ProducerIdAndEpoch:
        """InitProducerId for an idempotent producer without a transactional id."""
        return ProducerIdAndEpoch(self.next_producer_id(), 0)


def next_block_start(block_end: int | None, block_size: int) -> int:
    """The start of the block after one ending at ``block_end`` (inclusive; None: no block
    yet); raises ProducerIdsExhaustedError when it would pass ``MAX_PRODUCER_ID``."""
    start = 0 if block_end is None else block_end + 1
    if start + block_size - 1 > MAX_PRODUCER_ID:
        raise ProducerIdsExhaustedError(f"no block of {block_size} producer ids left after {start}")
    return start
