"""OffsetForLeaderEpoch (key 23) on one broker, in raw frames: where each leader epoch of the
partition's log ends, every version, and the errors."""

from __future__ import annotations

import pytest

from odradek.protocol import codec
from odradek.protocol.api_keys import supported_range
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import InProcessBroker
from tests.server.clients import unique_topic
from tests.server.wire import WireClient, produce_body, simple_batch

VERSIONS = range(*(lambda r: (r[0], r[1] + 1))(supported_range(ApiKey.OFFSET_FOR_LEADER_EPOCH)))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("data")) as b:
        yield b


@pytest.fixture
def wire(broker):
    client = WireClient(broker.bootstrap)
    yield client
    client.close()


def _create(wire: WireClient, name: str) -> None:
    m = codec.module("CreateTopicsRequest")
    body = m.MESSAGE(topics=[m.CreatableTopic(name=name, num_partitions=1, replication_factor=1)], timeout_ms=5000)
    _, resp = wire.request("CreateTopics", 5, body)
    assert resp.topics[0].error_code == ErrorCode.NONE, resp


def _produce(wire: WireClient, topic: str, count: int) -> None:
    _, resp = wire.request("Produce", 8, produce_body(topic, 0, simple_batch([b"v"] * count)))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def _ask(wire: WireClient, topic: str, epoch: int, version: int = 4, current: int = -1, partition: int = 0,
         replica_id: int = -1):
    m = codec.module("OffsetForLeaderEpochRequest")
    body = m.MESSAGE(replica_id=replica_id, topics=[m.OffsetForLeaderTopic(topic=topic, partitions=[
        m.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current, leader_epoch=epoch)])])
    _, resp = wire.request("OffsetForLeaderEpoch", version, body)
    p = resp.topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


def _lead_at_epoch(broker: InProcessBroker, topic: str, epoch: int) -> None:
    """As a LeaderAndIsr with a new leader epoch would (a single broker gets none)."""
    def lead():
        part = broker.broker.replica_manager.get(topic, 0)
        broker.broker.replica_manager.make_leader(topic, 0, part.topic_id, part.replicas, part.isr, epoch,
                                                  part.log.config)
    broker.call(lead)


def test_advertised(wire):
    assert supported_range(ApiKey.OFFSET_FOR_LEADER_EPOCH) == (0, 4)


def test_epochs_of_the_log(broker, wire):
    topic = unique_topic("ofle")
    _create(wire, topic)
    _produce(wire, topic, 3)
    assert _ask(wire, topic, 0) == (ErrorCode.NONE, 0, 3)  # the latest epoch: the log end
    _lead_at_epoch(broker, topic, 2)
    _produce(wire, topic, 4)
    _lead_at_epoch(broker, topic, 5)
    _produce(wire, topic, 1)
    assert _ask(wire, topic, 0, current=5) == (ErrorCode.NONE, 0, 3)
    assert _ask(wire, topic, 1) == (ErrorCode.NONE, 0, 3)
    assert _ask(wire, topic, 2) == (ErrorCode.NONE, 2, 7)
    assert _ask(wire, topic, 4) == (ErrorCode.NONE, 2, 7)
    assert _ask(wire, topic, 5) == (ErrorCode.NONE, 5, 8)
    assert _ask(wire, topic, 6) == (ErrorCode.NONE, -1, -1)  # above every epoch
    assert _ask(wire, topic, -1) == (ErrorCode.NONE, -1, -1)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version(wire, version):
    topic = unique_topic("ofle")
    _create(wire, topic)
    _produce(wire, topic, 2)
    code, epoch, end = _ask(wire, topic, 0, version=version, replica_id=-1 if version >= 3 else -2)
    assert code == ErrorCode.NONE and end == 2
    assert epoch == (0 if version >= 1 else -1)  # v0 has no epoch in its answer


def test_current_leader_epoch_is_checked(broker, wire):
    topic = unique_topic("ofle")
    _create(wire, topic)
    _lead_at_epoch(broker, topic, 3)
    assert _ask(wire, topic, 3, current=2)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert _ask(wire, topic, 3, current=4)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert _ask(wire, topic, 3, current=3) == (ErrorCode.NONE, 3, 0)


def test_unknown_partitions(wire):
    assert _ask(wire, unique_topic("ofle"), 0)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    topic = unique_topic("ofle")
    _create(wire, topic)
    assert _ask(wire, topic, 0, partition=7)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
