"""Transactions survive the failure of their coordinator.

A transactional id's coordinator is the leader of its ``__transaction_state`` partition (one
partition here, three replicas, min.isr 2). confluent-kafka commits one transaction, opens a
second and writes into it; the coordinator's broker is killed mid-transaction. The controller
makes another replica leader; its broker replays the partition, finds the transaction Ongoing
with its partitions, and becomes the coordinator. The producer's commit then goes to the new
coordinator, which writes the markers: read_committed consumers see both transactions whole.
A third transaction is left open and its producer abandoned; a new producer of the same id,
on the survivors, fences it: its records never become visible.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tests.server.cluster.cluster_clients import create_topic
from tests.server.cluster.harness import SESSION_TIMEOUT_MS
from tests.server.txn_clients import confluent_values, kafka_python_values, values_only

pytestmark = pytest.mark.timeout(180)

BROKERS = [1, 2, 3]
TOPIC = "ledger"
TXN_STATE = "__transaction_state"
TID = "ledger-writer"
PROPS = {"transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "3",
         "transaction.state.log.min.isr": "2", "offsets.topic.replication.factor": "3"}


def _produce(producer: Producer, tag: str, n: int) -> list[bytes]:
    values = [b"%s-%d" % (tag.encode(), i) for i in range(n)]
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value, partition=i % 2)
    assert producer.flush(30) == 0
    return values


def test_transactions_survive_coordinator_failover(make_cluster):
    cluster = make_cluster(PROPS).start(BROKERS)
    create_topic(cluster.bootstrap, TOPIC, 2, 3)
    cluster.wait_topic_ready(TOPIC, 2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": TID, "acks": "all"})
    producer.init_transactions(60)
    producer.begin_transaction()
    first = _produce(producer, "first", 10)
    producer.commit_transaction(60)

    cluster.wait_for_isr(TXN_STATE, 0, BROKERS, timeout=30)
    coordinator = cluster.leader(TXN_STATE, 0)
    producer.begin_transaction()
    second = _produce(producer, "second", 10)
    cluster[coordinator].kill()
    successor = cluster.wait_for_leader(TXN_STATE, 0, other_than=coordinator, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
    producer.commit_transaction(60)  # librdkafka finds the new coordinator and retries

    live = ",".join(cluster[b].bootstrap for b in cluster.live_ids())
    producer.begin_transaction()
    _produce(producer, "abandoned", 6)
    successor_producer = Producer({"bootstrap.servers": live, "transactional.id": TID})
    successor_producer.init_transactions(60)  # fences the abandoned transaction
    successor_producer.begin_transaction()
    third = _produce(successor_producer, "third", 4)
    successor_producer.commit_transaction(60)

    committed = sorted(first + second + third)
    assert values_only(confluent_values(live, TOPIC, 2)) == committed
    assert values_only(kafka_python_values(live, TOPIC, 2)) == committed
    assert len(kafka_python_values(live, TOPIC, 2, "read_uncommitted")) == len(committed) + 6
    assert cluster.leader(TXN_STATE, 0) == successor
