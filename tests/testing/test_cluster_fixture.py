"""The ``odradek_cluster`` fixture of odradek's pytest plugin: a failover test as a user would
write it (kill a partition's leader, read from the new one, bring the broker back), the
fault helpers, and, in a pytest run of its own, the marker, the clean-up and the failure
report."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from odradek.server.local_cluster.local_cluster import wait_until

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(120)

TOPIC = "failover"
RECORDS = 40


def _create_and_fill(bootstrap: str, replication: int) -> list[bytes]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, replication)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
    values = [f"v{i}".encode() for i in range(RECORDS)]
    for value in values:
        producer.send(TOPIC, value, partition=0)
    producer.flush(30)
    producer.close()
    return values


def _read(bootstrap: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == RECORDS:
                break
        return got
    finally:
        consumer.close()


@pytest.mark.odradek_cluster_config(brokers=3, min_insync_replicas=2)
def test_records_survive_the_leaders_kill_and_the_broker_comes_back(odradek_cluster):
    cluster = odradek_cluster
    assert cluster.registered_ids() == [1, 2, 3]
    assert cluster.controller_id() in (1, 2, 3)
    values = _create_and_fill(cluster.bootstrap, 3)
    leader = cluster.wait_for_leader(TOPIC, 0)
    assert sorted(cluster.partition_state(TOPIC, 0)["isr"]) == [1, 2, 3]

    cluster.kill(leader)
    new_leader = cluster.wait_for_leader(TOPIC, 0, other_than=leader)
    assert new_leader != leader and not cluster[leader].alive
    assert _read(cluster.bootstrap) == values

    cluster.restart(leader)
    wait_until(lambda: leader in cluster.partition_state(TOPIC, 0)["isr"], 30, f"broker {leader} back in the ISR")
    assert cluster[leader].starts == 2


@pytest.mark.odradek_cluster_config(brokers=2)
def test_pause_resume_and_a_controlled_shutdown_of_the_controller(odradek_cluster):
    cluster = odradek_cluster
    assert sorted(cluster.nodes) == [1, 2]
    controller = cluster.controller_id()
    other = 3 - controller
    cluster.pause(other)
    wait_until(lambda: other not in cluster.registered_ids(), 20, f"broker {other}'s session to end")
    cluster.resume(other)
    wait_until(lambda: other in cluster.registered_ids(), 20, f"broker {other} to register again")

    assert cluster.terminate(controller) == 0
    assert cluster.wait_for_controller(other_than=controller) == other
    cluster.restart(controller)
    assert cluster.registered_ids() == [1, 2]


def test_the_marker_sets_the_size_and_every_process_ends_with_the_test(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.odradek_cluster_config(brokers=1, num_partitions=4)
        def test_one_broker(odradek_cluster):
            assert list(odradek_cluster.nodes) == [1]
            assert "num.partitions=4" in " ".join(f"{k}={v}" for k, v in odradek_cluster[1].props.items())
            with open("pids", "w") as f:
                f.write(f"{odradek_cluster[1].pid} {odradek_cluster.zookeeper.process.pid}")

        @pytest.mark.odradek_cluster_config(brokers=1)
        def test_failing(odradek_cluster):
            assert odradek_cluster.controller_id() == 2
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*odradek broker 1 output (tail)*"])
    broker_pid, zookeeper_pid = map(int, (pytester.path / "pids").read_text().split())
    assert not _running(broker_pid) and not _running(zookeeper_pid)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
