"""An idempotent producer that must take a new identity (epoch or id) never writes a record twice.

The failure seen in a partition test: the leader of partition 0 acknowledged batches it
never replicated, then lost its leadership and truncated them; the new leader, missing
them, refused the producer's next batch with OUT_OF_ORDER_SEQUENCE_NUMBER. The producer then
took a new producer id, and a batch of partition 1 whose answer was still to come (appended
there, answered REQUEST_TIMED_OUT) was sent again under the new id with sequence 0: the
broker could not know it for a retry, and appended it a second time.

The rule (the Java producer's, ``TransactionManager.maybeUpdateProducerIdAndEpoch``): a batch
sent once keeps its producer id, epoch and sequence for every retry; a partition moves to a
new producer id (sequence 0) only when none of its batches stamped with the old one is
outstanding. A batch is stamped anew only when the leader's producer state refused its
sequences (``Sender`` module docstring).

The brokers are scripted (tests/client/fake_broker.py) but judge batches with the broker's
own ``ProducerStateManager``, so duplicates and gaps are recognised as a broker would.
"""

from __future__ import annotations

import asyncio

import pytest

from odradek.client import AsyncProducer
from odradek.client.errors import BrokerError
from odradek.coordinator.producer_state import ProducerStateManager
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.init_producer_id_response import InitProducerIdResponse
from odradek.protocol.generated.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from odradek.records.batch import read_header
from odradek.records.reader import read_batch
from tests.client.helpers import run
from tests.client.test_retries import FakeCluster

FIRST_PRODUCER_ID = 42


class JudgedLog:
    """One partition's log on a scripted broker: each batch is judged by the broker's
    ``ProducerStateManager`` (duplicates answered with their first offset, gaps refused)."""

    def __init__(self) -> None:
        self.state = ProducerStateManager()
        self.values: list[bytes] = []
        self.headers: list = []  # of every batch appended, as sent

    def append(self, records: bytes) -> tuple[int, int]:
        """``(error code, base offset)`` of a batch, appended when the state allows."""
        header = read_header(records)
        verdict = self.state.check(header)
        if verdict.is_duplicate:
            return ErrorCode.NONE, verdict.duplicate.first_offset
        if not verdict.ok:
            return verdict.error, -1
        base = len(self.values)
        self.values.extend(r.value for r in read_batch(records).records())
        self.headers.append(header)
        self.state.update(header, base)
        return ErrorCode.NONE, base

    def copy(self) -> JudgedLog:
        """The replica a new leader has: the same records and producer state."""
        other = JudgedLog()
        other.state = ProducerStateManager.load(self.state.snapshot())
        other.values, other.headers = list(self.values), list(self.headers)
        return other


class Script:
    """Two partitions of topic ``t``: partition 0 led by broker 1, partition 1 by broker 2.

    ``hold(p, code, appended)``: the answer to partition ``p``'s next batch not held yet
    waits for the returned event. The batch is judged (and appended when allowed) on arrival
    when ``appended``, else only once released (it was lost on the way); the answer is then
    ``code`` (REQUEST_TIMED_OUT: an acks=all produce that timed out waiting for its
    replicas), or the judged one when ``code`` is None."""

    def __init__(self, first_epoch: int = 0) -> None:
        self.first_epoch = first_epoch  # the epoch of the first producer id handed out
        self.logs = {0: JudgedLog(), 1: JudgedLog()}
        self._held: dict[int, list[tuple[asyncio.Event, int | None, bool]]] = {0: [], 1: []}
        self.producer_ids = iter(range(FIRST_PRODUCER_ID, FIRST_PRODUCER_ID + 100))
        self.inits = 0

    def hold(self, partition: int, code: int | None = ErrorCode.REQUEST_TIMED_OUT,
             appended: bool = True) -> asyncio.Event:
        gate = asyncio.Event()
        self._held[partition].append((gate, code, appended))
        return gate

    def handler(self, fake, header, body):
        if header.request_api_key == ApiKey.INIT_PRODUCER_ID:
            self.inits += 1
            epoch = self.first_epoch if self.inits == 1 else 0
            return InitProducerIdResponse(error_code=0, producer_id=next(self.producer_ids), producer_epoch=epoch)
        return self.answer(body)

    async def answer(self, body):
        parts = []
        for topic in body.topic_data:
            for p in topic.partition_data:
                held = self._held[p.index].pop(0) if self._held[p.index] else None
                if held is None:
                    code, base = self.logs[p.index].append(bytes(p.records))
                else:
                    gate, held_code, appended = held
                    if appended:
                        code, base = self.logs[p.index].append(bytes(p.records))
                    await gate.wait()
                    if held_code is not None:
                        code, base = held_code, -1
                    elif not appended:
                        code, base = self.logs[p.index].append(bytes(p.records))
                parts.append(PartitionProduceResponse(p.index, code, base))
        return ProduceResponse(responses=[TopicProduceResponse("t", parts)])


