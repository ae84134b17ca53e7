"""Producer-state snapshots at a clean stop: written next to each log, made durable together,
read back at the next start; a torn one is ignored and the state rebuilt from the log."""

from __future__ import annotations

import os

from confluent_kafka import Producer

from odradek.coordinator.producer_state import ProducerStateManager
from odradek.replication.producer_snapshot import PRODUCER_SNAPSHOT
from odradek.testing.broker import InProcessBroker
from tests.server.clients import unique_topic


def _produce_idempotent(bootstrap: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    errors = []
    for i in range(n):
        producer.produce(topic, b"v%d" % i, partition=0, on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0
    assert errors == []


def _producer_ids(b: InProcessBroker, topic: str) -> list[int]:
    return sorted(b.broker.replica_manager.get(topic, 0).producer_state.entries())


def _stopped_after_idempotent_produce(data, prefix: str) -> tuple[str, list[int], str]:
    """A broker on ``data`` that took 5 records from one idempotent producer, stopped cleanly:
    the topic, its producer ids before the stop, and its partition's log directory."""
    topic = unique_topic(prefix)
    with InProcessBroker(data) as b:
        _produce_idempotent(b.bootstrap, topic, 5)
        before = _producer_ids(b, topic)
        directory = b.broker.replica_manager.get(topic, 0).log.directory
    return topic, before, directory


def test_a_clean_stop_writes_snapshots_that_the_next_start_reads(tmp_path):
    data = tmp_path / "data"
    topic, before, directory = _stopped_after_idempotent_produce(data, "snap")
    assert len(before) == 1
    with open(os.path.join(directory, PRODUCER_SNAPSHOT), "rb") as f:
        snapshot = ProducerStateManager.load(f.read())
    assert sorted(snapshot.entries()) == before
    assert not os.path.exists(os.path.join(directory, PRODUCER_SNAPSHOT + ".tmp"))
    with InProcessBroker(data) as b:
        assert _producer_ids(b, topic) == before


def test_a_torn_snapshot_is_ignored_and_the_state_rebuilt_from_the_log(tmp_path):
    data = tmp_path / "data"
    topic, before, directory = _stopped_after_idempotent_produce(data, "torn")
    path = os.path.join(directory, PRODUCER_SNAPSHOT)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)  # as if the machine stopped before the sync
    with InProcessBroker(data) as b:
        assert _producer_ids(b, topic) == before
