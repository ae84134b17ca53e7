"""Fixtures: one broker per module holding a topic of records and a consumer group that
committed part of them, and the console served in-process against it (port 0)."""

from __future__ import annotations

import json

import pytest

from odradek.client import AdminClient, NewTopic, Producer, TopicPartition
from odradek.console.app import ConsoleConfig
from odradek.console.console_server import ConsoleServer
from odradek.testing.broker import InProcessBroker

TOPIC = "orders"
PARTITIONS = 3
RECORDS_PER_PARTITION = 10
GROUP = "billing"
# The group's committed offsets: partition 0 behind by 6, 1 caught up, 2 behind by 3.
COMMITTED = {0: 4, 1: 10, 2: 7}
LAG = {p: RECORDS_PER_PARTITION - o for p, o in COMMITTED.items()}


def record_key(partition: int, i: int) -> bytes:
    return f"order-{partition}-{i}".encode()


def record_value(partition: int, i: int) -> bytes:
    return json.dumps({"partition": partition, "n": i}).encode()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("console") / "data") as b:
        with AdminClient(b.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
            with Producer(b.bootstrap) as producer:
                for p in range(PARTITIONS):
                    for i in range(RECORDS_PER_PARTITION):
                        producer.send(TOPIC, key=record_key(p, i), value=record_value(p, i), partition=p,
                                      headers=[("source", b"tests")])
                producer.flush()
            admin.alter_group_offsets(GROUP, {TopicPartition(TOPIC, p): o for p, o in COMMITTED.items()})
        yield b


@pytest.fixture(scope="module")
def console(broker):
    """The console on a free port; it samples and the pages refresh every half second."""
    with ConsoleServer(ConsoleConfig(broker.bootstrap, sample_interval=0.5, refresh_ms=500)) as server:
        yield server
