"""A failed log directory on a real cluster: broker 1 keeps its logs in two directories, the
second on an ext4 filesystem the test shuts down (``tests/storage/failing_filesystem.py``: every
operation on it then answers EIO, as on a dead disk; root only).

Broker 1 leads all four partitions of a topic with three replicas; two of them live in each of
its directories. Under a verifying acks=all producer, the filesystem fails: the partitions in
that directory get other leaders (the controller hears of the failure through
``/log_dir_event_notification`` and counts those replicas offline), broker 1 leaves their ISR,
the other directory's partitions stay led by broker 1 with their full ISR, nothing
acknowledged is lost, ``odradek log-dirs --describe`` shows the failed directory with
Kafka's KafkaStorageException, and Metadata (``odradek topics --describe``) lists broker 1 in
the ``offline_replicas`` of the failed directory's partitions only (from the controller's
UpdateMetadata: broker 1 itself is alive)."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import run_cli
from tests.server.cluster.cluster_clients import VerifyingProducer
from tests.server.cluster.harness import SESSION_TIMEOUT_MS, wait_until
from tests.storage.failing_filesystem import failing_fs  # noqa: F401 (the fixture)

pytestmark = pytest.mark.timeout(150)

TOPIC = "disks"
PARTITIONS = 4
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 15


def log_dirs(bootstrap: str, broker: int) -> dict[str, dict]:
    """``odradek log-dirs --describe`` of one broker: ``{log_dir: {"error": ..., "partitions": [...]}}``."""
    result = run_cli("log-dirs", "--bootstrap-server", bootstrap, "--describe", "--broker-list", str(broker),
                     "--topic-list", TOPIC)
    assert result.code == 0, result.err
    assert result.lines()[:2] == ["Querying brokers for log directories information",
                                  f"Received log directory information from brokers {broker}"]
    [entry] = json.loads(result.lines()[2])["brokers"]
    return {d["logDir"]: {"error": d["error"], "partitions": sorted(int(p["partition"].rsplit("-", 1)[1])
                                                                    for p in d["partitions"])}
            for d in entry["logDirs"]}


def offline_replicas(bootstrap: str) -> dict[int, list[int]]:
    """Metadata's ``offline_replicas`` per partition, through odradek's admin client."""
    result = run_cli("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", TOPIC,
                     "--output", "json")
    assert result.code == 0, result.err
    [topic] = [json.loads(line) for line in result.lines()]
    return {p["partition"]: p["offline_replicas"] for p in topic["partitions"]}


def test_a_failed_log_dir_moves_only_its_partitions(make_cluster, failing_fs):  # noqa: F811
    cluster = make_cluster()
    good = cluster.directory / "broker-1" / "data"  # the node's own data dir: the harness reads replicas there
    cluster.start([1], {"log.dirs": f"{good},{failing_fs.path / 'data'}"}, controller=False)
    cluster.start([2, 3])
    cluster.wait_brokers_known([1, 2, 3])
    text = ",".join(["1:2:3"] * PARTITIONS)
    created = run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", TOPIC,
                      "--replica-assignment", text, "--config", "min.insync.replicas=2")
    assert created.code == 0, created.err
    cluster.wait_topic_ready(TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, p, [1, 2, 3])
    dirs = log_dirs(cluster.bootstrap, 1)
    failing = str(failing_fs.path / "data")
    assert set(dirs) == {str(good), failing}
    on_failing = dirs[failing]["partitions"]
    on_good = dirs[str(good)]["partitions"]
    # new partitions go to the directory with fewest: two each
    assert (len(on_failing), len(on_good), sorted(on_failing + on_good)) == (2, 2, list(range(PARTITIONS)))

    with VerifyingProducer(cluster.bootstrap, TOPIC, PARTITIONS) as producer:
        producer.wait_acked(40)
        failing_fs.fail()
        for p in on_failing:
            cluster.wait_for_leader(TOPIC, p, other_than=1, timeout=FAILOVER_S)
            cluster.wait_for_isr(TOPIC, p, [2, 3])
        before = producer.acked_count()
        producer.wait_acked(before + 80, timeout=FAILOVER_S)
        for p in on_good:
            assert cluster.leader(TOPIC, p) == 1
            # (waited for, not read once: a loaded machine may stall a broker past
            # replica.lag.time.max.ms, and the ISR then shrinks and grows back)
            cluster.wait_for_isr(TOPIC, p, [1, 2, 3])
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    producer.verify(cluster.bootstrap)

    dirs = log_dirs(cluster.bootstrap, 1)
    assert dirs[failing] == {"error": "org.apache.kafka.common.errors.KafkaStorageException", "partitions": []}
    assert dirs[str(good)] == {"error": None, "partitions": on_good}
    assert cluster[1].alive  # one directory left: the broker serves on
    expected = {p: [1] if p in on_failing else [] for p in range(PARTITIONS)}
    wait_until(lambda: offline_replicas(cluster.bootstrap) == expected, 30,
               "broker 1 offline for the failed directory's partitions in Metadata")
    for p in on_good:
        cluster.wait_replicas_identical(TOPIC, p, [1, 2, 3], timeout=30)