async def until(condition) -> None:
    """Wait (the test's own timeout bounds it) until ``condition()`` holds."""
    while not condition():
        await asyncio.sleep(0.005)


async def refuse_next_batch_of_partition_0(producer, script: Script) -> None:
    """Partition 0's leader acknowledges ``x1`` alone and is then replaced by a replica that
    has ``x0`` only (a failover that lost an acknowledged batch): the producer's next batch
    there, ``x2``, is refused OUT_OF_ORDER_SEQUENCE_NUMBER with nothing earlier outstanding,
    and the producer bumps its epoch (KIP-360), keeping its producer id: no InitProducerId."""
    await producer.send("t", b"x0", partition=0)
    replica = script.logs[0].copy()
    await producer.send("t", b"x1", partition=0)
    script.logs[0] = replica
    with pytest.raises(BrokerError) as refused:
        await producer.send("t", b"x2", partition=0)
    assert refused.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert script.inits == 1


# The identities: the first InitProducerId's, and the next epoch that a refusal bumps it to.
OLD, NEW = (FIRST_PRODUCER_ID, 0), (FIRST_PRODUCER_ID, 1)


def stamps(log: JudgedLog) -> list[tuple[tuple[int, int], int]]:
    """``((producer id, epoch), base sequence)`` of each batch of ``log``."""
    return [((h.producer_id, h.producer_epoch), h.base_sequence) for h in log.headers]


def test_a_batch_in_flight_when_the_producer_id_changes_is_resent_under_its_own():
    script = Script()

    async def main():
        cluster = await FakeCluster({"t": [1, 2]}).start(script.handler)
        try:
            async with AsyncProducer(cluster.bootstrap, linger_ms=0, retry_backoff_ms=5) as producer:
                gate = script.hold(1)
                y = producer.send("t", b"y", partition=1)
                await until(lambda: script.logs[1].values)  # appended, its answer held
                await refuse_next_batch_of_partition_0(producer, script)
                gate.set()  # REQUEST_TIMED_OUT: y is sent again
                metadata = await y
                assert script.logs[1].values == [b"y"]
                assert metadata.offset == 0
                # Partition 1 takes the new producer id once y is resolved; partition 0
                # went on under it at sequence 0.
                z = await producer.send("t", b"z", partition=1)
                x3 = await producer.send("t", b"x3", partition=0)
            assert (z.offset, x3.offset) == (1, 1)
            assert stamps(script.logs[1]) == [(OLD, 0), (NEW, 0)]
            assert stamps(script.logs[0]) == [(OLD, 0), (NEW, 0)]
            assert script.logs[0].values == [b"x0", b"x3"]
            assert script.inits == 1
        finally:
            await cluster.close()

    run(main())


def test_a_batch_waiting_for_its_retry_when_the_producer_id_changes_keeps_its_own():
    """y0 (appended, answered REQUEST_TIMED_OUT) waits to be retried behind y1, still in
    flight, when the producer id changes: it goes again under the old id and sequence."""
    script = Script()

    async def main():
        cluster = await FakeCluster({"t": [1, 2]}).start(script.handler)
        try:
            async with AsyncProducer(cluster.bootstrap, linger_ms=0, retry_backoff_ms=5) as producer:
                first = script.hold(1)
                y0 = producer.send("t", b"y0", partition=1)
                await until(lambda: script.logs[1].values == [b"y0"])
                second = script.hold(1, None)  # y1's own answer, once released
                y1 = producer.send("t", b"y1", partition=1)
                await until(lambda: script.logs[1].values == [b"y0", b"y1"])
                queue = producer._acc.topics["t"].queues[1]
                first.set()  # REQUEST_TIMED_OUT: y0 is requeued, its retry waits for y1
                await until(lambda: len(queue.sealed) == 1)
                await refuse_next_batch_of_partition_0(producer, script)
                second.set()
                results = await asyncio.gather(y0, y1)
            assert script.logs[1].values == [b"y0", b"y1"]
            assert [r.offset for r in results] == [0, 1]
        finally:
            await cluster.close()

    run(main())


