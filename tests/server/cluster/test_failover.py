"""Failover under an idempotent ``acks=all`` producer: no acknowledged record lost or doubled.

Three brokers, a topic of two partitions with three replicas each. A `VerifyingProducer` keeps
writing while a broker is killed (kill -9), or paused past its ZooKeeper session (SIGSTOP) and
resumed. Kafka's guarantees checked afterwards:

- the controller moves leadership to an in-sync replica within about a session timeout, and
  the producer makes progress again;
- every acknowledged record is present exactly once, at its acknowledged offset, in order;
- the failed broker, back (restarted with its data, or resumed), is fenced: it becomes a
  follower, truncates whatever it had that the new leader does not, catches up and rejoins
  the ISR, after which all replicas hold the same bytes.
"""

from __future__ import annotations

import time

import pytest

from tests.server.cluster.cluster_clients import VerifyingProducer, create_topic, metadata_from
from tests.server.cluster.harness import SESSION_TIMEOUT_MS, wait_until

pytestmark = pytest.mark.timeout(180)

BROKERS = [1, 2, 3]
TOPIC = "failover"
PARTITIONS = 2
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 10


def start(make_cluster):
    cluster = make_cluster().start(BROKERS)
    create_topic(cluster.bootstrap, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    cluster.wait_topic_ready(TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, p, BROKERS)
    return cluster


def check_after(cluster, producer: VerifyingProducer) -> None:
    """The victim is back: it rejoins every ISR, replicas are identical, nothing acknowledged
    is lost or doubled."""
    producer.stop()
    for p in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, p, BROKERS, timeout=30)
    producer.verify(cluster.bootstrap)
    for p in range(PARTITIONS):
        cluster.wait_replicas_identical(TOPIC, p, BROKERS, timeout=30)
    assert producer.acked_count() > 0


def kill_and_restart(cluster, producer: VerifyingProducer, victim: int, while_down=None) -> None:
    led = [p for p in range(PARTITIONS) if cluster.leader(TOPIC, p) == victim]
    before = producer.acked_count()
    cluster[victim].kill()
    for p in led:
        cluster.wait_for_leader(TOPIC, p, other_than=victim, timeout=FAILOVER_S)
    producer.wait_acked(before + 50, timeout=FAILOVER_S)
    if while_down is not None:
        while_down(cluster, victim)
    cluster.restart(victim)
    producer.wait_acked(producer.acked_count() + 50, timeout=20)


def test_kill_a_partition_leader(make_cluster):
    cluster = start(make_cluster)
    controller = cluster.controller_id()
    # A leader that is not the controller: the controller sees its session end.
    victim = next((cluster.leader(TOPIC, p) for p in range(PARTITIONS) if cluster.leader(TOPIC, p) != controller),
                  None)
    if victim is None:
        victim = next(b for b in BROKERS if b != controller)
    with VerifyingProducer(cluster.bootstrap, TOPIC, PARTITIONS) as producer:
        producer.wait_acked(100)
        kill_and_restart(cluster, producer, victim, while_down=metadata_names_it_offline)
    check_after(cluster, producer)


def metadata_names_it_offline(cluster, victim: int) -> None:
    """While a broker is down, every live broker's Metadata leaves it out of the brokers and
    lists it among each partition's offline replicas (and out of the ISR)."""
    for broker_id in cluster.live_ids():
        def shown() -> bool:
            meta = metadata_from(cluster[broker_id].bootstrap, [TOPIC])
            parts = meta.topics[0].partitions
            return (victim not in [b.node_id for b in meta.brokers] and len(parts) == PARTITIONS
                    and all(p.offline_replicas == [victim] and victim not in p.isr_nodes
                            and p.leader_id != victim for p in parts))

        wait_until(shown, 15, f"broker {broker_id}'s Metadata to show broker {victim} offline")


def test_kill_the_controller(make_cluster):
    cluster = start(make_cluster)
    victim = cluster.controller_id()
    epoch = cluster.controller_epoch()
    with VerifyingProducer(cluster.bootstrap, TOPIC, PARTITIONS) as producer:
        producer.wait_acked(100)
        kill_and_restart(cluster, producer, victim)
        assert cluster.controller_id() != victim and cluster.controller_epoch() > epoch
    check_after(cluster, producer)


def test_a_leader_paused_past_its_session_is_fenced_and_rejoins(make_cluster):
    cluster = start(make_cluster)
    victim = cluster.leader(TOPIC, 0)
    old_epoch = cluster.partition_state(TOPIC, 0)["leader_epoch"]
    with VerifyingProducer(cluster.bootstrap, TOPIC, PARTITIONS) as producer:
        producer.wait_acked(100)
        before = producer.acked_count()
        cluster[victim].pause()
        new_leader = cluster.wait_for_leader(TOPIC, 0, other_than=victim, timeout=FAILOVER_S)
        assert cluster.partition_state(TOPIC, 0)["leader_epoch"] > old_epoch
        producer.wait_acked(before + 50, timeout=FAILOVER_S)
        cluster.wait_unregistered(victim, timeout=5)
        cluster[victim].resume()
        # Resumed, it learns its session is gone, registers again and follows the new leader.
        cluster.wait_registered(victim, timeout=30)
        producer.wait_acked(producer.acked_count() + 50, timeout=20)
        assert cluster.leader(TOPIC, 0) == new_leader
    check_after(cluster, producer)


def test_a_divergent_follower_truncates_to_the_new_leader(make_cluster):
    """The classic divergence: records the old leader appended (acks=1) that no follower has
    when it dies. Its successor writes other records at the same offsets in a newer epoch;
    the old leader, restarted, truncates its tail (OffsetForLeaderEpoch) and copies the new
    leader's, so both logs end up byte-identical and the acks=1 records are gone."""
    from confluent_kafka import Producer

    # A follower paused for a moment must stay in the ISR: a long replica.lag.time.max.ms.
    cluster = make_cluster({"replica.lag.time.max.ms": "20000"}).start([1, 2])
    create_topic(cluster.bootstrap, "diverge", 1, 2, {"min.insync.replicas": "1"})
    cluster.wait_topic_ready("diverge", 1)
    cluster.wait_for_isr("diverge", 0, [1, 2])
    old_leader = cluster.leader("diverge", 0)
    follower = 3 - old_leader

    def produce(bootstrap: str, values: list[bytes], acks: str) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                             "message.timeout.ms": 20000})
        errors = []
        for v in values:
            producer.produce("diverge", value=v, partition=0, on_delivery=lambda err, _m: err and errors.append(err))
        assert producer.flush(30) == 0 and not errors, errors

    produce(cluster.bootstrap, [b"common-%d" % i for i in range(20)], "all")
    cluster.wait_replicas_identical("diverge", 0, [1, 2])

    cluster[follower].pause()
    # Let the follower's outstanding fetch expire empty (replica.fetch.wait.max.ms), so the
    # leader has no fetch to answer with the next records.
    time.sleep(1)
    produce(cluster[old_leader].bootstrap, [b"lost-%d" % i for i in range(10)], "1")
    cluster[old_leader].kill()
    cluster[follower].resume()
    assert cluster.wait_for_leader("diverge", 0, other_than=old_leader, timeout=FAILOVER_S) == follower

    produce(cluster[follower].bootstrap, [b"new-%d" % i for i in range(15)], "all")
    cluster.restart(old_leader)
    cluster.wait_for_isr("diverge", 0, [1, 2], timeout=30)
    data = cluster.wait_replicas_identical("diverge", 0, [1, 2], timeout=30)
    assert b"lost-" not in data and b"new-14" in data and b"common-0" in data
