"""The coordinator's markers for partitions its own broker leads are written in-process
(``TransactionMarkerChannel._write_local`` through ``broker.write_txn_markers``, the
WriteTxnMarkers handler's code): no connection to itself, the same outcomes as the wire —
read_committed data and transactional offsets completed, a lower coordinator epoch fenced,
a partition short of in-sync replicas retried."""

from __future__ import annotations

import uuid

import pytest

from odradek.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from odradek.testing.broker import InProcessBroker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("local-markers") / "data",
                         transaction_state_log_num_partitions=2) as b:
        yield b


@pytest.fixture
def topic_name():
    return f"local-{uuid.uuid4().hex[:8]}"


def create(bootstrap: str, topic: str, config: dict | None = None) -> None:
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, configs=config or {})])


def read_committed(bootstrap: str, topic: str) -> list[bytes]:
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        out = []
        while consumer.position(tp) < end:
            out.extend(r.value for records in consumer.poll(500).values() for r in records)
        return out


def test_markers_for_own_partitions_never_go_over_the_wire(broker, topic_name):
    create(broker.bootstrap, topic_name)
    group = f"{topic_name}-group"
    with Producer(broker.bootstrap, transactional_id=f"{topic_name}-tid") as producer:
        producer.init_transactions()
        for n, commit in enumerate((True, False, True)):
            producer.begin_transaction()
            producer.send(topic_name, b"v%d" % n, partition=0)
            producer.send_offsets_to_transaction({TopicPartition(topic_name, 0): n + 1}, group)
            producer.commit_transaction() if commit else producer.abort_transaction()
    assert read_committed(broker.bootstrap, topic_name) == [b"v0", b"v2"]
    with Consumer(broker.bootstrap, group_id=group) as reader:
        assert reader.committed(TopicPartition(topic_name, 0)).offset == 3
    assert broker.broker.txn_coordinator.markers.connections._connections == {}


def test_fencing_and_retries_as_over_the_wire(broker, topic_name):
    create(broker.bootstrap, topic_name)
    create(broker.bootstrap, f"{topic_name}-isr", {"min.insync.replicas": "2"})
    channel = broker.broker.txn_coordinator.markers
    tp = (topic_name, 0)

    def write(coordinator_epoch, partitions, still_valid=lambda: True):
        return broker.call(channel.write_markers, 4242, 0, True, coordinator_epoch, partitions, still_valid)

    assert write(5, {tp, ("no-such-topic", 0)})  # written here; nothing needed where there is no partition
    assert not write(4, {tp})  # TRANSACTION_COORDINATOR_FENCED: a newer coordinator wrote there
    rounds = iter([True, True, True, False])
    assert not write(5, {(f"{topic_name}-isr", 0)}, lambda: next(rounds))  # NOT_ENOUGH_REPLICAS: retried
    assert next(rounds, None) is None


def test_an_unexpected_failure_is_retried(broker, topic_name, monkeypatch):
    create(broker.bootstrap, topic_name)
    real, calls = broker.broker.write_txn_markers, []

    async def failing_once(writes):
        calls.append(len(writes))
        if len(calls) == 1:
            raise RuntimeError("a bug")
        await real(writes)

    monkeypatch.setattr(broker.broker, "write_txn_markers", failing_once)
    channel = broker.broker.txn_coordinator.markers
    assert broker.call(channel.write_markers, 4343, 0, False, 5, {(topic_name, 0)}, lambda: True)
    assert calls == [1, 1]
