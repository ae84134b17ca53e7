"""``TransactionVerification``'s answers without a broker: what a partition leader hears for
a batch, and when it is told to wait (an add being written or deferred, a transaction being
ended). The wire and the waits with a real broker: tests/server/test_txn_verification.py."""

from __future__ import annotations

import asyncio

import pytest

from odradek.coordinator.coordinator_runtime import CoordinatorError
from odradek.coordinator.transaction.transaction_metadata import TransactionMetadata
from odradek.coordinator.transaction.transaction_state import TransactionState as S
from odradek.coordinator.transaction.transaction_verification import TransactionVerification, settled
from odradek.protocol.generated.error_codes import ErrorCode as E

TP = ("t", 0)


class Coordinator(TransactionVerification):
    """The coordinator's state the mixin reads, and nothing else."""

    def __init__(self, txn: TransactionMetadata | None, error: E | None = None) -> None:
        self.txn, self.error = txn, error
        self._in_flight, self._completing, self._deferred = {}, {}, {}

    def _slot_for(self, transactional_id):
        if self.error is not None:
            raise CoordinatorError(self.error)
        return type("Slot", (), {"shard": type("Shard", (), {"get": lambda _, tid: self.txn})()})()

    def _settling(self, transactional_id):
        return self._completing.get(transactional_id)

    def _settle_deadline(self) -> float:
        return asyncio.get_running_loop().time() + 0.2


def txn(state=S.ONGOING, partitions=(TP,), pid=7, epoch=3) -> TransactionMetadata:
    return TransactionMetadata("tid", pid, epoch, state=state, partitions=set(partitions))


@pytest.mark.parametrize("metadata,pid,epoch,expected", [
    (txn(), 7, 3, E.NONE),
    (txn(partitions=()), 7, 3, E.TRANSACTION_ABORTABLE),
    (txn(state=S.COMPLETE_COMMIT, partitions=()), 7, 3, E.TRANSACTION_ABORTABLE),
    (txn(), 8, 3, E.INVALID_PRODUCER_ID_MAPPING),
    (None, 7, 3, E.INVALID_PRODUCER_ID_MAPPING),
    (txn(), 7, 2, E.PRODUCER_FENCED),
    (txn(state=S.PREPARE_COMMIT), 7, 3, E.CONCURRENT_TRANSACTIONS),
])
def test_answers_at_once(metadata, pid, epoch, expected):
    assert Coordinator(metadata).verify("tid", pid, epoch, TP) == expected


def test_the_coordinators_own_errors():
    assert Coordinator(txn(), E.NOT_COORDINATOR).verify("tid", 7, 3, TP) == E.NOT_COORDINATOR
    assert Coordinator(txn(), E.COORDINATOR_LOAD_IN_PROGRESS).verify("tid", 7, 3, TP) == E.COORDINATOR_LOAD_IN_PROGRESS


def test_waits_for_a_deferred_add_naming_the_partition_then_answers():
    async def run():
        metadata = txn(state=S.COMPLETE_COMMIT, partitions=())
        c = Coordinator(metadata)
        deferred = asyncio.get_running_loop().create_future()
        c._deferred["tid"] = (frozenset({TP}), deferred)
        answer = c.verify("tid", 7, 3, TP)
        assert not isinstance(answer, E)
        task = asyncio.ensure_future(answer)
        await asyncio.sleep(0.01)
        assert not task.done()
        metadata.state, metadata.partitions = S.ONGOING, {TP}  # the add was written
        del c._deferred["tid"]
        deferred.set_result(None)
        return await task
    assert asyncio.run(run()) == E.NONE


def test_a_transaction_being_ended_is_waited_for_only_so_long():
    async def run():
        c = Coordinator(txn(state=S.PREPARE_COMMIT))
        c._completing["tid"] = asyncio.get_running_loop().create_future()  # never done
        assert c.ending("tid") is c._completing["tid"]
        return await c.verify("tid", 7, 3, TP)
    assert asyncio.run(run()) == E.CONCURRENT_TRANSACTIONS


def test_ending_only_while_prepared_or_completing():
    c = Coordinator(txn())
    assert c.ending("tid") is None
    loop = asyncio.new_event_loop()
    try:
        done = loop.create_future()
        c._in_flight["tid"] = (type("Transit", (), {"state": S.PREPARE_ABORT, "partitions": frozenset()})(), done)
        assert c.ending("tid") is done
        c._in_flight["tid"] = (type("Transit", (), {"state": S.ONGOING, "partitions": frozenset()})(), done)
        assert c.ending("tid") is None
    finally:
        loop.close()


def test_settled_reports_whether_the_future_finished_in_time():
    async def run():
        loop = asyncio.get_running_loop()
        done, never = loop.create_future(), loop.create_future()
        loop.call_later(0.01, done.set_result, None)
        return await settled(done, loop.time() + 1), await settled(never, loop.time() + 0.02)
    assert asyncio.run(run()) == (True, False)
