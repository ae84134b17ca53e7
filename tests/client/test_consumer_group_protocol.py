"""odradek consumers with ``group_protocol="consumer"`` (KIP-848) on a real odradek broker:
members share a topic's partitions, one leaving hands its partitions to the others, every
record is read exactly once with manual commits; and a mixed group with confluent-kafka
(librdkafka) members speaking the same protocol."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer as CkConsumer

from odradek.client import AsyncConsumer, AsyncProducer, TopicPartition
from odradek.testing.broker import InProcessBroker

from .helpers import create_topic, run

PARTITIONS = 6


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # Short heartbeats, so that assignments move within a test.
    with InProcessBroker(tmp_path_factory.mktemp("kip848") / "data", group_consumer_heartbeat_interval_ms=200,
                         group_consumer_session_timeout_ms=10_000) as b:
        yield b


async def produce(bootstrap: str, topic: str, values: range) -> None:
    async with AsyncProducer(bootstrap) as producer:
        for v in values:
            await producer.send(topic, str(v).encode(), partition=v % PARTITIONS)
        await producer.flush()


def member(bootstrap: str, group: str) -> AsyncConsumer:
    return AsyncConsumer(bootstrap, group_id=group, group_protocol="consumer", auto_offset_reset="earliest",
                         enable_auto_commit=False, fetch_max_wait_ms=100)


async def poll_all(consumers, seen: list, until, limit: float = 30.0) -> None:
    """Poll every consumer in turn, committing what each returned, until ``until()``."""
    deadline = time.monotonic() + limit
    while not until():
        assert time.monotonic() < deadline, f"not reached; assignments {[sorted(c.assignment()) for c in consumers]}"
        for c in consumers:
            polled = await c.poll(50)
            for records in polled.values():
                seen.extend(int(r.value) for r in records)
            if polled:
                await c.commit()


def shared(consumers) -> bool:
    """Every partition assigned to exactly one consumer, and every consumer has some."""
    assignments = [c.assignment() for c in consumers]
    union = set().union(*assignments)
    return (all(assignments) and sum(map(len, assignments)) == PARTITIONS
            and union == {TopicPartition(union and next(iter(union)).topic, p) for p in range(PARTITIONS)})


def test_members_share_partitions_and_a_leaving_member_hands_them_over(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, PARTITIONS)
        consumers = [await member(broker.bootstrap, "g-share").start() for _ in range(3)]
        try:
            for c in consumers:
                c.subscribe([topic_name])
            seen: list = []
            await poll_all(consumers, seen, lambda: shared(consumers))
            await produce(broker.bootstrap, topic_name, range(0, 60))
            await poll_all(consumers, seen, lambda: len(seen) >= 60)
            leaving = consumers.pop()
            gone = leaving.assignment()
            await leaving.close()
            await poll_all(consumers, seen, lambda: shared(consumers))
            assert gone <= consumers[0].assignment() | consumers[1].assignment()
            await produce(broker.bootstrap, topic_name, range(60, 120))
            await poll_all(consumers, seen, lambda: len(seen) >= 120)
            rounds = iter(range(3))  # a few more polls: a record read twice would show now
            await poll_all(consumers, seen, lambda: next(rounds, None) is None)
            assert sorted(seen) == list(range(120))  # each record exactly once
        finally:
            for c in consumers:
                await c.close()

    run(main(), timeout=120)


def test_a_mixed_group_with_librdkafka_members(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, PARTITIONS)
        ours = await member(broker.bootstrap, "g-mixed").start()
        theirs = CkConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-mixed",
                             "group.protocol": "consumer", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        seen: list = []
        try:
            ours.subscribe([topic_name])
            theirs.subscribe([topic_name])

            def poll_theirs():
                msg = theirs.poll(0.05)
                if msg is not None and msg.error() is None:
                    seen.append(int(msg.value()))
                    theirs.commit(msg, asynchronous=False)

            def both_assigned() -> bool:
                poll_theirs()
                mine, other = ours.assignment(), {(tp.topic, tp.partition) for tp in theirs.assignment()}
                return bool(mine and other) and len(mine) + len(other) == PARTITIONS and not (
                    {(tp.topic, tp.partition) for tp in mine} & other)

            await poll_all([ours], seen, both_assigned)
            await produce(broker.bootstrap, topic_name, range(60))

            def all_read() -> bool:
                poll_theirs()
                return len(seen) >= 60

            await poll_all([ours], seen, all_read)
            assert sorted(seen) == list(range(60))
        finally:
            theirs.close()
            await ours.close()

    run(main(), timeout=120)
