"""The transactional producer's state machine against a scripted coordinator and leader
(``txn_fake_broker``): the requests it sends and in which order, retries, the abortable and
fatal errors, and the calls each state refuses."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import pytest

from odradek.client import (
    AsyncProducer,
    BrokerError,
    ConsumerGroupMetadata,
    Producer,
    TopicPartition,
    TransactionAbortedError,
    TransactionHandle,
    TransactionStateError,
    end_transaction,
    end_transaction_async,
)
from odradek.client.errors import KafkaTimeoutError
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from tests.client.helpers import run
from tests.client.txn_fake_broker import PRODUCER_ID, TxnFake


async def started(topics=None) -> TxnFake:
    return await TxnFake(topics or {"t": 2}).start()


@asynccontextmanager
async def fake_broker(topics=None, errors=None):
    """A started ``TxnFake`` with ``topics`` (default ``{"t": 2}``), answering the codes of
    ``errors`` (``{api key: [codes]}``) first; closed on the way out."""
    fake = await started(topics)
    for api_key, codes in (errors or {}).items():
        fake.errors[api_key].extend(codes)
    try:
        yield fake
    finally:
        await fake.close()


def producer(fake: TxnFake, **config) -> AsyncProducer:
    return AsyncProducer(fake.bootstrap, **{"transactional_id": "tid", "linger_ms": 1, "retry_backoff_ms": 10,
                                            **config})


@asynccontextmanager
async def in_transaction(fake: TxnFake, **config):
    """A transactional ``producer`` on ``fake``, initialized, with a transaction begun; closed
    on the way out (which aborts a transaction still open)."""
    async with producer(fake, **config) as p:
        await p.init_transactions()
        p.begin_transaction()
        yield p


def test_a_committed_transaction_adds_its_partitions_before_producing_and_ends_with_end_txn():
    async def main():
        async with fake_broker() as fake:
            async with producer(fake, transaction_timeout_ms=12_345) as p:
                assert p.transaction_state == "Uninitialized"
                await p.init_transactions()
                assert p.transaction_state == "Ready"
                p.begin_transaction()
                futures = [p.send("t", b"v", partition=i % 2) for i in range(10)]
                await p.commit_transaction()
                assert all(f.done() and f.result().offset >= 0 for f in futures)
                assert p.transaction_state == "Ready"
            find = fake.of(ApiKey.FIND_COORDINATOR)[0]
            assert find.key_type == 1 and (find.coordinator_keys or [find.key]) == ["tid"]
            init = fake.of(ApiKey.INIT_PRODUCER_ID)[0]
            assert (init.transactional_id, init.transaction_timeout_ms) == ("tid", 12_345)
            order = fake.api_order()
            assert order.index("ADD_PARTITIONS_TO_TXN") < order.index("PRODUCE") < order.index("END_TXN")
            adds = fake.of(ApiKey.ADD_PARTITIONS_TO_TXN)
            added = {(t.name, p) for a in adds for t in a.v3_and_below_topics for p in t.partitions}
            assert added == {("t", 0), ("t", 1)}
            assert all(a.v3_and_below_producer_id == PRODUCER_ID for a in adds)
            for tid, _, _, header in fake.produced:
                assert tid == "tid" and header.is_transactional
                assert (header.producer_id, header.producer_epoch) == (PRODUCER_ID, 0)
            end = fake.of(ApiKey.END_TXN)
            assert len(end) == 1 and end[0].committed and end[0].producer_id == PRODUCER_ID

    run(main())


def test_partitions_of_one_linger_go_in_one_add_partitions_request():
    async def main():
        async with fake_broker({"a": 3, "b": 1}) as fake:
            async with in_transaction(fake, linger_ms=50) as p:
                for i in range(3):
                    p.send("a", b"x", partition=i)
                await asyncio.sleep(0.02)
                p.send("b", b"y", partition=0)
                await p.commit_transaction()
            adds = fake.of(ApiKey.ADD_PARTITIONS_TO_TXN)
            assert len(adds) <= 2
            assert sum(len(t.partitions) for a in adds for t in a.v3_and_below_topics) == 4

    run(main())


def test_sequences_continue_across_transactions_and_a_new_transaction_adds_its_partitions_again():
    async def main():
        async with fake_broker({"t": 1}) as fake:
            async with producer(fake) as p:
                await p.init_transactions()
                for _ in range(3):
                    p.begin_transaction()
                    for _ in range(5):
                        p.send("t", b"v")
                    await p.commit_transaction()
            assert len(fake.of(ApiKey.ADD_PARTITIONS_TO_TXN)) == 3
            assert len(fake.of(ApiKey.END_TXN)) == 3
            sequences = [h.base_sequence for *_, h in fake.produced]
            assert sequences == sorted(sequences) and sequences[0] == 0
            assert sum(h.records_count for *_, h in fake.produced) == 15

    run(main())


def test_concurrent_transactions_and_a_moved_coordinator_are_retried():
    async def main():
        errors = {ApiKey.INIT_PRODUCER_ID: [ErrorCode.CONCURRENT_TRANSACTIONS] * 2,
                  ApiKey.ADD_PARTITIONS_TO_TXN: [ErrorCode.CONCURRENT_TRANSACTIONS] * 3,
                  ApiKey.END_TXN: [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]}
        async with fake_broker({"t": 1}, errors) as fake:
            async with in_transaction(fake) as p:
                future = p.send("t", b"v")
                await p.commit_transaction()
                assert (await future).offset == 0
            assert len(fake.of(ApiKey.INIT_PRODUCER_ID)) == 3
            assert len(fake.of(ApiKey.ADD_PARTITIONS_TO_TXN)) == 4
            assert len(fake.of(ApiKey.END_TXN)) == 3
            assert len(fake.of(ApiKey.FIND_COORDINATOR)) >= 2  # found again after NOT_COORDINATOR

    run(main())


def test_abort_fails_the_records_not_sent_yet_and_ends_with_abort():
    async def main():
        async with fake_broker({"t": 1}) as fake:
            fake.hold[ApiKey.ADD_PARTITIONS_TO_TXN] = hold = asyncio.Event()
            async with in_transaction(fake) as p:
                futures = [p.send("t", b"v") for _ in range(3)]
                await asyncio.sleep(0.05)  # the AddPartitionsToTxn is out, unanswered
                aborting = asyncio.ensure_future(p.abort_transaction())
                await asyncio.sleep(0.05)
                hold.set()
                await aborting
                for f in futures:
                    with pytest.raises(TransactionAbortedError):
                        await f
                assert p.transaction_state == "Ready"
                p.begin_transaction()  # the producer goes on
                await (p.send("t", b"after"))
                await p.commit_transaction()
            assert [e.committed for e in fake.of(ApiKey.END_TXN)] == [False, True]
            assert [h.records_count for *_, h in fake.produced] == [1]

    run(main())


def test_an_empty_transaction_sends_no_end_txn():
    async def main():
        async with fake_broker() as fake:
            async with in_transaction(fake) as p:
                await p.commit_transaction()
                p.begin_transaction()
                await p.abort_transaction()
            assert fake.of(ApiKey.END_TXN) == []

    run(main())


def test_calls_the_state_does_not_allow_raise_transaction_state_error():
    async def main():
        async with fake_broker() as fake:
            async with producer(fake) as p:
                with pytest.raises(TransactionStateError, match="init_transactions"):
                    p.send("t", b"v")
                with pytest.raises(TransactionStateError):
                    p.begin_transaction()
                await p.init_transactions()
                with pytest.raises(TransactionStateError, match="begin_transaction"):
                    p.send("t", b"v")
                with pytest.raises(TransactionStateError):
                    await p.commit_transaction()
                with pytest.raises(TransactionStateError):
                    await p.send_offsets_to_transaction({TopicPartition("t", 0): 1}, "g")
                p.begin_transaction()
                with pytest.raises(TransactionStateError):
                    p.begin_transaction()
            async with AsyncProducer(fake.bootstrap) as plain:
                with pytest.raises(TransactionStateError, match="transactional_id"):
                    await plain.init_transactions()
            with pytest.raises(ValueError):
                AsyncProducer(fake.bootstrap, transactional_id="x", enable_idempotence=False)

    run(main())


def test_a_fenced_producer_is_failed_for_good():
    async def main():
        async with fake_broker({"t": 1}, {ApiKey.END_TXN: [ErrorCode.PRODUCER_FENCED]}) as fake:
            async with in_transaction(fake) as p:
                await p.send("t", b"v")
                with pytest.raises(BrokerError) as raised:
                    await p.commit_transaction()
                assert raised.value.code == ErrorCode.PRODUCER_FENCED
                assert p.transaction_state == "FatalError"
                with pytest.raises(BrokerError):
                    p.begin_transaction()
                with pytest.raises(BrokerError):
                    await p.abort_transaction()

    run(main())


def test_a_failed_batch_makes_the_transaction_abortable_and_abort_bumps_the_epoch():
    async def main():
        async with fake_broker({"t": 1}, {ApiKey.PRODUCE: [ErrorCode.UNKNOWN_PRODUCER_ID]}) as fake:
            async with in_transaction(fake) as p:
                future = p.send("t", b"v")
                with pytest.raises(BrokerError):
                    await p.commit_transaction()
                assert future.done() and future.exception() is not None
                assert p.transaction_state == "AbortableError"
                with pytest.raises(TransactionStateError):
                    p.send("t", b"v")
                await p.abort_transaction()
                assert p.transaction_state == "Ready"
                p.begin_transaction()
                await p.send("t", b"again")
                await p.commit_transaction()
            inits = fake.of(ApiKey.INIT_PRODUCER_ID)
            assert len(inits) == 2 and (inits[1].producer_id, inits[1].producer_epoch) == (PRODUCER_ID, 0)
            last = fake.produced[-1][3]
            assert (last.producer_epoch, last.base_sequence) == (1, 0)

    run(main())


def test_send_offsets_adds_the_group_then_commits_its_offsets_at_the_group_coordinator():
    async def main():
        async with fake_broker({"t": 1}) as fake:
            async with in_transaction(fake) as p:
                group = ConsumerGroupMetadata("g", 5, "member-1", None)
                await p.send_offsets_to_transaction({TopicPartition("in", 0): 42, ("in", 1): 7}, group)
                await p.commit_transaction()
                p.begin_transaction()
                await p.send_offsets_to_transaction({TopicPartition("in", 0): 43}, "g2")
                await p.abort_transaction()
            assert [a.group_id for a in fake.of(ApiKey.ADD_OFFSETS_TO_TXN)] == ["g", "g2"]
            commit = fake.of(ApiKey.TXN_OFFSET_COMMIT)[0]
            assert (commit.group_id, commit.generation_id, commit.member_id) == ("g", 5, "member-1")
            assert {(t.name, p.partition_index, p.committed_offset) for t in commit.topics for p in t.partitions} \
                == {("in", 0, 42), ("in", 1, 7)}
            assert fake.of(ApiKey.TXN_OFFSET_COMMIT)[1].generation_id == -1
            order = fake.api_order()
            assert order.index("ADD_OFFSETS_TO_TXN") < order.index("TXN_OFFSET_COMMIT") < order.index("END_TXN")
            # offsets alone start a transaction: both ended
            assert [e.committed for e in fake.of(ApiKey.END_TXN)] == [True, False]

    run(main())


def test_a_prepared_transaction_is_ended_by_its_handle_from_elsewhere():
    async def main():
        async with fake_broker({"t": 1}) as fake:
            async with in_transaction(fake) as p:
                future = p.send("t", b"v")
                handle = await p.prepare_transaction()
                assert future.done()
                assert handle == TransactionHandle("tid", PRODUCER_ID, 0)
                assert p.transaction_state == "PreparedTransaction"
                with pytest.raises(TransactionStateError):
                    p.send("t", b"v")
            assert fake.of(ApiKey.END_TXN) == []
            await end_transaction_async(fake.bootstrap, handle, True, request_timeout_ms=5000, linger_ms=3)
            end = fake.of(ApiKey.END_TXN)
            assert len(end) == 1 and end[0].committed and end[0].transactional_id == "tid"
            await end_transaction_async(fake.bootstrap, TransactionHandle("tid", -1, -1), True)
            assert len(fake.of(ApiKey.END_TXN)) == 1  # nothing written: nothing to end

    run(main())


def test_the_sync_producer_mirrors_the_transactional_calls():
    loop = asyncio.new_event_loop()
    fake = loop.run_until_complete(started({"t": 1}))
    import threading

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with Producer(fake.bootstrap, transactional_id="tid", linger_ms=1) as p:
            p.init_transactions()
            with pytest.raises(TransactionStateError):
                p.send("t", b"v")
            p.begin_transaction()
            futures = [p.send("t", b"v%d" % i) for i in range(5)]
            p.send_offsets_to_transaction({TopicPartition("in", 0): 3}, "g")
            p.commit_transaction()
            assert [f.result(5).offset for f in futures] == [0, 1, 2, 3, 4]
            p.begin_transaction()
            p.send("t", b"w")
            handle = p.prepare_transaction()
            assert p.transaction_state == "PreparedTransaction"
        end_transaction(fake.bootstrap, handle, False)
        assert [e.committed for e in fake.of(ApiKey.END_TXN)] == [True, False]
    finally:
        asyncio.run_coroutine_threadsafe(fake.close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def test_a_partition_the_coordinator_refuses_fails_its_records_and_the_transaction():
    async def main():
        refused = {ApiKey.ADD_PARTITIONS_TO_TXN: [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}
        async with fake_broker({"t": 1}, refused) as fake:
            async with in_transaction(fake) as p:
                future = p.send("t", b"v")
                with pytest.raises(BrokerError) as raised:
                    await p.commit_transaction()
                assert raised.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
                with pytest.raises(BrokerError):
                    await future
                assert p.transaction_state == "AbortableError"
                await p.abort_transaction()  # nothing reached the coordinator: no EndTxn
                assert p.transaction_state == "Ready"
            assert fake.produced == [] and fake.of(ApiKey.END_TXN) == []

    run(main())


@pytest.mark.parametrize("code", [ErrorCode.PRODUCER_FENCED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED])
def test_init_transactions_fenced_or_refused_is_fatal(code):
    async def main():
        async with fake_broker({"t": 1}, {ApiKey.INIT_PRODUCER_ID: [code]}) as fake:
            async with producer(fake) as p:
                with pytest.raises(BrokerError) as raised:
                    await p.init_transactions()
                assert raised.value.code == code and p.transaction_state == "FatalError"
                with pytest.raises(BrokerError):
                    await p.init_transactions()

    run(main())


def test_closing_aborts_an_open_transaction_but_not_a_prepared_one():
    async def main():
        async with fake_broker({"t": 1}) as fake:
            async with in_transaction(fake) as p:
                future = p.send("t", b"v")
                await future
            assert [e.committed for e in fake.of(ApiKey.END_TXN)] == [False]  # as Java's close
            async with in_transaction(fake) as p:
                await p.send("t", b"w")
                await p.prepare_transaction()
            assert len(fake.of(ApiKey.END_TXN)) == 1  # left for whoever holds the handle

    run(main())


def test_a_timed_out_commit_resumes_when_called_again():
    async def main():
        async with fake_broker({"t": 1}) as fake:
            fake.hold[ApiKey.END_TXN] = hold = asyncio.Event()
            async with in_transaction(fake, request_timeout_ms=60_000) as p:
                p.send("t", b"v")
                with pytest.raises(KafkaTimeoutError):
                    await p.commit_transaction(timeout=0.2)
                assert p.transaction_state == "CommittingTransaction"
                with pytest.raises(TransactionStateError):
                    p.begin_transaction()
                hold.set()
                await p.commit_transaction()
                assert p.transaction_state == "Ready"
            assert [e.committed for e in fake.of(ApiKey.END_TXN)] == [True, True]  # the same EndTxn again

    run(main())
