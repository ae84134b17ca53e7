"""Kafka's exactly-once recipes, unchanged, against one odradek broker.

- confluent-kafka's and aiokafka's transactional producers run consume-transform-produce
  loops with ``send_offsets_to_transaction``, committing most transactions and aborting some;
  read_committed consumers of confluent-kafka, kafka-python and aiokafka then see every input
  record transformed exactly once, read_uncommitted ones see the aborted attempts too, and the
  group's committed offsets are the input's end;
- a second producer with the same transactional id fences the first, whose open transaction
  never becomes visible;
- a transaction left open past its ``transaction.timeout.ms`` is aborted by the coordinator,
  after which records written behind it become readable with read_committed;
- kill -9 of the broker with a transaction open: after the restart its records are never
  visible, and the next producer of that transactional id recovers and commits.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from odradek.testing.broker import BrokerProcess, InProcessBroker
from tests.server.clients import unique_topic, wait_until
from tests.server.txn_clients import (
    READERS, aiokafka_transform, confluent_transform, confluent_values, kafka_python_values, transformed, values_only,
)

pytestmark = pytest.mark.timeout(180)

RECORDS = 120
PARTITIONS = 3
TXN_BROKER = {"transaction_state_log_num_partitions": 4,
              "transaction_abort_timed_out_transaction_cleanup_interval_ms": 200}


@pytest.fixture(scope="module")
def tb(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("txn") / "data", **TXN_BROKER) as b:
        yield b


def create(bootstrap: str, *topics: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        future.result(20)


def fill(bootstrap: str, topic: str, n: int = RECORDS, prefix: str = "record") -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [f"{prefix}-{i}".encode() for i in range(n)]
    for i, value in enumerate(values):
        producer.produce(topic, key=b"k%d" % (i % 11), value=value)
    assert producer.flush(30) == 0
    return values


def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(KpTopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tps = [KpTopicPartition(topic, p) for p in range(PARTITIONS)]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


def assert_exactly_once(bootstrap: str, sink: str, inputs: list[bytes], aborted: int, group: str, source: str):
    expected = sorted(transformed(v) for v in inputs)
    for name, read in READERS.items():
        assert values_only(read(bootstrap, sink, PARTITIONS)) == expected, name
    uncommitted = values_only(kafka_python_values(bootstrap, sink, PARTITIONS, "read_uncommitted"))
    assert set(uncommitted) == set(expected)
    assert len(uncommitted) > len(expected) if aborted else len(uncommitted) == len(expected)
    assert group_offsets(bootstrap, group, source) == end_offsets(bootstrap, source)


@pytest.mark.parametrize("abort_every", [0, 3])
def test_confluent_consume_transform_produce(tb, abort_every):
    source, sink = unique_topic("in"), unique_topic("out")
    create(tb.bootstrap, source, sink)
    inputs = fill(tb.bootstrap, source)
    group = unique_topic("ctp")
    aborted = confluent_transform(tb.bootstrap, source, sink, group, unique_topic("tid"), RECORDS,
                                  abort_every=abort_every)
    assert aborted > 0 if abort_every else aborted == 0
    assert_exactly_once(tb.bootstrap, sink, inputs, aborted, group, source)


def test_aiokafka_consume_transform_produce_with_aborts(tb):
    source, sink = unique_topic("in"), unique_topic("out")
    create(tb.bootstrap, source, sink)
    inputs = fill(tb.bootstrap, source)
    group = unique_topic("ctp")
    aborted = asyncio.run(aiokafka_transform(tb.bootstrap, source, sink, group, unique_topic("tid"), RECORDS,
                                             abort_every=2))
    assert aborted > 0
    assert_exactly_once(tb.bootstrap, sink, inputs, aborted, group, source)


def test_a_second_producer_with_the_same_id_fences_the_first(tb):
    topic, tid = unique_topic("fenced"), unique_topic("tid")
    create(tb.bootstrap, topic, partitions=1)
    first = Producer({"bootstrap.servers": tb.bootstrap, "transactional.id": tid})
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic, value=b"zombie")
    assert first.flush(30) == 0

    second = Producer({"bootstrap.servers": tb.bootstrap, "transactional.id": tid})
    second.init_transactions(30)  # aborts the first one's transaction and bumps the epoch
    second.begin_transaction()
    second.produce(topic, value=b"successor")
    second.commit_transaction(30)

    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(30)
    assert raised.value.args[0].fatal() or not raised.value.args[0].retriable()
    assert values_only(confluent_values(tb.bootstrap, topic, 1)) == [b"successor"]
    assert values_only(kafka_python_values(tb.bootstrap, topic, 1, "read_uncommitted")) == [b"successor", b"zombie"]


def test_a_transaction_open_past_its_timeout_is_aborted_by_the_coordinator(tb):
    topic = unique_topic("timeout")
    create(tb.bootstrap, topic, partitions=1)
    stalled = Producer({"bootstrap.servers": tb.bootstrap, "transactional.id": unique_topic("tid"),
                        "transaction.timeout.ms": 1500})
    stalled.init_transactions(30)
    stalled.begin_transaction()
    stalled.produce(topic, value=b"never committed")
    assert stalled.flush(30) == 0
    plain = Producer({"bootstrap.servers": tb.bootstrap})
    plain.produce(topic, value=b"behind the transaction")
    assert plain.flush(30) == 0
    # Until the abort, the open transaction holds the last stable offset below both records.
    assert confluent_values(tb.bootstrap, topic, 1) == []
    wait_until(lambda: values_only(kafka_python_values(tb.bootstrap, topic, 1)) == [b"behind the transaction"],
               30, what="the coordinator to abort the timed-out transaction")
    with pytest.raises(KafkaException):
        stalled.commit_transaction(10)


def test_kill_9_with_a_transaction_open_never_shows_it(tmp_path):
    data, topic, tid = tmp_path / "data", "payments", "payments-writer"
    with BrokerProcess(data, **TXN_BROKER) as b:
        create(b.bootstrap, topic, partitions=2)
        producer = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, value=b"committed before", partition=0)
        producer.commit_transaction(30)
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=b"open-%d" % i, partition=i % 2)
        assert producer.flush(30) == 0  # written and acknowledged, not committed
        b.kill()
    with BrokerProcess(data, **TXN_BROKER) as b:
        successor = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid})
        successor.init_transactions(60)  # recovers: the open transaction is aborted
        successor.begin_transaction()
        successor.produce(topic, value=b"committed after", partition=1)
        successor.commit_transaction(30)
        committed = values_only(confluent_values(b.bootstrap, topic, 2))
        assert committed == [b"committed after", b"committed before"]
        everything = values_only(kafka_python_values(b.bootstrap, topic, 2, "read_uncommitted"))
        assert len(everything) == 12
        # aiokafka's read_committed consumer agrees
        assert values_only(READERS["aiokafka"](b.bootstrap, topic, 2)) == committed
