"""aiokafka as a group member: it commits, and a later member of the group resumes there."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from tests.server.group_clients import create_topic, produce


def test_aiokafka_commits_and_a_new_member_resumes(broker):
    create_topic(broker.bootstrap, "aio", 2)
    values = [b"a%d" % i for i in range(40)]
    produce(broker.bootstrap, "aio", values, partitions=2)

    async def member(commit_at: int | None):
        c = AIOKafkaConsumer("aio", bootstrap_servers=broker.bootstrap, group_id="aio-group",
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        try:
            seen = []
            async with asyncio.timeout(30):
                while len(seen) < (40 if commit_at is not None else 40 - 2 * 12):
                    for records in (await c.getmany(timeout_ms=500)).values():
                        seen += [r.value for r in records]
            if commit_at is not None:
                await c.commit({TopicPartition("aio", p): OffsetAndMetadata(commit_at, "") for p in (0, 1)})
                assert await c.committed(TopicPartition("aio", 1)) == commit_at
            return seen
        finally:
            await c.stop()

    assert sorted(asyncio.run(member(12))) == sorted(values)
    rest = asyncio.run(member(None))
    assert sorted(rest) == sorted(v for i, v in enumerate(values) if i // 2 >= 12)
