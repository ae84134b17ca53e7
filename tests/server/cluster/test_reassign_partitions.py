"""Partition reassignment on a real cluster, driven by ``odradek reassign-partitions``.

A topic moves off one broker onto a new one while an idempotent acks=all producer
(librdkafka) keeps writing: no send fails, every acknowledged record is read back once at its
offset, the new replicas hold the same bytes, the old replica's directory is deleted, and
``--verify`` reports completion. A throttled move (``--throttle`` at 1 byte/s, with small
replica fetches so that the first fetch cannot copy everything) stays in progress, is
cancelled back to the old replicas (the new one deleted, the throttles cleared), then moved
through the legacy ``/admin/reassign_partitions`` znode, which the controller deletes when
the move is done. Deleting the topic during a throttled move waits for the move, as Kafka's
controller does (DeleteTopics answers REQUEST_TIMED_OUT meanwhile), and the topic goes once
the throttle is lifted and the move completes.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka import KafkaProducer

from odradek.cli.main import main as odradek
from odradek.client import AdminClient, AlterConfigOp, AlterConfigOpType, ConfigResource, NewTopic, ResourceType
from tests.server.cluster.cluster_clients import VerifyingProducer, admin
from tests.server.cluster.harness import wait_until

pytestmark = pytest.mark.timeout(180)


def create_topic(bootstrap: str, name: str, assignment: dict, configs: dict | None = None) -> None:
    with AdminClient(bootstrap) as client:
        client.create_topics([NewTopic(name, replica_assignment=assignment, configs=configs or {})])


def cli(capsys, *argv) -> tuple[int, str]:
    """Run ``odradek reassign-partitions ARGV``; its status and what it printed."""
    status = odradek(["reassign-partitions", *argv])
    out = capsys.readouterr()
    return status, out.out + out.err


def proposal(output: str) -> dict:
    return json.loads(output.split("Proposed partition reassignment configuration\n", 1)[1].splitlines()[0])


def targets(doc: dict) -> dict[int, list[int]]:
    return {p["partition"]: p["replicas"] for p in doc["partitions"]}


def wait_dir_gone(node, topic: str, partition: int) -> None:
    wait_until(lambda: not [d for d in node.partition_dirs(topic) if d.name.split(".")[0] == f"{topic}-{partition}"],
               30, f"broker {node.broker_id}'s directory of {topic}-{partition} to be deleted")


def test_move_to_a_new_broker_under_load(make_cluster, tmp_path, capsys):
    cluster = make_cluster().start([1, 2, 3, 4])
    topic = "moving"
    create_topic(cluster.bootstrap, topic, {0: [1, 2, 3], 1: [2, 3, 1]}, {"min.insync.replicas": "2"})
    cluster.wait_topic_ready(topic, 2)
    moves = tmp_path / "topics.json"
    moves.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    status, out = cli(capsys, "--bootstrap-server", cluster.bootstrap, "--generate",
                      "--topics-to-move-json-file", str(moves), "--broker-list", "2,3,4")
    assert status == 0, out
    current = json.loads(out.split("Current partition replica assignment\n", 1)[1].splitlines()[0])
    assert targets(current) == {0: [1, 2, 3], 1: [2, 3, 1]}
    proposed = proposal(out)
    assert all(sorted(r) == [2, 3, 4] for r in targets(proposed).values()), out
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposed))

    with VerifyingProducer(cluster.bootstrap, topic, 2) as producer:
        producer.wait_acked(100)
        status, out = cli(capsys, "--bootstrap-server", cluster.bootstrap, "--execute", "--wait",
                          "--reassignment-json-file", str(plan))
        assert status == 0, out
        assert "Save this to use as the --reassignment-json-file option during rollback" in out
        assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in out
        # --wait returned once both moves were done (no progress bar: not a terminal).
        assert all(f"Reassignment of partition {topic}-{p} is completed." in out for p in (0, 1)), out
        status, out = cli(capsys, "--bootstrap-server", cluster.bootstrap, "--verify", "--wait",
                          "--reassignment-json-file", str(plan))
        assert status == 0 and f"Reassignment of partition {topic}-1 is completed." in out, out
        assert "Clearing broker-level throttles on brokers 1,2,3,4" in out
        producer.wait_acked(producer.acked_count() + 100)
    assert producer.failed == [], producer.failed[:5]
    producer.verify(cluster.bootstrap)

    assert cluster.topic_assignment(topic) == targets(proposed)
    for p, replicas in targets(proposed).items():
        assert cluster.leader(topic, p) in replicas
        cluster.wait_replicas_identical(topic, p, replicas)
        wait_dir_gone(cluster[1], topic, p)
    assert cli(capsys, "--bootstrap-server", cluster.bootstrap, "--list") == (0, "No partition reassignments found.\n")


def _throttles(bootstrap: str, topic: str) -> dict:
    """The throttle configs set on brokers 1-3 and on ``topic``."""
    resources = [ConfigResource(ResourceType.BROKER, str(b)) for b in (1, 2, 3)]
    with AdminClient(bootstrap) as client:
        described = client.describe_configs(resources + [ConfigResource(ResourceType.TOPIC, topic)])
    return {r.name: {n: e.value for n, e in entries.items() if "throttled" in n and not e.is_default}
            for r, entries in described.items()}


def test_throttled_move_cancelled_then_moved_through_the_znode_then_deleted(make_cluster, tmp_path, capsys):
    cluster = make_cluster({"replica.fetch.max.bytes": "4096"}).start([1, 2, 3])
    topic, bootstrap = "throttled", cluster.bootstrap
    create_topic(bootstrap, topic, {0: [1, 2]})
    cluster.wait_topic_ready(topic, 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", batch_size=2048, linger_ms=0)
    for i in range(100):  # ~100 KB in batches of ~2 KB: far more than one throttled fetch copies
        producer.send(topic, b"%04d" % i + b"x" * 1000, partition=0)
    producer.flush()
    producer.close()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2, 3]}]}))
    execute = ["--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", str(plan)]

    status, out = cli(capsys, *execute, "--throttle", "1")
    assert status == 0, out
    assert "The inter-broker throttle limit was set to 1 B/s" in out and "You must run --verify" in out
    assert _throttles(bootstrap, topic) == {
        "1": {"leader.replication.throttled.rate": "1", "follower.replication.throttled.rate": "1"},
        "2": {"leader.replication.throttled.rate": "1", "follower.replication.throttled.rate": "1"},
        "3": {"leader.replication.throttled.rate": "1", "follower.replication.throttled.rate": "1"},
        topic: {"leader.replication.throttled.replicas": "0:1,0:2", "follower.replication.throttled.replicas": "0:3"}}
    wait_until(lambda: cluster[3].partition_log(topic, 0), 30, "the new replica's first fetch")
    # At 1 B/s, the ~100 KB left take a day: the move stays in progress.
    assert len(cluster[3].partition_log(topic, 0)) < len(cluster[1].partition_log(topic, 0)) // 4
    status, out = cli(capsys, "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert status == 0 and f"Reassignment of partition {topic}-0 is still in progress." in out, out
    assert "Clearing" not in out
    assert cli(capsys, "--bootstrap-server", bootstrap, "--list") == (
        0, f"Current partition reassignments:\n{topic}-0: replicas: 1,2,3. adding: 3.\n")
    status, out = cli(capsys, *execute)
    assert status == 1 and "Cannot execute because there is an existing partition assignment" in out
    assert cli(capsys, *execute, "--additional", "--throttle", "2")[0] == 0  # a new rate, same move

    status, out = cli(capsys, "--bootstrap-server", bootstrap, "--cancel", "--reassignment-json-file", str(plan))
    assert status == 0, out
    assert f"Successfully cancelled partition reassignment for: {topic}-0" in out
    assert "Clearing topic-level throttles on topic throttled" in out
    assert _throttles(bootstrap, topic) == {"1": {}, "2": {}, "3": {}, topic: {}}
    assert cluster.topic_assignment(topic) == {0: [1, 2]}
    wait_dir_gone(cluster[3], topic, 0)

    # Kafka's first interface: the znode, taken off by the controller once the move is done.
    cluster.zk.create("/admin/reassign_partitions", json.dumps(
        {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 2]}]}).encode(), makepath=True)
    wait_until(lambda: not cluster.exists("/admin/reassign_partitions"), 60, "the reassignment znode to go")
    assert cluster.topic_assignment(topic) == {0: [3, 2]}
    cluster.wait_replicas_identical(topic, 0, [2, 3])
    wait_dir_gone(cluster[1], topic, 0)
    assert cluster.leader(topic, 0) in (2, 3)

    # A deletion waits for a move in progress (Kafka: ineligible while reassigning).
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 2, 1]}]}))
    assert cli(capsys, *execute, "--throttle", "1")[0] == 0
    wait_until(lambda: cluster[1].partition_log(topic, 0), 30, "the new replica's first fetch")
    confluent = admin(bootstrap)  # referenced until the result: its futures fail once it is collected
    future = confluent.delete_topics([topic], operation_timeout=1)[topic]
    with pytest.raises(KafkaException) as failed:
        future.result(30)
    assert failed.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT
    assert cluster.exists(f"/admin/delete_topics/{topic}")
    assert cluster.topic_assignment(topic) == {0: [3, 2, 1]}  # still moving, not deleted
    with AdminClient(bootstrap) as client:  # lift the throttle: the move ends, the deletion resumes
        client.incremental_alter_configs({ConfigResource(ResourceType.BROKER, str(b)): [
            AlterConfigOp(n, None, AlterConfigOpType.DELETE)
            for n in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")]
            for b in (1, 2, 3)})
    # The controller takes /brokers/topics/<t> off first, /admin/delete_topics/<t> last (as
    # Kafka's completeDeleteTopic): the deletion is done once both are gone.
    wait_until(lambda: not cluster.exists(f"/brokers/topics/{topic}") and not cluster.exists(
        f"/admin/delete_topics/{topic}"), 60, "the topic and its deletion marker to be deleted")
    for b in (1, 2, 3):
        wait_until(lambda: not cluster[b].partition_dirs(topic), 30, f"broker {b}'s replica to be deleted")
