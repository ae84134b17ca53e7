"""A full disk: the partitions that cannot be written answer KAFKA_STORAGE_ERROR (the
request's other partitions are stored and answered), reads go on, nothing acknowledged is
lost or torn, writes resume by themselves once space returns, group lookups and offset
commits answer Kafka error codes, and a stop on a full disk ends in order.

The broker's data is on a tiny tmpfs (``full_disk``): root only, skipped elsewhere."""

import logging
import os

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.topics import AUTO_CREATE_WAIT_MS
from odradek.testing.broker import BrokerProcess, InProcessBroker
from tests.server.full_disk import TinyFilesystem, full_disk  # noqa: F401 (the fixture)
from tests.server.clients import read_from_beginning, wait_until
from tests.server.wire import WireClient, message, simple_batch

TOPIC = "t"
# Needs new pages on a full tmpfs: larger than a page, and random (no codec shrinks it).
BIG = [os.urandom(3000) for _ in range(3)]


def create(bootstrap, partitions=2, configs=None):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, partitions, 1, topic_configs=configs or {})])
    finally:
        admin.close()


def produce(client, batches: dict[int, list[bytes]], version=8):
    """One Produce request (acks=1) with a batch per partition; {partition: (error, base)}."""
    m = codec.module("ProduceRequest")
    body = m.MESSAGE(acks=1, timeout_ms=5000, topic_data=[m.TopicProduceData(name=TOPIC, partition_data=[
        m.PartitionProduceData(index=p, records=simple_batch(values)) for p, values in batches.items()])])
    _, response = client.request("Produce", version, body)
    return {r.index: (r.error_code, r.base_offset) for r in response.responses[0].partition_responses}


def read_all(bootstrap, partitions=2):
    return read_from_beginning(bootstrap, TOPIC, partitions)


def log_files_whole(broker):
    """Every partition's segment files hold exactly the log's bytes (no torn tail)."""
    logs = broker.call(lambda: broker.broker.log_manager.all_logs())
    return all(os.path.getsize(s.log_path) == s.size for log in logs.values() for s in log.segments)


@pytest.mark.parametrize("configs", [{}, {"compression.type": "uncompressed"}], ids=["fast path", "generic path"])
def test_the_full_partition_answers_storage_error_and_the_others_are_answered(full_disk, configs):  # noqa: F811
    b = full_disk
    create(b.bootstrap, configs=configs)
    client = WireClient(b.bootstrap)
    acked = []
    for p, values in {0: [b"a0", b"a1"], 1: [b"b0"]}.items():
        assert produce(client, {p: values})[p] == (0, 0)
        acked += [(p, i, v) for i, v in enumerate(values)]
    b.fs.fill()
    # Partition 1's small batch fits in the last page of its segment; partition 0's needs pages.
    answers = produce(client, {0: BIG, 1: [b"b1"]})
    assert answers == {0: (ErrorCode.KAFKA_STORAGE_ERROR, -1), 1: (0, 1)}
    acked.append((1, 1, b"b1"))
    assert log_files_whole(b)
    assert read_all(b.bootstrap) == acked  # reads go on while the disk is full
    assert produce(client, {0: BIG})[0][0] == ErrorCode.KAFKA_STORAGE_ERROR  # and the connection
    b.fs.free()
    assert produce(client, {0: BIG}) == {0: (0, 2)}  # no restart needed, no offset skipped
    acked += [(0, 2 + i, v) for i, v in enumerate(BIG)]
    assert read_all(b.bootstrap) == sorted(acked)
    client.close()
    b.restart()
    assert read_all(b.bootstrap) == sorted(acked)


