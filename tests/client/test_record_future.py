"""RecordFuture: a (batch result, index) pair that behaves as an asyncio future."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from odradek.client.errors import KafkaTimeoutError
from odradek.client.produce_request_result import RecordMetadata
from odradek.client.producer_batch import ProducerBatch
from odradek.client.record_future import RecordFuture

TS = 1_700_000_000_000


def batch_of(n: int, partition: int = 0) -> tuple[ProducerBatch, list[RecordFuture]]:
    batch = ProducerBatch("t", partition, 0.0, 1 << 20, asyncio.get_running_loop())
    return batch, [batch.try_append(TS + i, None, b"v", None) for i in range(n)]


def run(coroutine):
    return asyncio.run(coroutine)


def test_await_result_and_exception():
    async def main():
        batch, futures = batch_of(3, partition=2)
        f = futures[1]
        assert asyncio.isfuture(f) and f.get_loop() is asyncio.get_running_loop()
        assert not f.done() and not f.cancelled()
        with pytest.raises(asyncio.InvalidStateError):
            f.result()
        with pytest.raises(asyncio.InvalidStateError):
            f.exception()
        asyncio.get_running_loop().call_later(0.01, batch.complete, 40)
        assert await f == RecordMetadata("t", 2, 41, TS + 1)
        assert f.done() and f.exception() is None
        assert await futures[2] == RecordMetadata("t", 2, 42, TS + 2)  # done: no suspension
        assert "result=RecordMetadata" in repr(f)

    run(main())


def test_failure_reaches_every_record():
    async def main():
        batch, futures = batch_of(2)
        error = KafkaTimeoutError("expired")
        asyncio.get_running_loop().call_soon(batch.fail, error)
        with pytest.raises(KafkaTimeoutError):
            await futures[0]
        assert futures[1].exception() is error
        with pytest.raises(KafkaTimeoutError):
            futures[1].result()

    run(main())


def test_done_callbacks_get_the_same_future_in_their_context():
    async def main():
        batch, futures = batch_of(2)
        var = contextvars.ContextVar("var", default="unset")
        seen = []
        ctx = contextvars.copy_context()
        ctx.run(var.set, "mine")
        futures[0].add_done_callback(lambda f: seen.append((f, var.get())), context=ctx)
        futures[1].add_done_callback(seen.append)
        futures[1].add_done_callback(print)
        assert futures[1].remove_done_callback(print) == 1
        batch.complete(0)
        assert seen == []  # scheduled on the loop, not called inline
        await asyncio.sleep(0)
        assert seen == [(futures[0], "mine"), futures[1]]
        later = []
        futures[0].add_done_callback(later.append)  # already done: scheduled at once
        await asyncio.sleep(0)
        assert later == [futures[0]]

    run(main())


def test_gather_wait_as_completed_shield_and_wait_for():
    async def main():
        batch, futures = batch_of(4)
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, batch.complete, 10)
        assert [m.offset for m in await asyncio.gather(*futures)] == [10, 11, 12, 13]
        other, more = batch_of(2)
        loop.call_later(0.01, other.complete, 0)
        done, pending = await asyncio.wait(more, timeout=5)
        assert done == set(more) and not pending
        third, rest = batch_of(2)
        loop.call_later(0.01, third.complete, 0)
        assert sorted([(await f).offset for f in asyncio.as_completed(rest)]) == [0, 1]
        fourth, last = batch_of(1)
        loop.call_later(0.01, fourth.complete, 7)
        assert (await asyncio.shield(last[0])).offset == 7
        assert (await asyncio.wait_for(last[0], 5)).offset == 7

    run(main())


def test_gather_raises_the_batch_error():
    async def main():
        batch, futures = batch_of(2)
        asyncio.get_running_loop().call_soon(batch.fail, KafkaTimeoutError("x"))
        with pytest.raises(KafkaTimeoutError):
            await asyncio.gather(*futures)
        results = await asyncio.gather(*futures, return_exceptions=True)
        assert all(isinstance(r, KafkaTimeoutError) for r in results)

    run(main())


def test_cancel_cancels_the_future_not_the_record():
    async def main():
        batch, futures = batch_of(3)
        delivered = []
        batch.add_callback(lambda md, exc: delivered.append(md))  # the last record's
        seen = []
        futures[2].add_done_callback(seen.append)
        assert futures[2].cancel("stop")
        assert futures[2].cancelled() and futures[2].done() and not futures[1].done()
        assert not futures[2].cancel()
        with pytest.raises(asyncio.CancelledError, match="stop"):
            futures[2].result()
        with pytest.raises(asyncio.CancelledError):
            await futures[2]
        await asyncio.sleep(0)
        assert seen == [futures[2]]  # its callbacks ran on cancel
        batch.complete(0)
        assert futures[2].cancelled() and futures[1].result().offset == 1
        assert delivered == [RecordMetadata("t", 0, 2, TS + 2)]  # the record was still sent
        assert not futures[0].cancel()  # done: cannot be cancelled
        with pytest.raises(asyncio.CancelledError):
            await asyncio.gather(futures[2])

    run(main())


def test_wait_for_timeout_and_task_cancellation_cancel_the_future():
    async def main():
        batch, futures = batch_of(2)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(futures[0], 0.01)
        assert futures[0].cancelled()
        waiting = asyncio.create_task(_await(futures[1]))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert futures[1].cancelled()
        batch.complete(0)
        assert futures[0].cancelled() and futures[1].cancelled()

    run(main())


async def _await(future):
    return await future


def test_identity_equality_and_standalone_results():
    async def main():
        batch, futures = batch_of(2)
        twin = RecordFuture((futures[0][0], 0))
        assert twin != futures[0] and len({twin, futures[0]}) == 2
        held = RecordFuture.standalone("t", TS, asyncio.get_running_loop())
        batch.add_forward(held[0])  # the batch settles the held record with the last one's outcome
        batch.complete(5, 99)
        assert await held == RecordMetadata("t", 0, 6, 99)
        failed = RecordFuture.standalone("t", TS, asyncio.get_running_loop())
        failed[0].fail(ValueError("bad"))
        with pytest.raises(ValueError):
            await failed

    run(main())


def test_run_until_complete_accepts_it():
    loop = asyncio.new_event_loop()
    try:
        batch = ProducerBatch("t", 0, 0.0, 1 << 20, loop)
        future = batch.try_append(TS, None, b"v", None)
        loop.call_soon(batch.complete, 3)
        assert loop.run_until_complete(future).offset == 3
    finally:
        loop.close()
