"""An idle producer refreshes its metadata every ``metadata_max_age_ms`` (Kafka's
``metadata.max.age.ms``: the Java producer's sender polls its NetworkClient, which refreshes
a snapshot that old, batches or not), so the next send goes to the partition's current
leader."""

from __future__ import annotations

import asyncio

from odradek.client import AsyncProducer
from odradek.protocol.generated import ApiKey
from tests.client.helpers import run
from tests.client.test_retries import FakeCluster, produce_answer


def test_an_idle_producer_learns_of_a_new_leader():
    async def main():
        cluster = FakeCluster({"t": [1]})
        await cluster.start(lambda fake, header, body: produce_answer(body))
        try:
            async with AsyncProducer(cluster.bootstrap, enable_idempotence=False, linger_ms=0,
                                     metadata_max_age_ms=200) as producer:
                await producer.send("t", b"a", partition=0)
                cluster.topics["t"] = [2]  # the leadership moves while the producer is idle
                for _ in range(200):
                    if producer._cluster.metadata.leader("t", 0) == 2:
                        break
                    await asyncio.sleep(0.01)
                assert producer._cluster.metadata.leader("t", 0) == 2
                await producer.send("t", b"b", partition=0)
            assert len(cluster.brokers[0].of(ApiKey.PRODUCE)) == 1
            assert len(cluster.brokers[1].of(ApiKey.PRODUCE)) == 1
        finally:
            await cluster.close()

    run(main())