# Enough partitions that creating __consumer_offsets writes more than the free tail of the
# metadata journal's last page.
@pytest.mark.parametrize("full_disk", [{"offsets_topic_num_partitions": 40}], indirect=True)
def test_group_lookup_and_offset_commit_answer_error_codes(full_disk):  # noqa: F811
    b = full_disk
    create(b.bootstrap, partitions=1)
    # (FindCoordinator waits up to AUTO_CREATE_WAIT_MS for the leaders it created)
    client = WireClient(b.bootstrap, timeout=AUTO_CREATE_WAIT_MS / 1000 + 20)
    b.fs.fill()
    # __consumer_offsets cannot be created, or its partitions get no leaders: the metadata
    # write is refused (the controller repeats its writes until they land).

    def find():
        _, found = client.request("FindCoordinator", 3, message("FindCoordinatorRequest", key="g", key_type=0))
        return found.error_code

    assert find() == ErrorCode.COORDINATOR_NOT_AVAILABLE
    b.fs.free()
    # The leaders are elected once the metadata disk has room again (the controller retries),
    # and this broker leads them once their logs are made.

    def led_here():
        part = b.broker.replica_manager.get("__consumer_offsets", b.broker.group_coordinator.partition_for("g"))
        return part is not None and part.is_leader(b.broker.broker_id)

    wait_until(lambda: find() == ErrorCode.NONE and b.call(led_here), timeout=20, what="a coordinator")
    b.fs.fill()
    m = codec.module("OffsetCommitRequest")

    def commit(offset):
        body = m.MESSAGE(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
            m.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                m.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])
        _, response = client.request("OffsetCommit", 2, body)
        return response.topics[0].partitions[0].error_code

    # Kafka's group coordinator answers a commit it could not write (KAFKA_STORAGE_ERROR)
    # with NOT_COORDINATOR, on which clients look the coordinator up again.
    assert commit(5) == ErrorCode.NOT_COORDINATOR
    b.fs.free()
    assert commit(7) == ErrorCode.NONE
    f = codec.module("OffsetFetchRequest")
    _, fetched = client.request("OffsetFetch", 2, f.MESSAGE(group_id="g", topics=[
        f.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]))
    assert fetched.topics[0].partitions[0].committed_offset == 7
    client.close()


def test_a_stop_on_a_full_disk_ends_in_order_and_loses_nothing(full_disk, caplog):  # noqa: F811
    b = full_disk
    create(b.bootstrap, partitions=1)
    client = WireClient(b.bootstrap)
    acked = []
    for i in range(5):  # with log.index.interval.bytes=0, index entries to write at the stop
        assert produce(client, {0: [b"v%d" % i]})[0] == (0, i)
        acked.append((0, i, b"v%d" % i))
    client.close()
    b.fs.fill()
    caplog.set_level(logging.INFO)
    b.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert any("stopped; its logs will be recovered at the next start" in m for m in messages), messages
    assert not any(r.exc_info for r in caplog.records)
    shutdown_errors = [m for m in messages if m.startswith("shutdown could not write")]
    assert len(shutdown_errors) == 1
    b.restart()  # still full: recovery cannot rewrite index files, the logs open anyway
    assert read_all(b.bootstrap, partitions=1) == acked
    b.fs.free()
    client = WireClient(b.bootstrap)
    assert produce(client, {0: [b"after"]})[0] == (0, 5)
    client.close()
    b.restart()
    assert read_all(b.bootstrap, partitions=1) == acked + [(0, 5, b"after")]


def test_a_topic_deleted_on_a_full_disk_never_serves_its_records_again(full_disk):  # noqa: F811
    b = full_disk
    create(b.bootstrap, partitions=3)
    client = WireClient(b.bootstrap)
    assert produce(client, {p: [b"old-%d" % p] * 3 for p in range(3)}) == {p: (0, 0) for p in range(3)}
    client.close()
    b.fs.fill()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    code = admin.delete_topics([TOPIC], raise_errors=False)["topics"][0]["error_code"]
    admin.close()
    # Deleted, or (the metadata refused the write before marking it) not deleted at all.
    assert code in (ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR)
    b.restart()  # on the full disk
    b.fs.free()
    if b.call(lambda: TOPIC in b.broker.metadata_image().topics):
        assert code == ErrorCode.KAFKA_STORAGE_ERROR
        assert read_all(b.bootstrap, partitions=3) == sorted((p, o, b"old-%d" % p) for p in range(3) for o in range(3))
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.delete_topics([TOPIC])
        admin.close()
    create(b.bootstrap, partitions=3)
    assert read_all(b.bootstrap, partitions=3) == []


