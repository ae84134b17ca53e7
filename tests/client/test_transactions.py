"""odradek's transactional producer and read_committed consumer against a real broker, and
next to confluent-kafka (librdkafka) and kafka-python: each reads with read_committed exactly
what the other committed; consume-transform-produce with the group's offsets in the
transaction; fencing; a prepared transaction ended from elsewhere."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from odradek.client import (
    AdminClient,
    BrokerError,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
    TransactionHandle,
    end_transaction,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import InProcessBroker
from tests.server.txn_clients import aiokafka_values, confluent_values, kafka_python_values, values_only

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("txn-client") / "data", transaction_state_log_num_partitions=4,
                         transaction_abort_timed_out_transaction_cleanup_interval_ms=200) as b:
        yield b


def create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def odradek_values(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> list:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer(bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)  # the last stable offset under read_committed
        out = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for tp, records in consumer.poll(500).items():
                out.extend((tp.partition, r.offset, r.value) for r in records)
        return sorted(out)


def test_odradek_transactions_read_committed_by_every_client(broker, topic_name):
    create(broker.bootstrap, topic_name)
    with Producer(broker.bootstrap, transactional_id=f"{topic_name}-tid") as producer:
        producer.init_transactions()
        for n in range(6):
            producer.begin_transaction()
            for i in range(10):
                producer.send(topic_name, b"%d-%d" % (n, i), partition=i % 2)
            if n % 3 == 2:
                producer.flush()  # written, then aborted: on the log, never visible
                producer.abort_transaction()
            else:
                producer.commit_transaction()
    committed = sorted(b"%d-%d" % (n, i) for n in range(6) if n % 3 != 2 for i in range(10))
    assert values_only(odradek_values(broker.bootstrap, topic_name, 2)) == committed
    assert values_only(confluent_values(broker.bootstrap, topic_name, 2)) == committed
    assert values_only(kafka_python_values(broker.bootstrap, topic_name, 2)) == committed
    assert values_only(aiokafka_values(broker.bootstrap, topic_name, 2)) == committed
    everything = values_only(odradek_values(broker.bootstrap, topic_name, 2, "read_uncommitted"))
    assert len(everything) == 60 and set(committed) < set(everything)


def test_confluent_transactions_read_committed_by_odradek(broker, topic_name):
    create(broker.bootstrap, topic_name)
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-c"})
    producer.init_transactions(30)
    for n in range(4):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic_name, value=b"%d-%d" % (n, i), partition=i % 2)
        if n == 1:
            producer.flush(30)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    expected = sorted(b"%d-%d" % (n, i) for n in (0, 2, 3) for i in range(5))
    assert values_only(odradek_values(broker.bootstrap, topic_name, 2)) == expected
    assert len(odradek_values(broker.bootstrap, topic_name, 2, "read_uncommitted")) == 20


def test_an_open_transaction_holds_read_committed_consumers_at_its_first_offset(broker, topic_name):
    create(broker.bootstrap, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    with Producer(broker.bootstrap, transactional_id=f"{topic_name}-tid") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"committed")
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic_name, b"open")
        producer.flush()
        with Consumer(broker.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as consumer:
            consumer.assign([tp])
            assert consumer.end_offsets([tp])[tp] == 2  # the record, its commit marker; not "open"
            got = [r.value for records in consumer.poll(2000).values() for r in records]
            assert got == [b"committed"]
            assert consumer.position(tp) == 2  # past the marker, held before the open transaction
            producer.commit_transaction()
            got = []
            while consumer.position(tp) < 4:
                got += [r.value for records in consumer.poll(500).values() for r in records]
            assert got == [b"open"]


def test_consume_transform_produce_commits_the_group_offsets_with_the_output(broker, topic_name):
    source, sink, group = topic_name + "-in", topic_name + "-out", topic_name + "-g"
    create(broker.bootstrap, source)
    create(broker.bootstrap, sink)
    with Producer(broker.bootstrap) as plain:
        for i in range(40):
            plain.send(source, b"r%d" % i, partition=i % 2)
    rounds = aborted = done = 0
    with Consumer(broker.bootstrap, group_id=group, isolation_level="read_committed", auto_offset_reset="earliest",
                  enable_auto_commit=False, session_timeout_ms=6000) as consumer, \
            Producer(broker.bootstrap, transactional_id=f"{topic_name}-ctp") as producer:
        consumer.subscribe([source])
        producer.init_transactions()
        while done < 40:
            batch = consumer.poll(1000, max_records=7)
            if not batch:
                continue
            rounds += 1
            producer.begin_transaction()
            for tp, records in batch.items():
                for r in records:
                    producer.send(sink, r.value.upper(), partition=tp.partition)
            positions = {tp: records[-1].offset + 1 for tp, records in batch.items()}
            producer.send_offsets_to_transaction(positions, consumer.group_metadata())
            if rounds % 3 == 0:
                producer.abort_transaction()
                aborted += 1
                for tp, records in batch.items():
                    consumer.seek(tp, records[0].offset)
            else:
                producer.commit_transaction()
                done += sum(len(records) for records in batch.values())
    assert aborted > 0
    expected = sorted(b"R%d" % i for i in range(40))
    assert values_only(odradek_values(broker.bootstrap, sink, 2)) == expected
    assert values_only(confluent_values(broker.bootstrap, sink, 2)) == expected
    with Consumer(broker.bootstrap, group_id=group) as reader:
        committed = {p: reader.committed(TopicPartition(source, p)).offset for p in range(2)}
    assert committed == {0: 20, 1: 20}


def test_a_second_producer_fences_the_first(broker, topic_name):
    create(broker.bootstrap, topic_name, 1)
    tid = f"{topic_name}-tid"
    first = Producer(broker.bootstrap, transactional_id=tid)
    try:
        first.init_transactions()
        first.begin_transaction()
        first.send(topic_name, b"zombie")
        first.flush()
        with Producer(broker.bootstrap, transactional_id=tid) as second:
            second.init_transactions()  # aborts the first one's transaction
            second.begin_transaction()
            second.send(topic_name, b"successor")
            second.commit_transaction()
        with pytest.raises(BrokerError) as raised:
            first.commit_transaction()
        assert raised.value.code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
        assert first.transaction_state == "FatalError"
    finally:
        first.close()
    assert values_only(odradek_values(broker.bootstrap, topic_name, 1)) == [b"successor"]


def test_a_prepared_transaction_is_committed_by_its_handle_once_however_often_asked(broker, topic_name):
    create(broker.bootstrap, topic_name, 2)
    with Producer(broker.bootstrap, transactional_id=f"{topic_name}-task") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(6):
            producer.send(topic_name, b"p%d" % i, partition=i % 2)
        handle = producer.prepare_transaction()
    assert isinstance(handle, TransactionHandle) and handle.producer_id >= 0
    assert odradek_values(broker.bootstrap, topic_name, 2) == []
    end_transaction(broker.bootstrap, handle, True)
    end_transaction(broker.bootstrap, tuple(handle), True)  # a driver's replay: still NONE
    assert values_only(odradek_values(broker.bootstrap, topic_name, 2)) == sorted(b"p%d" % i for i in range(6))
    with pytest.raises(BrokerError):
        end_transaction(broker.bootstrap, handle, False, timeout_ms=5000)  # it committed: no abort


def test_confluent_read_committed_consumer_stops_at_an_odradek_transaction_until_it_commits(broker, topic_name):
    create(broker.bootstrap, topic_name, 1)
    with Producer(broker.bootstrap, transactional_id=f"{topic_name}-tid") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"later")
        producer.flush()
        consumer = ConfluentConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "x",
                                      "isolation.level": "read_committed", "enable.auto.commit": False})
        try:
            consumer.assign([ConfluentTopicPartition(topic_name, 0, 0)])
            assert [m for m in consumer.consume(10, 1.0) if m.error() is None] == []
            producer.commit_transaction()
            got = []
            for _ in range(20):
                got += [m.value() for m in consumer.consume(10, 0.5) if m.error() is None]
                if got:
                    break
            assert got == [b"later"]
        finally:
            consumer.close()


@pytest.mark.parametrize("verifying", [True, False], ids=["verifying-broker", "other-broker"])
def test_batches_ride_behind_add_partitions_only_to_a_broker_that_verifies(broker, topic_name, monkeypatch,
                                                                           verifying):
    import odradek.client.transaction_manager as transaction_manager
    from odradek.client.sender import Sender

    rode = []  # per batch sent: whether it left before its partition's AddPartitionsToTxn was answered
    send_group = Sender._send_group
    monkeypatch.setattr(Sender, "_send_group", lambda self, node, batches: (
        rode.extend(b.rode_behind_add for b in batches), send_group(self, node, batches))[1])
    if not verifying:  # as against Apache Kafka, which lists no such feature
        monkeypatch.setattr(transaction_manager, "TRANSACTION_VERIFICATION", "no.such.feature")
    create(broker.bootstrap, topic_name, partitions=3)
    with Producer(broker.bootstrap, transactional_id=f"{topic_name}-tid", linger_ms=0) as producer:
        producer.init_transactions()
        for n in range(20):
            producer.begin_transaction()
            for p in range(3):
                producer.send(topic_name, b"%d-%d" % (n, p), partition=p)
            producer.commit_transaction()
    assert any(rode) if verifying else not any(rode)
    assert len(rode) >= 60
    expected = sorted((p, n, b"%d-%d" % (n, p)) for n in range(20) for p in range(3))
    got = odradek_values(broker.bootstrap, topic_name, 3)  # (partition, offset, value), committed only
    assert sorted((p, int(v.split(b"-")[0]), v) for p, _, v in got) == expected
