"""Producer ids for InitProducerId, reserved durably a block at a time so none is ever reused.

A producer id must not be handed out twice, not even across broker restarts: partitions keep
producer state (and snapshot it), so a reused id would inherit another producer's epoch and
sequence numbers and have its first batches refused or dropped as duplicates.

The manager hands out ids from a block ``[start, start + block_size)``. Before the first id of
a block leaves, it calls ``persist(start + block_size)``, the first id of the next block; the
callback must record that value durably before it returns (the broker backs it with a file or
the metadata store). After a restart the manager is built with the last recorded value, which
lies past every id handed out before. A crash wastes at most the unused rest of one block;
ids are non-negative int64 values, so waste costs nothing in practice. Kafka reserves blocks
of 1000 ids the same way (a ZooKeeper node holding the latest block).

With several brokers the recorded value is shared, so the callback must also make sure no
other broker reserved the same block (a versioned set in the metadata store); that is the
callback's business, not this class's.

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

    ``next_block_start`` is the value ``persist`` last recorded (0 on a fresh cluster).
    ``persist`` is called with the start of the following block each time a block is taken;
    if it raises, nothing is handed out and the next call tries again.
    """

    def __init__(
        self,
        next_block_start: int,
        persist: Callable[[int], None],
        block_size: int = DEFAULT_BLOCK_SIZE,
    ) -> None:
        if not 0 <= next_block_start <= MAX_PRODUCER_ID + 1:
            raise ValueError(f"invalid producer id block start {next_block_start}")
        if block_size < 1:
            raise ValueError(f"producer id block size must be positive, got {block_size}")
        self._persist = persist
        self._block_size = block_size
        self._next_block_start = next_block_start
        # The current block is [_next_id, _block_end); empty until the first id is asked for,
        # so building a manager writes nothing.
        self._next_id = next_block_start
        self._block_end = next_block_start

    @property
    def next_block_start(self) -> int:
        """The value last recorded through ``persist`` (or given to the constructor)."""
        return self._next_block_start

    def next_producer_id(self) -> int:
        """A producer id never handed out before, by this manager or an earlier incarnation."""
        if self._next_id >= self._block_end:
            self._reserve_block()
        producer_id = self._next_id
        self._next_id += 1
        return producer_id

    def init_producer_id(self) -> ProducerIdAndEpoch:
        """InitProducerId for an idempotent producer without a transactional id."""
        return ProducerIdAndEpoch(self.next_producer_id(), 0)

    def _reserve_block(self) -> None:
        start = self._next_block_start
        end = start + self._block_size
        if end - 1 > MAX_PRODUCER_ID:
            raise ProducerIdsExhaustedError(
                f"no block of {self._block_size} producer ids left after {start}"
            )
        self._persist(end)  # durably recorded before any id of the block is used
        self._next_block_start = end
        self._next_id, self._block_end = start, end
