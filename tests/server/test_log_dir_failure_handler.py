"""One broker with two log directories, the second on an ext4 filesystem the test shuts down
(``tests/storage/failing_filesystem.py``, root only): DescribeLogDirs before and after (Kafka's
answer, through kafka-python), the failed directory's partitions answering
KAFKA_STORAGE_ERROR while the other directory's keep serving, the controller told through
``/log_dir_event_notification`` (the broker's only replica of those partitions is offline:
no leader), and a broker whose every directory failed halting with status 1."""

from __future__ import annotations

import os

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from odradek.metadata import layout
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import BrokerProcess, InProcessBroker
from tests.server.clients import wait_until
from tests.server.test_full_disk import produce
from tests.server.wire import WireClient
from tests.storage.failing_filesystem import failing_fs  # noqa: F401 (the fixture)

TOPIC = "t"  # (the name tests.server.test_full_disk.produce writes to)


def create_led_topic(bootstrap: str) -> WireClient:
    """TOPIC with 4 partitions, once each took a first record at offset 0; a client to it."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, 4, 1)])
    admin.close()
    client = WireClient(bootstrap)
    wait_until(lambda: produce(client, {p: [b"x"] for p in range(4)}) == {p: (0, 0) for p in range(4)}, 10,
               what="every partition led")
    return client


def describe_log_dirs(bootstrap: str) -> dict[str, tuple[int, dict]]:
    """``{log_dir: (error_code, {(topic, partition): (size, offset_lag, is_future)})}``."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [response] = admin.describe_log_dirs()
    finally:
        admin.close()
    out = {}
    for d in response["log_dirs"]:
        out[d["log_dir"]] = (d["error_code"], {
            (t.get("name", t.get("topic")), p["partition_index"]): (p["partition_size"], p["offset_lag"],
                                                                      p["is_future_key"])
            for t in d["topics"] for p in t["partitions"]})
    return out


@pytest.fixture
def two_dir_broker(tmp_path, failing_fs):  # noqa: F811
    good = tmp_path / "good"  # first: the embedded metadata store lives in the first log dir
    with InProcessBroker(None, log_dirs=f"{good},{failing_fs.path}", num_partitions=4) as broker:
        broker.good, broker.failing = str(good), str(failing_fs.path)
        yield broker


def test_a_failed_dir_takes_only_its_partitions_offline(two_dir_broker, failing_fs):  # noqa: F811
    b = two_dir_broker
    client = create_led_topic(b.bootstrap)
    # new partitions went to the emptier directory in turn: 0 and 2 to the first, 1 and 3 to the second
    dirs = describe_log_dirs(b.bootstrap)
    assert set(dirs) == {b.good, b.failing}
    assert {d: sorted(p for _, p in parts) for d, (_, parts) in dirs.items()} == {b.good: [0, 2], b.failing: [1, 3]}
    assert all(err == 0 for err, _ in dirs.values())
    size, lag, future = dirs[b.good][1][(TOPIC, 0)]
    assert size == os.path.getsize(os.path.join(b.good, f"{TOPIC}-0", "00000000000000000000.log")) > 0
    assert (lag, future) == (0, False)

    failing_fs.fail()
    # the first write that meets the dead disk fails, and takes the directory offline
    answers = produce(client, {p: [b"y"] for p in range(4)})
    assert answers[1][0] == answers[3][0] == ErrorCode.KAFKA_STORAGE_ERROR
    assert answers[0] == (0, 1) and answers[2] == (0, 1)
    wait_until(lambda: b.call(lambda: b.broker.log_manager.log_dirs) == [b.good], 10, what="the failed dir offline")
    again = produce(client, {1: [b"z"], 0: [b"z"]})
    assert again == {1: (ErrorCode.KAFKA_STORAGE_ERROR, -1), 0: (0, 2)}
    dirs = describe_log_dirs(b.bootstrap)
    assert dirs[b.failing] == (ErrorCode.KAFKA_STORAGE_ERROR, {})
    assert sorted(p for _, p in dirs[b.good][1]) == [0, 2]

    # the controller (this broker) took the notification and counts the replica offline
    def leaderless() -> bool:
        image = b.call(b.broker.metadata_image)
        states = {p: image.partition_state(TOPIC, p) for p in range(4)}
        return [p for p, s in states.items() if s is not None and s.leader == -1] == [1, 3]

    wait_until(leaderless, 15, what="partitions 1 and 3 without a leader")
    assert b.call(lambda: b.broker.metadata.store.children(layout.LOG_DIR_EVENT_NOTIFICATION)) == []
    assert produce(client, {2: [b"w"]}) == {2: (0, 2)}


def test_the_broker_halts_when_its_last_dir_fails(tmp_path, failing_fs):  # noqa: F811
    with BrokerProcess(failing_fs.path / "data", num_partitions=1) as proc:
        bootstrap = proc.bootstrap
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        admin.close()
        client = WireClient(bootstrap)
        wait_until(lambda: produce(client, {0: [b"x"]}) == {0: (0, 0)}, 10, what="the partition led")
        failing_fs.fail()
        assert produce(client, {0: [b"y"]})[0][0] == ErrorCode.KAFKA_STORAGE_ERROR
        assert proc.proc.wait(30) == 1
        wait_until(lambda: any("have failed" in line for line in proc.output), 10, what="the reason in the output")
        assert any("Shutdown broker because all log dirs in" in line for line in proc.output)


def test_a_restart_with_a_dir_still_failed_keeps_its_partitions_offline(tmp_path):
    # The second directory replaced by a file (root ignores permission bits) cannot be used
    # at the restart: the broker starts with the first alone, as Kafka does; the partitions
    # the second held answer KAFKA_STORAGE_ERROR (LeaderAndIsr and Produce), the controller
    # elects no leader for them, and no empty log is created for them in the good directory.
    good, second = tmp_path / "good", tmp_path / "second"
    dirs = f"{good},{second}"
    with InProcessBroker(None, log_dirs=dirs, num_partitions=4) as b:
        create_led_topic(b.bootstrap)
    assert (second / f"{TOPIC}-1").is_dir() and (second / f"{TOPIC}-3").is_dir()
    second.rename(tmp_path / "second.saved")
    second.write_text("not a directory")
    with InProcessBroker(None, log_dirs=dirs, num_partitions=4) as b:
        client = WireClient(b.bootstrap)
        storage_error = (ErrorCode.KAFKA_STORAGE_ERROR, -1)
        wait_until(lambda: produce(client, {1: [b"y"], 3: [b"y"]}) == {1: storage_error, 3: storage_error}, 15,
                   what="partitions 1 and 3 offline")
        wait_until(lambda: produce(client, {0: [b"y"]}) == {0: (0, 1)}, 10, what="partition 0 led")
        assert produce(client, {2: [b"y"]}) == {2: (0, 1)}

        def leaderless() -> bool:  # the controller counts the replicas offline
            image = b.call(b.broker.metadata_image)
            return [image.partition_state(TOPIC, p).leader for p in (1, 3)] == [-1, -1]

        wait_until(leaderless, 15, what="partitions 1 and 3 without a leader")
        assert not (good / f"{TOPIC}-1").exists() and not (good / f"{TOPIC}-3").exists()
        # a new topic's replicas are new (LeaderAndIsr is_new): their logs are created
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([NewTopic("fresh", 1, 1)])
        admin.close()
        wait_until(lambda: (good / "fresh-0").is_dir() and b.call(lambda: b.broker.replica_manager.get("fresh", 0))
                   is not None, 10, what="the new topic's log")
