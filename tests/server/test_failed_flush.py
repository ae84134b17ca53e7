"""A produce waiting on a failed fsync: one broker with two log directories and a topic with
``flush.messages=1`` (each acks=all produce is answered only once fsynced, by the group
commit); the second directory's fsync then answers EIO (``tests/storage/failing_fsync.py``;
writes still succeed). The produce waiting on it answers KAFKA_STORAGE_ERROR, never NONE (its
data may not be on disk); the directory goes offline, the controller hears of it (the
partition loses its only replica's leadership) and the other directory's partition serves on."""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import InProcessBroker
from tests.server.clients import wait_until
from tests.server.wire import WireClient, simple_batch
from tests.storage.failing_fsync import failing_fsync  # noqa: F401 (the fixture)

TOPIC = "durable"


def produce_all(client, batches: dict[int, list[bytes]]) -> dict[int, tuple[int, int]]:
    """One acks=all Produce (v8) with a batch per partition; ``{partition: (error, base)}``."""
    m = codec.module("ProduceRequest")
    body = m.MESSAGE(acks=-1, timeout_ms=5000, topic_data=[m.TopicProduceData(name=TOPIC, partition_data=[
        m.PartitionProduceData(index=p, records=simple_batch(values)) for p, values in batches.items()])])
    _, response = client.request("Produce", 8, body)
    return {r.index: (r.error_code, r.base_offset) for r in response.responses[0].partition_responses}


@pytest.fixture
def broker(tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"  # the metadata store lives in the first
    with InProcessBroker(None, log_dirs=f"{good},{bad}") as b:
        b.good, b.bad = str(good), str(bad)
        yield b


def test_a_produce_waiting_on_a_failed_fsync_answers_storage_error(broker, failing_fsync):  # noqa: F811
    b = broker
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    admin.create_topics([NewTopic(TOPIC, 2, 1, topic_configs={"flush.messages": "1"})])
    admin.close()
    client = WireClient(b.bootstrap)
    wait_until(lambda: produce_all(client, {0: [b"a"], 1: [b"a"]}) == {0: (0, 0), 1: (0, 0)}, 10,
               what="both partitions led")
    dirs = b.call(lambda: [b.broker.log_manager.log_dir_of(TOPIC, p) for p in range(2)])
    assert dirs == [b.good, b.bad]  # new partitions go to the emptier directory in turn

    failing_fsync.fail(b.bad)
    answers = produce_all(client, {0: [b"b"], 1: [b"b"]})
    assert answers == {0: (0, 1), 1: (ErrorCode.KAFKA_STORAGE_ERROR, -1)}
    assert failing_fsync.failed >= 1
    wait_until(lambda: b.call(lambda: b.broker.log_manager.log_dirs) == [b.good], 10, what="the bad dir offline")
    assert produce_all(client, {1: [b"c"], 0: [b"c"]}) == {1: (ErrorCode.KAFKA_STORAGE_ERROR, -1), 0: (0, 2)}

    def leaderless() -> bool:
        state = b.call(b.broker.metadata_image).partition_state(TOPIC, 1)
        return state is not None and state.leader == -1

    wait_until(leaderless, 15, what="partition 1 without a leader (the controller was told)")
    assert produce_all(client, {0: [b"d"]}) == {0: (0, 3)}
    assert b.call(lambda: b.broker.log_manager.get_log(TOPIC, 0).recovery_point) == 4
    client.close()
