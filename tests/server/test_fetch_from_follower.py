"""KIP-392 on the wire, one real broker (broker 1, rack ``r1``, RackAwareReplicaSelector) whose
metadata image also lists brokers 2 (``r2``) and 3 (``r3``); the followers' fetches are sent
by the test. As leader it names a consumer's in-sync replica in the consumer's rack in
``preferred_read_replica`` and sends no records; as follower it serves Fetch v11+ consumers up
to its own high watermark (server/fetch_from_follower.py, handlers/fetch.py). The cluster
version with real followers and clients is tests/server/cluster/test_fetch_from_follower.py."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from odradek.metadata.layout import BrokerInfo, Endpoint
from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.reader import iter_batches
from odradek.server.replica_selector import RACK_AWARE
from odradek.testing.broker import InProcessBroker
from odradek.testing.broker import test_config as broker_props
from tests.replication.test_alter_partition_manager import FakeChannel, accept
from tests.server.clients import unique_topic
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient, produce_body, simple_batch

F = codec.module("FetchRequest")
L = codec.module("ListOffsetsRequest")
RECORDS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    props = broker_props(tmp_path_factory.mktemp("kip392"), broker_rack="r1", replica_selector_class=RACK_AWARE,
                         controlled_shutdown_enable="false")
    with InProcessBroker(None, props) as b:
        def setup():
            b.broker.broker_to_controller = FakeChannel(accept)  # ISR changes accepted at once
            own = b.broker.metadata_image
            others = {i: BrokerInfo(i, (Endpoint("PLAINTEXT", "127.0.0.1", 1),), f"r{i}") for i in (2, 3)}
            b.alive = dict(others)  # the brokers 2 and 3 the image lists (a test may remove one)
            b.broker.metadata_image = lambda: replace(
                own(), brokers=MappingProxyType({**own().brokers, **b.alive}))
        b.call(setup)
        yield b


@pytest.fixture
def wire(broker):
    client = WireClient(broker.bootstrap)
    yield client
    client.close()


def _partition(broker, topic):
    return broker.call(lambda: broker.broker.replica_manager.get(topic, 0))


def _led(broker, wire, isr=(1, 2, 3)) -> str:
    """A topic whose partition 0 broker 1 leads at epoch 1 (replicas 1, 2, 3), holding
    ``RECORDS`` one-record batches, both followers caught up (their fetches at the log end)."""
    topic = unique_topic("kip392")
    listed = broker.call(lambda: dict(broker.alive))
    broker.call(broker.alive.clear)  # placed on this broker, the only one alive
    try:
        create_topic(wire, topic)
    finally:
        broker.call(lambda: broker.alive.update(listed))

    def lead():
        rm = broker.broker.replica_manager
        part = rm.get(topic, 0)
        rm.make_leader(topic, 0, part.topic_id, (1, 2, 3), (1, 2, 3), 1, part.log.config)
        part.zk_version = 0
    broker.call(lead)
    for i in range(RECORDS):
        _, resp = wire.request("Produce", 9, produce_body(topic, 0, simple_batch([b"v%d" % i]), acks=1))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    for follower in (2, 3):
        assert _fetch(wire, broker, topic, RECORDS, replica=follower).error_code == ErrorCode.NONE
    assert _partition(broker, topic).high_watermark == RECORDS
    if isr != (1, 2, 3):  # the same leader and epoch: the followers' offsets are kept
        part = _partition(broker, topic)
        broker.call(lambda: broker.broker.replica_manager.make_leader(topic, 0, part.topic_id, (1, 2, 3), isr, 1,
                                                                     part.log.config))
    return topic


def _fetch(wire, broker, topic: str, offset: int, *, rack: str = "", version: int = 12, replica: int = -1,
           epoch: int = 1, max_wait_ms: int = 0):
    part = _partition(broker, topic)
    fp = F.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=offset, log_start_offset=0,
                          partition_max_bytes=1 << 20)
    body = F.MESSAGE(replica_id=replica, replica_state=F.ReplicaState(replica, -1), max_wait_ms=max_wait_ms,
                     min_bytes=1, max_bytes=1 << 20, rack_id=rack,
                     topics=[F.FetchTopic(topic=topic, topic_id=part.topic_id, partitions=[fp])])
    _, resp = wire.request("Fetch", version, body)
    return resp.responses[0].partitions[0]


def _values(answer) -> list[bytes]:
    return [r.value for b in iter_batches(answer.records) for r in b.records()] if answer.records else []


def test_the_leader_sends_a_consumer_to_the_in_sync_replica_of_its_rack(broker, wire):
    topic = _led(broker, wire)
    # a long poll would wait 30 s: the answer naming the replica comes at once, as Kafka's
    answer = _fetch(wire, broker, topic, 0, rack="r2", max_wait_ms=30_000)
    assert (answer.error_code, answer.preferred_read_replica, _values(answer)) == (ErrorCode.NONE, 2, [])
    assert (answer.high_watermark, answer.last_stable_offset, answer.log_start_offset) == (RECORDS, RECORDS, 0)
    assert _fetch(wire, broker, topic, 1, rack="r3").preferred_read_replica == 3
    # read here: the leader's own rack, no rack, a rack without a replica, Fetch v10 (no rack_id)
    for rack, version in (("r1", 12), ("", 12), ("r9", 12), ("r2", 10)):
        answer = _fetch(wire, broker, topic, 0, rack=rack, version=version)
        assert (answer.preferred_read_replica, _values(answer)) == (-1, [b"v0", b"v1", b"v2"]), (rack, version)


def test_a_replica_out_of_the_isr_is_not_named(broker, wire):
    topic = _led(broker, wire, isr=(1, 3))
    assert _partition(broker, topic).followers[2].log_end_offset == RECORDS  # it holds the offset
    answer = _fetch(wire, broker, topic, 0, rack="r2")
    assert (answer.preferred_read_replica, _values(answer)) == (-1, [b"v0", b"v1", b"v2"])
    assert _fetch(wire, broker, topic, 0, rack="r3").preferred_read_replica == 3


def test_a_replica_that_lacks_the_offset_or_whose_broker_is_gone_is_not_named(broker, wire):
    topic = _led(broker, wire)
    _, resp = wire.request("Produce", 9, produce_body(topic, 0, simple_batch([b"v3"]), acks=1))
    assert _fetch(wire, broker, topic, RECORDS + 1, replica=3).error_code == ErrorCode.NONE  # 3 has v3, 2 not
    assert _fetch(wire, broker, topic, RECORDS + 1, rack="r2").preferred_read_replica == -1
    assert _fetch(wire, broker, topic, RECORDS + 1, rack="r3").preferred_read_replica == 3
    broker.call(lambda: broker.alive.pop(3))
    try:
        assert _fetch(wire, broker, topic, RECORDS + 1, rack="r3").preferred_read_replica == -1
    finally:
        broker.call(lambda: broker.alive.update({3: BrokerInfo(3, (Endpoint("PLAINTEXT", "127.0.0.1", 1),), "r3")}))


def test_a_follower_serves_consumers_up_to_its_own_high_watermark(broker, wire):
    topic = _led(broker, wire)

    def follow():  # broker 2 leads now (epoch 2); this broker learnt a high watermark of 2
        rm = broker.broker.replica_manager
        part = rm.get(topic, 0)
        rm.make_follower(topic, 0, part.topic_id, (1, 2, 3), (1, 2, 3), 2, 2, part.log.config)
        part.update_follower_high_watermark(2)
    broker.call(follow)
    answer = _fetch(wire, broker, topic, 0, rack="r2", epoch=2)
    assert (answer.error_code, answer.preferred_read_replica) == (ErrorCode.NONE, -1)  # a follower names none
    assert (_values(answer), answer.high_watermark, answer.log_start_offset) == ([b"v0", b"v1"], 2, 0)
    between = _fetch(wire, broker, topic, 2, epoch=2)  # above its high watermark, within its log
    assert (between.error_code, _values(between)) == (ErrorCode.NONE, [])
    beyond = _fetch(wire, broker, topic, RECORDS + 1, epoch=2)
    assert (beyond.error_code, beyond.high_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, 2)
    assert _fetch(wire, broker, topic, 0, epoch=1).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert _fetch(wire, broker, topic, 0, epoch=3).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    # the leader only: a consumer's Fetch v10, another follower's fetch, ListOffsets
    assert _fetch(wire, broker, topic, 0, version=10, epoch=2).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _fetch(wire, broker, topic, 0, replica=3, epoch=2).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    _, offsets = wire.request("ListOffsets", 7, L.MESSAGE(replica_id=-1, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, current_leader_epoch=2, timestamp=-1)])]))
    assert offsets.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
