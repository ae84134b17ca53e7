"""The transaction state machine without sockets: ``TransactionShard`` decisions and
``TransactionMetadata`` transitions, driven as the runtime drives them (prepare, then
complete once "written", or abort_pending when the write failed)."""

from __future__ import annotations

import itertools

import pytest

from odradek.coordinator.transaction.transaction_metadata import (
    MAX_EPOCH,
    IllegalTransition,
    TransactionMetadata,
    TxnTransit,
)
from odradek.coordinator.transaction.transaction_shard import TransactionShard
from odradek.coordinator.transaction.transaction_state import TransactionState as S
from odradek.protocol.generated.error_codes import ErrorCode as E

TID = "payments"
T1, T2 = ("t", 0), ("t", 1)


class Harness:
    def __init__(self) -> None:
        self.shard = TransactionShard(0, coordinator_epoch=3)
        self.pids = itertools.count(1000)
        self.now = 10_000

    def txn(self) -> TransactionMetadata:
        return self.shard.get(TID)

    def written(self, result):
        """Complete a transit as the runtime does after a replicated write."""
        if isinstance(result, TxnTransit):
            self.txn().complete(result)
            return E.NONE
        return result

    def init(self, expected=None, timeout=60_000):
        return self.written(self.shard.init_producer_id(TID, timeout, expected, self.now, lambda: next(self.pids)))

    def add(self, *tps, epoch=None):
        t = self.txn()
        return self.written(self.shard.add_partitions(TID, t.producer_id, t.producer_epoch if epoch is None else epoch,
                                                      tps, self.now))

    def end(self, commit, epoch=None, pid=None):
        t = self.txn()
        return self.written(self.shard.end_txn(TID, t.producer_id if pid is None else pid,
                                               t.producer_epoch if epoch is None else epoch, commit, self.now))

    def markers_written(self):
        t = self.txn()
        for tp in list(t.partitions):
            t.remove_partition(tp)
        t.complete(t.prepare_complete(self.now))


@pytest.fixture
def h():
    return Harness()


def test_a_new_id_gets_a_producer_id_at_epoch_0_then_each_init_bumps_the_epoch(h):
    assert h.init() == E.NONE
    assert (h.txn().producer_id, h.txn().producer_epoch, h.txn().state) == (1000, 0, S.EMPTY)
    assert h.init() == E.NONE
    assert (h.txn().producer_id, h.txn().producer_epoch) == (1000, 1)


def test_commit_goes_through_ongoing_prepare_commit_and_complete_commit(h):
    h.init()
    assert h.add(T1) == E.NONE
    assert h.txn().state == S.ONGOING and h.txn().start_ms == h.now
    h.now += 5
    assert h.add(T1, T2) == E.NONE
    assert h.txn().partitions == {T1, T2} and h.txn().start_ms == h.now - 5
    assert h.end(True) == E.NONE
    assert h.txn().state == S.PREPARE_COMMIT
    # until the markers are written, operations on the id are refused for a while
    assert h.end(True) == E.CONCURRENT_TRANSACTIONS
    assert h.end(False) == E.INVALID_TXN_STATE
    assert h.add(T1) == E.CONCURRENT_TRANSACTIONS
    assert h.init() == E.CONCURRENT_TRANSACTIONS
    h.markers_written()
    assert h.txn().state == S.COMPLETE_COMMIT and h.txn().partitions == set()
    # a retried EndTxn of the same result answers NONE; the other result is refused
    assert h.end(True) == E.NONE
    assert h.end(False) == E.INVALID_TXN_STATE
    # the next transaction starts from CompleteCommit
    assert h.add(T2) == E.NONE and h.txn().partitions == {T2}


def test_abort(h):
    h.init()
    h.add(T1)
    assert h.end(False) == E.NONE and h.txn().state == S.PREPARE_ABORT
    assert h.end(False) == E.CONCURRENT_TRANSACTIONS
    h.markers_written()
    assert h.txn().state == S.COMPLETE_ABORT
    assert h.end(False) == E.NONE and h.end(True) == E.INVALID_TXN_STATE


def test_end_without_a_transaction_is_invalid_txn_state(h):
    h.init()
    assert h.end(True) == E.INVALID_TXN_STATE


def test_wrong_producer_id_or_epoch(h):
    h.init()
    h.add(T1)
    assert h.end(True, pid=1) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.end(True, epoch=7) == E.PRODUCER_FENCED
    assert h.add(T2, epoch=7) == E.PRODUCER_FENCED
    assert h.shard.add_partitions("unknown", 1, 0, [T1], h.now) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.shard.end_txn("unknown", 1, 0, True, h.now) == E.INVALID_PRODUCER_ID_MAPPING