def test_a_new_batch_waits_while_its_partition_has_one_in_flight_under_the_old_id():
    """y, lost on the way to its broker, is still in flight when the producer id changes;
    z, sent to the same partition meanwhile, must not overtake y's retry under the new id."""
    script = Script()

    async def main():
        cluster = await FakeCluster({"t": [1, 2]}).start(script.handler)
        try:
            async with AsyncProducer(cluster.bootstrap, linger_ms=0, retry_backoff_ms=5) as producer:
                gate = script.hold(1, appended=False)
                y = producer.send("t", b"y", partition=1)
                await until(lambda: len(cluster.brokers[1].of(ApiKey.PRODUCE)) == 1)
                await refuse_next_batch_of_partition_0(producer, script)
                z = producer.send("t", b"z", partition=1)
                gate.set()  # REQUEST_TIMED_OUT, not appended: y goes again, then z
                results = await asyncio.gather(y, z)
            assert script.logs[1].values == [b"y", b"z"]
            assert [r.offset for r in results] == [0, 1]
            assert stamps(script.logs[1]) == [(OLD, 0), (NEW, 0)]
        finally:
            await cluster.close()

    run(main())


@pytest.mark.parametrize("x3_answered", ["before", "after"])
def test_the_batches_behind_a_refused_sequence_go_again_under_the_new_id(x3_answered):
    """x2 and x3 are in flight to partition 0's new leader, which misses x1: x2 is refused
    OUT_OF_ORDER_SEQUENCE_NUMBER with nothing earlier outstanding (it fails); x3, behind it,
    was not appended either (refused too, its answer coming before or after x2's), and is
    delivered under the new producer id."""
    script = Script()

    async def main():
        cluster = await FakeCluster({"t": [1, 2]}).start(script.handler)
        try:
            async with AsyncProducer(cluster.bootstrap, linger_ms=0, retry_backoff_ms=5) as producer:
                await producer.send("t", b"x0", partition=0)
                replica = script.logs[0].copy()
                await producer.send("t", b"x1", partition=0)
                script.logs[0] = replica
                gate2 = script.hold(0, code=None)  # x2's judged answer, once released
                x2 = producer.send("t", b"x2", partition=0)
                await until(lambda: len(cluster.brokers[0].of(ApiKey.PRODUCE)) == 3)
                if x3_answered == "after":
                    gate3 = script.hold(0, code=None)
                x3 = producer.send("t", b"x3", partition=0)
                await until(lambda: len(cluster.brokers[0].of(ApiKey.PRODUCE)) == 4)
                if x3_answered == "before":
                    queue = producer._acc.topics["t"].queues[0]
                    await until(lambda: len(queue.sealed) == 1)  # waits behind x2
                gate2.set()
                with pytest.raises(BrokerError) as refused:
                    await x2
                assert refused.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                if x3_answered == "after":
                    gate3.set()
                metadata = await x3
            assert metadata.offset == 1
            assert script.logs[0].values == [b"x0", b"x3"]
            assert stamps(script.logs[0]) == [(OLD, 0), (NEW, 0)]
            assert script.inits == 1
        finally:
            await cluster.close()

    run(main())


@pytest.mark.parametrize("first_epoch, code, then", [
    (0, ErrorCode.UNKNOWN_PRODUCER_ID, (FIRST_PRODUCER_ID, 1)),  # KIP-360: the next epoch
    (0, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, (FIRST_PRODUCER_ID, 1)),
    (0, ErrorCode.INVALID_PRODUCER_EPOCH, (FIRST_PRODUCER_ID + 1, 0)),  # fenced: a new id
    (32767, ErrorCode.UNKNOWN_PRODUCER_ID, (FIRST_PRODUCER_ID + 1, 0)),  # no epoch above
])
def test_a_refused_batch_moves_the_producer_to_its_next_epoch_or_a_new_id(first_epoch, code, then):
    """x1 is refused with ``code`` and fails; x2 goes under the identity the producer moved
    to: the same producer id at the next epoch, from sequence 0, without an InitProducerId
    (as the Java producer), or a new producer id where no bump applies."""
    script = Script(first_epoch)

    async def main():
        cluster = await FakeCluster({"t": [1, 2]}).start(script.handler)
        try:
            async with AsyncProducer(cluster.bootstrap, linger_ms=0, retry_backoff_ms=5) as producer:
                await producer.send("t", b"x0", partition=0)
                script.hold(0, code=code, appended=False).set()
                with pytest.raises(BrokerError) as refused:
                    await producer.send("t", b"x1", partition=0)
                assert refused.value.code == code
                x2 = await producer.send("t", b"x2", partition=0)
            assert x2.offset == 1 and script.logs[0].values == [b"x0", b"x2"]
            assert stamps(script.logs[0]) == [((FIRST_PRODUCER_ID, first_epoch), 0), (then, 0)]
            assert script.inits == (1 if then[0] == FIRST_PRODUCER_ID else 2)
        finally:
            await cluster.close()

    run(main())
