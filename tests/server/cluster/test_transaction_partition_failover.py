"""Transactions survive the failure of a data partition's leader.

One partition, three replicas, min.isr 2. confluent-kafka aborts a transaction, commits one,
then opens a third and writes into it (acks=all: the followers have its records). The
partition's leader is killed mid-transaction. The new leader learned everything from
replication alone (``follower_append`` replays each batch into its producer state and writes
the aborted transaction to its own ``.txnindex``): its LSO stops at the open transaction,
read_committed consumers see only the committed one, never the aborted one; the commit of the
third transaction then lands on it and makes it visible whole.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.server.cluster.cluster_clients import create_topic
from tests.server.cluster.harness import SESSION_TIMEOUT_MS, wait_until
from tests.server.txn_clients import confluent_values, kafka_python_values, values_only

pytestmark = pytest.mark.timeout(180)

BROKERS = [1, 2, 3]
TOPIC = "txn-data"
PROPS = {"transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "3",
         "transaction.state.log.min.isr": "2", "offsets.topic.replication.factor": "3",
         "min.insync.replicas": "2"}


def _produce(producer: Producer, tag: str, n: int) -> list[bytes]:
    values = [b"%s-%d" % (tag.encode(), i) for i in range(n)]
    for value in values:
        producer.produce(TOPIC, value=value, partition=0)
    assert producer.flush(30) == 0
    return values


def _read_committed_end(bootstrap: str) -> int:
    """The partition's end at read_committed (its LSO). Right after a failover librdkafka may
    give up on the look-up at once (Local: Unknown partition, seen once in a fresh-clone run)
    while the new leader is being announced: asked again until it answers."""

    def ask() -> int | None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso-probe",
                             "isolation.level": "read_committed"})
        try:
            return consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=20, cached=False)[1]
        except KafkaException as e:
            if e.args[0].code() != KafkaError._UNKNOWN_PARTITION:
                raise
            return None
        finally:
            consumer.close()

    return wait_until(ask, 30, "the read_committed end offset")


def test_a_new_partition_leader_knows_open_and_aborted_transactions(make_cluster):
    cluster = make_cluster(PROPS).start(BROKERS)
    create_topic(cluster.bootstrap, TOPIC, 1, 3)
    cluster.wait_topic_ready(TOPIC, 1)
    cluster.wait_for_isr(TOPIC, 0, BROKERS, timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "failover-writer",
                         "acks": "all"})
    producer.init_transactions(60)
    producer.begin_transaction()
    _produce(producer, "aborted", 5)  # offsets 0-4, marker 5
    producer.abort_transaction(60)
    producer.begin_transaction()
    committed = _produce(producer, "committed", 5)  # 6-10, marker 11
    producer.commit_transaction(60)
    producer.begin_transaction()
    last = _produce(producer, "open", 5)  # 12-16, replicated (acks=all, min.isr 2)
    cluster.wait_for_isr(TOPIC, 0, BROKERS, timeout=30)

    leader = cluster.leader(TOPIC, 0)
    cluster[leader].kill()
    successor = cluster.wait_for_leader(TOPIC, 0, other_than=leader, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
    live = ",".join(cluster[b].bootstrap for b in cluster.live_ids())
    assert _read_committed_end(live) == 12  # the LSO: the open transaction's first offset
    assert values_only(kafka_python_values(live, TOPIC, 1)) == sorted(committed)

    producer.commit_transaction(60)  # its markers go to the new leader
    assert values_only(confluent_values(live, TOPIC, 1)) == sorted(committed + last)
    assert values_only(kafka_python_values(live, TOPIC, 1)) == sorted(committed + last)
    assert len(kafka_python_values(live, TOPIC, 1, "read_uncommitted")) == 15
    assert cluster.leader(TOPIC, 0) == successor
