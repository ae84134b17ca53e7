"""The synchronous wrappers: the same clients driven from plain threads."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from odradek.client import (
    AdminClient,
    BufferFullError,
    ClientClosedError,
    Consumer,
    ConsumerRecord,
    NewTopic,
    Producer,
    RecordMetadata,
    TopicPartition,
)
from odradek.client.sync import EventLoopThread
from odradek.protocol.generated import ApiKey
from tests.client.fake_broker import FakeBroker, metadata_response


def test_produce_and_consume_synchronously(broker, topic_name):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 2, 1)])
        assert topic_name in admin.list_topics()
    delivered = []
    with Producer(broker.bootstrap, linger_ms=2) as producer:
        futures = [producer.send(topic_name, b"v%d" % i, key=b"k%d" % i, headers={"h": "x"},
                                 callback=lambda md, exc: delivered.append(md))
                   for i in range(100)]
        assert all(isinstance(f, concurrent.futures.Future) for f in futures)
        producer.flush()
        assert all(f.done() for f in futures)
        assert producer.partitions_for(topic_name) == [0, 1]
    results = [f.result() for f in futures]
    assert all(isinstance(r, RecordMetadata) for r in results) and len(delivered) == 100
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
        got = []
        for record in consumer:
            got.append(record)
            if len(got) == 100:
                break
        assert all(isinstance(r, ConsumerRecord) for r in got)
        assert {(r.partition, r.offset) for r in got} == {(m.partition, m.offset) for m in results}
        assert {r.headers for r in got} == {(("h", b"x"),)}
        consumer.seek((topic_name, 0), 0)
        polled = consumer.poll(5000, max_records=3)
        assert [r.offset for r in polled[TopicPartition(topic_name, 0)]] == [0, 1, 2]
        assert consumer.position((topic_name, 0)) == 3
        assert consumer.end_offsets([(topic_name, 1)])[TopicPartition(topic_name, 1)] == \
            sum(1 for r in results if r.partition == 1)
        consumer.pause((topic_name, 0))
        assert consumer.paused() == {TopicPartition(topic_name, 0)}


def test_sync_poll_of_a_partition_that_does_not_exist_returns_empty(broker, topic_name):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", default_api_timeout_ms=1000) as consumer:
        consumer.assign([TopicPartition(topic_name, 3)])
        assert consumer.poll(timeout_ms=300) == {}  # was KafkaTimeoutError("no leader ...")


def test_send_from_many_threads(broker, topic_name):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    with Producer(broker.bootstrap) as producer:
        futures = []
        lock = threading.Lock()

        def work(t):
            mine = [producer.send(topic_name, b"%d-%d" % (t, i)) for i in range(500)]
            with lock:
                futures.extend(mine)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        producer.flush()
    assert sorted(f.result().offset for f in futures) == list(range(2000))


def test_send_blocks_when_the_buffer_is_full_then_gives_up():
    # A broker that takes Produce requests and never answers: the buffer stays full.
    def handler(fake, header, body):
        if header.request_api_key == ApiKey.METADATA:
            return metadata_response([fake], {"t": [1]})
        return None

    loop = EventLoopThread("fake-broker")
    fake = loop.run(FakeBroker(1, handler).start())
    producer = Producer(fake.bootstrap, batch_size=1000, buffer_memory=2000, max_block_ms=300, linger_ms=0,
                        enable_idempotence=False)
    try:
        sent = []
        with pytest.raises(BufferFullError):
            for _ in range(100):
                sent.append(producer.send("t", b"x" * 100))
        assert 10 <= len(sent) < 100
    finally:
        producer.close(timeout=0.5)
        loop.run(fake.close())
        loop.stop()
    assert all(isinstance(f.exception(), ClientClosedError) for f in sent)  # never delivered
    with pytest.raises(ClientClosedError):
        producer.send("t", b"late")


def test_iteration_ends_after_consumer_timeout_ms_and_can_start_again(broker, topic_name):
    """kafka-python's ``consumer_timeout_ms``: the loop ends once no record came for that
    long; iterating again picks up records produced since."""
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    with Producer(broker.bootstrap) as producer, \
            Consumer(broker.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=300) as consumer:
        producer.send(topic_name, b"first").result()
        consumer.assign([TopicPartition(topic_name, 0)])
        assert [r.value for r in consumer] == [b"first"]
        producer.send(topic_name, b"second").result()
        assert [r.value for r in consumer] == [b"second"]
