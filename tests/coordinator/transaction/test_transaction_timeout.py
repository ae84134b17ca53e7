"""``transaction.timeout.ms`` counts from a transaction's start, not from its last update
(Kafka's ``TransactionMetadata.txnStartTimestamp``; the coordinator's
``timedOutTransactions`` compares txnStartTimestamp + txnTimeoutMs with now): a producer
that keeps adding partitions more often than the timeout still has its transaction aborted
once start + timeout has passed. ``TransactionShard.timed_out`` on a clock the test moves,
then the abort as ``TransactionCoordinator.abort_timed_out_transactions`` makes it."""

from __future__ import annotations

import itertools

import pytest

from odradek.coordinator.transaction.transaction_metadata import TxnTransit
from odradek.coordinator.transaction.transaction_shard import TransactionShard
from odradek.coordinator.transaction.transaction_state import TransactionState as S
from odradek.protocol.generated.error_codes import ErrorCode as E

TID = "orders"
TIMEOUT = 1000
START = 10_000


class Producer:
    """One transactional producer of ``TID`` driving a shard; ``now`` is the clock. Each
    transit is completed at once, as the runtime does after its replicated write."""

    def __init__(self) -> None:
        self.shard = TransactionShard(0, coordinator_epoch=1)
        self.pids = itertools.count(2000)
        self.now = START
        self.written(self.shard.init_producer_id(TID, TIMEOUT, None, self.now, lambda: next(self.pids)))

    def txn(self):
        return self.shard.get(TID)

    def written(self, result):
        if isinstance(result, TxnTransit):
            self.txn().complete(result)
            return E.NONE
        return result

    def add(self, partition: int):
        t = self.txn()
        return self.written(self.shard.add_partitions(TID, t.producer_id, t.producer_epoch, [("t", partition)],
                                                       self.now))

    def abort_timed_out(self) -> list[str]:
        """What the coordinator's periodic check does: fence and abort each timed-out
        transaction, its markers written at once. Returns the ids aborted."""
        aborted = []
        for txn in self.shard.timed_out(self.now):
            txn.complete(txn.prepare_fence_and_abort(self.now))
            for tp in list(txn.partitions):
                txn.remove_partition(tp)
            txn.complete(txn.prepare_complete(self.now))
            aborted.append(txn.transactional_id)
        return aborted


@pytest.fixture
def producer():
    return Producer()


def test_adding_partitions_keeps_the_start_and_moves_the_last_update(producer):
    assert producer.add(0) == E.NONE
    producer.now += 400
    assert producer.add(1) == E.NONE
    t = producer.txn()
    assert (t.state, t.start_ms, t.last_update_ms) == (S.ONGOING, START, START + 400)


def test_a_transaction_adding_partitions_more_often_than_its_timeout_still_times_out(producer):
    producer.add(0)
    for partition in range(1, 4):  # an update every 300 ms: each well within the timeout
        producer.now += 300
        assert producer.shard.timed_out(producer.now) == []
        assert producer.add(partition) == E.NONE
    assert producer.txn().last_update_ms == START + 900
    # 1001 ms after the start, 101 ms after the last update.
    producer.now = START + TIMEOUT + 1
    assert producer.shard.timed_out(producer.now) == [producer.txn()]
    assert producer.abort_timed_out() == [TID]
    assert producer.txn().state == S.COMPLETE_ABORT


def test_the_timeout_boundary_is_start_plus_timeout_exclusive(producer):
    producer.add(0)
    producer.now = START + TIMEOUT - 1
    producer.add(1)
    producer.now = START + TIMEOUT
    assert producer.abort_timed_out() == []
    producer.now = START + TIMEOUT + 1
    epoch = producer.txn().producer_epoch
    assert producer.abort_timed_out() == [TID]
    t = producer.txn()
    assert (t.state, t.producer_epoch, t.partitions) == (S.COMPLETE_ABORT, epoch + 1, set())
    # The fenced producer's next add is refused; nothing is left to time out.
    assert producer.shard.add_partitions(TID, t.producer_id, epoch, [("t", 2)], producer.now) == E.PRODUCER_FENCED
    assert producer.shard.timed_out(producer.now + 10 * TIMEOUT) == []


def test_the_next_transaction_counts_from_its_own_start(producer):
    producer.add(0)
    producer.now += TIMEOUT + 1
    assert producer.abort_timed_out() == [TID]
    # The producer re-initialises and begins again later.
    producer.now += 5000
    producer.written(producer.shard.init_producer_id(TID, TIMEOUT, None, producer.now, lambda: next(producer.pids)))
    begun = producer.now
    producer.add(3)
    assert producer.txn().start_ms == begun
    producer.now = begun + TIMEOUT
    assert producer.shard.timed_out(producer.now) == []
    producer.now += 1
    assert producer.shard.timed_out(producer.now) == [producer.txn()]


def test_a_loaded_coordinator_times_out_from_the_logged_start(producer):
    producer.add(0)
    producer.now += 600
    producer.add(1)  # the log's latest record for the id: started at START, updated at +600
    loaded = TransactionShard(0, coordinator_epoch=2)
    loaded.replay(TID, producer.txn().current())
    assert loaded.get(TID).start_ms == START
    assert loaded.timed_out(START + TIMEOUT) == []
    assert [t.transactional_id for t in loaded.timed_out(START + TIMEOUT + 1)] == [TID]