def test_init_fences_an_ongoing_transaction_by_aborting_it_with_a_bumped_epoch(h):
    h.init()
    h.add(T1)
    old_epoch = h.txn().producer_epoch
    result = h.shard.init_producer_id(TID, 60_000, None, h.now, lambda: next(h.pids))
    assert isinstance(result, TxnTransit) and result.state == S.PREPARE_ABORT
    assert result.producer_epoch == old_epoch + 1 and result.partitions == {T1}
    # the old producer is fenced at once, before the abort is even written
    assert h.shard.end_txn(TID, 1000, old_epoch, True, h.now) == E.PRODUCER_FENCED
    h.txn().complete(result)
    h.markers_written()
    assert h.txn().state == S.COMPLETE_ABORT
    assert h.init() == E.NONE  # the client's retry
    assert h.txn().producer_epoch == old_epoch + 2


def test_a_failed_fence_write_does_not_bump_twice(h):
    h.init()
    h.add(T1)
    first = h.shard.init_producer_id(TID, 60_000, None, h.now, lambda: next(h.pids))
    h.txn().abort_pending()  # the write failed
    second = h.shard.init_producer_id(TID, 60_000, None, h.now, lambda: next(h.pids))
    assert second.producer_epoch == first.producer_epoch


def test_kip_360_recovery_with_the_current_epoch_and_a_retried_init(h):
    h.init()
    pid, epoch = h.txn().producer_id, h.txn().producer_epoch
    assert h.init(expected=(pid, epoch)) == E.NONE
    assert h.txn().producer_epoch == epoch + 1 and h.txn().last_producer_epoch == epoch
    # the response was lost: the same request again gets the same epoch
    assert h.init(expected=(pid, epoch)) == E.NONE
    assert h.txn().producer_epoch == epoch + 1
    # an older epoch is fenced; an unknown producer id too
    assert h.init(expected=(pid, epoch - 1 if epoch else 77)) == E.PRODUCER_FENCED
    assert h.init(expected=(4242, 0)) == E.PRODUCER_FENCED


def test_an_exhausted_epoch_rotates_the_producer_id(h):
    h.init()
    h.txn().producer_epoch = MAX_EPOCH - 1
    assert h.init() == E.NONE
    t = h.txn()
    assert (t.producer_id, t.producer_epoch, t.previous_producer_id) == (1001, 0, 1000)


def test_pending_transitions_answer_concurrent_transactions(h):
    h.init()
    pending = h.shard.add_partitions(TID, 1000, 0, [T1], h.now)
    assert isinstance(pending, TxnTransit)
    assert h.shard.add_partitions(TID, 1000, 0, [T2], h.now) == E.CONCURRENT_TRANSACTIONS
    assert h.shard.end_txn(TID, 1000, 0, True, h.now) == E.CONCURRENT_TRANSACTIONS
    h.txn().abort_pending()
    assert h.txn().state == S.EMPTY and h.txn().partitions == set()


def test_adding_partitions_already_in_the_transaction_writes_nothing(h):
    h.init()
    h.add(T1, T2)
    assert h.shard.add_partitions(TID, 1000, 0, [T1], h.now) == E.NONE


def test_timed_out_and_expired(h):
    h.init(timeout=1000)
    h.add(T1)
    assert h.shard.timed_out(h.now + 1000) == []
    assert h.shard.timed_out(h.now + 1001) == [h.txn()]
    assert h.shard.expired(h.now + 10**9, 1000) == []  # Ongoing never expires
    h.end(False)
    h.markers_written()
    last = h.txn().last_update_ms
    assert h.shard.expired(last + 999, 1000) == []
    assert h.shard.expired(last + 1000, 1000) == [h.txn()]
    dead = h.txn().prepare_dead()
    assert dead.state == S.DEAD


def test_illegal_transitions_raise(h):
    h.init()
    with pytest.raises(IllegalTransition):
        h.txn().prepare_complete(h.now)  # Empty -> Complete*
    with pytest.raises(IllegalTransition):
        h.txn().prepare_end(True, h.now)  # Empty -> PrepareCommit
    t = h.txn().prepare_add_partitions({T1}, h.now)
    with pytest.raises(IllegalTransition):
        h.txn().prepare_add_partitions({T2}, h.now)  # already pending
    with pytest.raises(IllegalTransition):
        h.txn().complete(TxnTransit(1000, -1, 0, -1, 60_000, S.PREPARE_COMMIT, frozenset(), -1, h.now))
    h.txn().complete(t)


def test_replay_and_tombstone(h):
    h.init()
    h.add(T1)
    t = h.txn().current()
    fresh = TransactionShard(0, 4)
    fresh.replay(TID, t)
    assert fresh.get(TID).state == S.ONGOING and fresh.get(TID).partitions == {T1}
    fresh.replay(TID, None)
    assert fresh.get(TID) is None


def test_state_names_and_ids_are_kafkas():
    assert [(s.id, s.state_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert S.from_id(4) is S.COMPLETE_COMMIT and S.from_name("Ongoing") is S.ONGOING
    assert S.from_name("ongoing") is None
