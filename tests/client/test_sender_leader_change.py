"""An idempotent producer whose partition changes leader while a batch is in flight to the old
one keeps the partition's order and loses nothing.

The failure seen in a network-partition test: a leader cut off from its cluster (but not from
its clients) held an acks=all batch of a producer id new to everyone until the request timed
out; meanwhile the partition had a new leader, and the producer sent it the batches filled
after. That leader, with no state for the producer id, took the later sequence as its first
(as Kafka's broker does: a producer whose state is gone may start anywhere), then refused
the held batch's retry as out of order: that record failed, and the next one, behind the
refusal, was written under another producer id after the records that followed it.

The rule (``Sender`` module docstring): a partition's batches in flight all go to one
broker; the next batch waits until those sent to the old leader are answered.

Each scripted broker has its own replica of the partition, judged by the broker's own
``ProducerStateManager`` (tests/client/test_sender_producer_reset.py's ``JudgedLog``).
"""

from __future__ import annotations

import asyncio

from odradek.client import AsyncProducer
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.init_producer_id_response import InitProducerIdResponse
from odradek.protocol.generated.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from tests.client.helpers import run
from tests.client.test_retries import FakeCluster
from tests.client.test_sender_producer_reset import JudgedLog, stamps, until

PRODUCER_ID = 7


class TwoReplicas:
    """Partition ``t-0`` on brokers 1 and 2, each with its own log. ``hold()``: broker 1
    appends the next batch it gets and answers REQUEST_TIMED_OUT once the returned event is
    set (a leader that lost its followers and holds an acks=all produce)."""

    def __init__(self) -> None:
        self.logs = {1: JudgedLog(), 2: JudgedLog()}
        self.gate: asyncio.Event | None = None

    def hold(self) -> asyncio.Event:
        self.gate = asyncio.Event()
        return self.gate

    def handler(self, fake, header, body):
        if header.request_api_key == ApiKey.INIT_PRODUCER_ID:
            return InitProducerIdResponse(error_code=0, producer_id=PRODUCER_ID, producer_epoch=0)
        return self.answer(fake.node_id, body)

    async def answer(self, node: int, body):
        (topic,) = body.topic_data
        (p,) = topic.partition_data
        code, base = self.logs[node].append(bytes(p.records))
        gate, self.gate = (self.gate, None) if node == 1 else (None, self.gate)
        if gate is not None:
            await gate.wait()
            code, base = ErrorCode.REQUEST_TIMED_OUT, -1
        return ProduceResponse(responses=[TopicProduceResponse("t", [PartitionProduceResponse(0, code, base)])])


def test_no_batch_overtakes_one_in_flight_to_the_old_leader():
    replicas = TwoReplicas()

    async def main():
        cluster = await FakeCluster({"t": [1]}).start(replicas.handler)
        try:
            async with AsyncProducer(cluster.bootstrap, linger_ms=0, retry_backoff_ms=5) as producer:
                gate = replicas.hold()
                x0 = producer.send("t", b"x0", partition=0)
                await until(lambda: replicas.logs[1].values == [b"x0"])  # its answer held
                cluster.topics["t"] = [2]  # the leadership moves; the producer learns it
                await producer._cluster.request_update()
                assert producer._cluster.metadata.leader("t", 0) == 2
                x1 = producer.send("t", b"x1", partition=0)
                await asyncio.sleep(0.2)  # time enough for x1 to go, if it may
                early = len(cluster.brokers[1].of(ApiKey.PRODUCE))
                gate.set()  # x0 timed out at the old leader: it goes to the new one, then x1
                results = await asyncio.gather(x0, x1, return_exceptions=True)
            assert replicas.logs[2].values == [b"x0", b"x1"], (early, results)
            assert [r.offset for r in results] == [0, 1]
            assert stamps(replicas.logs[2]) == [((PRODUCER_ID, 0), 0), ((PRODUCER_ID, 0), 1)]
        finally:
            await cluster.close()

    run(main())
