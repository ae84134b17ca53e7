"""odradek's transactional producer when its transaction coordinator dies (three brokers on
ZooKeeper, ``__transaction_state`` of one partition with three replicas).

The producer commits a transaction, opens a second and writes into it; the coordinator's
broker is killed. Its commit gets NOT_COORDINATOR or a broken connection, finds the new
coordinator (FindCoordinator again) and commits there; a prepared transaction is then ended by
its handle through the survivors. read_committed readers (odradek's and confluent-kafka's) see
exactly the committed records.
"""

from __future__ import annotations

import uuid

import pytest

from odradek.client import AdminClient, NewTopic, Producer, end_transaction
from tests.client.test_transactions import odradek_values
from tests.server.cluster.harness import SESSION_TIMEOUT_MS, Cluster
from tests.server.txn_clients import confluent_values, values_only

pytestmark = [pytest.mark.timeout(180), pytest.mark.cluster]

BROKERS = [1, 2, 3]
TOPIC = "ledger"
TXN_STATE = "__transaction_state"
PROPS = {"transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "3",
         "transaction.state.log.min.isr": "2", "offsets.topic.replication.factor": "3"}


@pytest.fixture
def cluster(zookeeper, tmp_path):
    made = Cluster(zookeeper, tmp_path / "cluster", f"/client-txn-{uuid.uuid4().hex[:10]}", PROPS)
    try:
        yield made.start(BROKERS)
    finally:
        made.close()


def produce(producer: Producer, tag: str, n: int) -> list[bytes]:
    values = [b"%s-%d" % (tag.encode(), i) for i in range(n)]
    for i, value in enumerate(values):
        producer.send(TOPIC, value, partition=i % 2)
    producer.flush()
    return values


def test_odradek_transactions_survive_their_coordinator(cluster):
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 2, 3)])
    cluster.wait_topic_ready(TOPIC, 2)
    everyone = ",".join(cluster[b].bootstrap for b in BROKERS)
    producer = Producer(everyone, transactional_id="ledger-writer", retry_backoff_max_ms=500)
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        first = produce(producer, "first", 10)
        producer.commit_transaction(60)

        cluster.wait_for_isr(TXN_STATE, 0, BROKERS, timeout=30)
        coordinator = cluster.leader(TXN_STATE, 0)
        producer.begin_transaction()
        second = produce(producer, "second", 10)
        cluster[coordinator].kill()
        cluster.wait_for_leader(TXN_STATE, 0, other_than=coordinator, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
        producer.commit_transaction(60)  # to the new coordinator

        producer.begin_transaction()
        third = produce(producer, "third", 4)
        handle = producer.prepare_transaction(60)
    finally:
        producer.close()
    live = ",".join(cluster[b].bootstrap for b in cluster.live_ids())
    end_transaction(live, handle, True)

    committed = sorted(first + second + third)
    assert values_only(odradek_values(live, TOPIC, 2)) == committed
    assert values_only(confluent_values(live, TOPIC, 2)) == committed