def test_sigterm_on_a_full_disk_exits_0_with_one_line_on_what_was_not_written(tmp_path):
    with TinyFilesystem(tmp_path / "mnt") as fs:
        broker = BrokerProcess(os.path.join(fs.path, "data"), log_index_interval_bytes=0).start()
        try:
            create(broker.bootstrap, partitions=1)
            client = WireClient(broker.bootstrap)
            for i in range(3):
                assert produce(client, {0: [b"v%d" % i]})[0] == (0, i)
            client.close()
            fs.fill()
            assert broker.terminate() == 0  # an orderly stop: every acknowledged record is kept
        finally:
            broker.kill()
        output = "".join(broker.output)
        assert output.count("shutdown could not write") == 1, output
        assert "Traceback" not in output, output
        fs.free()
        with BrokerProcess(os.path.join(fs.path, "data")) as again:
            assert read_all(again.bootstrap, partitions=1) == [(0, i, b"v%d" % i) for i in range(3)]


def test_a_producer_retrying_through_a_full_disk_delivers_everything_once_space_returns(full_disk, caplog):  # noqa: F811
    """librdkafka retries KAFKA_STORAGE_ERROR: nothing is lost, nothing is duplicated, and
    the broker takes the writes again without a restart."""
    from confluent_kafka import Producer

    b = full_disk
    create(b.bootstrap, partitions=1)
    b.fs.fill()
    caplog.set_level(logging.ERROR, logger="odradek.broker")
    delivered, failed = [], []
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "retry.backoff.ms": 50,
                         "message.timeout.ms": 60000})

    def on_delivery(err, msg):
        (failed if err else delivered).append(err or msg.value())

    values = [b"%d-" % i + os.urandom(3000) for i in range(4)]
    for value in values:
        producer.produce(TOPIC, value=value, partition=0, on_delivery=on_delivery)

    def refused():
        producer.poll(0.05)
        return any("answered KAFKA_STORAGE_ERROR" in r.getMessage() for r in caplog.records)

    wait_until(refused, what="a produce refused for the full disk")
    assert delivered == []
    b.fs.free()
    assert producer.flush(30) == 0
    assert failed == [] and sorted(delivered) == sorted(values)
    assert sorted(v for _, _, v in read_all(b.bootstrap, partitions=1)) == sorted(values)


def test_with_two_log_dirs_only_the_full_ones_partitions_are_refused(tmp_path):
    """Kafka takes a failed log directory offline; here the partitions on the full one are
    refused write by write, and those on the other take even large batches."""
    with TinyFilesystem(tmp_path / "a") as full, TinyFilesystem(tmp_path / "b") as roomy:
        dirs = [os.path.join(full.path, "data"), os.path.join(roomy.path, "data")]
        with InProcessBroker(None, log_dirs=",".join(dirs)) as b:
            create(b.bootstrap, partitions=2)
            logs = b.call(lambda: b.broker.log_manager.all_logs())
            on_full = [p for (_, p), log in logs.items() if log.directory.startswith(full.path)]
            on_roomy = [p for (_, p), log in logs.items() if log.directory.startswith(roomy.path)]
            assert len(on_full) == len(on_roomy) == 1
            full.fill()
            client = WireClient(b.bootstrap)
            answers = produce(client, {on_full[0]: BIG, on_roomy[0]: BIG})
            assert answers == {on_full[0]: (ErrorCode.KAFKA_STORAGE_ERROR, -1), on_roomy[0]: (0, 0)}
            full.free()
            assert produce(client, {on_full[0]: BIG}) == {on_full[0]: (0, 0)}
            client.close()
            assert len(read_all(b.bootstrap)) == 2 * len(BIG)
