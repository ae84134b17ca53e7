"""Helpers of the client tests: running coroutines, reading a topic back, raw batches."""

from __future__ import annotations

import asyncio

from odradek.client import AsyncAdminClient, AsyncConsumer, NewTopic, TopicPartition
from odradek.client.connection import BrokerConnection
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
)
from odradek.records.reader import iter_batches


def run(coroutine, timeout: float = 30):
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


async def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs) -> None:
    async with AsyncAdminClient(bootstrap) as admin:
        await admin.create_topics([NewTopic(name, partitions, 1, configs={k.replace("_", "."): str(v)
                                                                          for k, v in configs.items()})])


async def read_all(bootstrap: str, topic: str, count: int, partitions: int = 1, **config) -> dict:
    """``{partition: [Record, ...]}`` of the first ``count`` records of ``topic``."""
    out: dict[int, list] = {p: [] for p in range(partitions)}
    async with AsyncConsumer(bootstrap, auto_offset_reset="earliest", **config) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        got = 0
        while got < count:
            polled = await consumer.poll(5000)
            assert polled, f"read {got} of {count} records of {topic}"
            for tp, records in polled.items():
                out[tp.partition].extend(records)
                got += len(records)
    return out


async def raw_batches(bootstrap: str, topic: str, partition: int = 0) -> list:
    """The batches of a partition as the broker stores them (one Fetch from offset 0)."""
    host, port = bootstrap.rsplit(":", 1)
    conn = await BrokerConnection(host, int(port)).connect()
    try:
        request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24,
                               topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                                   partition=partition, fetch_offset=0, partition_max_bytes=1 << 24)])])
        response = await conn.send(ApiKey.FETCH, request, version=12)
        data = bytes(response.responses[0].partitions[0].records or b"")
        return list(iter_batches(data))
    finally:
        await conn.close()
