"""Offsets sent to a transaction survive the failure of the group's coordinator.

confluent-kafka's transactional producer sends a group's offsets to its open transaction
(``send_offsets_to_transaction``: AddOffsetsToTxn, then TxnOffsetCommit to the group
coordinator, the leader of the group's ``__consumer_offsets`` partition: one partition here,
three replicas). They are pending there. The coordinator's broker is killed before the commit;
another replica becomes leader and loads the partition, replaying the transactional offset
batch: the offsets are pending again (OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT). The producer's commit then writes the markers, the one for
``__consumer_offsets`` to the new leader, and the group's offsets are the ones sent.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.server.cluster.cluster_clients import create_topic
from tests.server.cluster.harness import SESSION_TIMEOUT_MS, wait_until
from tests.server.group_wire import WireClient, module

pytestmark = pytest.mark.timeout(180)

BROKERS = [1, 2, 3]
SOURCE, SINK = "payments-in", "payments-out"
GROUP, TID = "payments-ctp", "payments-ctp-writer"
OFFSETS = "__consumer_offsets"
PROPS = {"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3",
         "transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "3",
         "transaction.state.log.min.isr": "2"}
OF = module("OffsetFetchRequest")


def stable_offsets(port: int) -> dict[int, object]:
    """The group's offsets of SOURCE as the broker on ``port`` answers OffsetFetch v7 with
    require_stable: ``{partition: offset or error name}`` (a group error: its name)."""
    with WireClient(port) as c:
        r = c.call(ApiKey.OFFSET_FETCH, 7, group_id=GROUP, require_stable=True,
                   topics=[OF.OffsetFetchRequestTopic(name=SOURCE, partition_indexes=[0, 1])])
    if r.error_code != E.NONE:
        return E(r.error_code).name
    return {p.partition_index: (E(p.error_code).name if p.error_code else p.committed_offset)
            for t in r.topics for p in t.partitions}


def test_pending_transactional_offsets_survive_group_coordinator_failover(make_cluster):
    cluster = make_cluster(PROPS).start(BROKERS)
    for topic in (SOURCE, SINK):
        create_topic(cluster.bootstrap, topic, 2, 3)
        cluster.wait_topic_ready(topic, 2)
    # The group's metadata for send_offsets_to_transaction (a consumer that never joins: generation -1).
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": TID, "acks": "all"})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(SINK, value=b"out-%d" % i, partition=i % 2)
    sent = {0: 17, 1: 23}
    producer.send_offsets_to_transaction([TopicPartition(SOURCE, p, o) for p, o in sent.items()],
                                         consumer.consumer_group_metadata(), 60)
    assert producer.flush(30) == 0

    cluster.wait_for_isr(OFFSETS, 0, BROKERS, timeout=30)
    coordinator = cluster.leader(OFFSETS, 0)
    assert stable_offsets(cluster[coordinator].port) == {0: "UNSTABLE_OFFSET_COMMIT", 1: "UNSTABLE_OFFSET_COMMIT"}
    cluster[coordinator].kill()
    successor = cluster.wait_for_leader(OFFSETS, 0, other_than=coordinator, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
    port = cluster[successor].port
    wait_until(lambda: stable_offsets(port) == {0: "UNSTABLE_OFFSET_COMMIT", 1: "UNSTABLE_OFFSET_COMMIT"}, 30,
               "the new coordinator to load the pending offsets")

    producer.commit_transaction(60)
    wait_until(lambda: stable_offsets(port) == sent, 30, "the commit marker to make the offsets committed")
    live = ",".join(cluster[b].bootstrap for b in cluster.live_ids())
    reader = KafkaConsumer(bootstrap_servers=live, group_id=GROUP, enable_auto_commit=False)
    try:
        assert {p: reader.committed(KpTopicPartition(SOURCE, p)) for p in sent} == sent
    finally:
        reader.close()
        consumer.close()
