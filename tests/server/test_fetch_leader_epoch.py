"""Fetch and ListOffsets fenced by ``current_leader_epoch`` (KIP-320), in raw frames on a real
broker: a request whose epoch is older than the partition's leader epoch gets
FENCED_LEADER_EPOCH (74), a newer one UNKNOWN_LEADER_EPOCH (75), and neither gets records
nor offsets; -1 (no epoch) and the current epoch read as usual. The consumer's path and the
follower's (which must not be recorded as the follower's progress either) are both
checked. OffsetForLeaderEpoch's check is in ``test_offset_for_leader_epoch.py``."""

from __future__ import annotations

import pytest

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.reader import iter_batches
from odradek.testing.broker import InProcessBroker
from tests.replication.test_alter_partition_manager import FakeChannel, accept
from tests.server.clients import unique_topic
from tests.server.test_bad_input import create_topic
from tests.server.wire import produce_body, simple_batch
from tests.server.wire_fixtures import wire_client  # noqa: F401

F = codec.module("FetchRequest")
L = codec.module("ListOffsetsRequest")
EPOCH = 2  # the leader epoch the ``topic`` fixture gives the partition
FOLLOWER = 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("data")) as b:
        def fake_controller():  # an ISR change, should one come, goes nowhere real
            b.broker.broker_to_controller = FakeChannel(accept)
        b.call(fake_controller)
        yield b



@pytest.fixture
def topic(broker, wire) -> str:
    """A topic holding 3 records whose partition 0 this broker leads at leader epoch 2, with
    replicas [1, 2] and both in the ISR, as a LeaderAndIsr would make it."""
    name = unique_topic("fetch-epoch")
    create_topic(wire, name)
    _, resp = wire.request("Produce", 9, produce_body(name, 0, simple_batch([b"a", b"b", b"c"])))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE

    def lead():
        rm = broker.broker.replica_manager
        part = rm.get(name, 0)
        rm.make_leader(name, 0, part.topic_id, (1, FOLLOWER), (1, FOLLOWER), EPOCH, part.log.config)
        part.zk_version = 0
    broker.call(lead)
    return name


def _partition(broker, topic):
    return broker.call(lambda: broker.broker.replica_manager.get(topic, 0))


def _fetch(broker, wire, topic: str, epoch: int, version: int = 12, replica: int = -1, offset: int = 0):
    topic_id = _partition(broker, topic).topic_id
    fp = F.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=offset, log_start_offset=0,
                          partition_max_bytes=1 << 20)
    body = F.MESSAGE(replica_id=replica if version < 15 else -1,
                     replica_state=F.ReplicaState(replica, -1) if replica >= 0 else None,
                     max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                     topics=[F.FetchTopic(topic=topic, topic_id=topic_id, partitions=[fp])])
    _, resp = wire.request("Fetch", version, body)
    return resp.responses[0].partitions[0]


def _values(p) -> list[bytes]:
    return [r.value for b in iter_batches(p.records) for r in b.records()] if p.records else []


@pytest.mark.parametrize("version", [9, 12, 17])
def test_a_consumer_fetch_with_a_stale_epoch_is_fenced_and_gets_no_records(broker, wire, topic, version):
    p = _fetch(broker, wire, topic, EPOCH - 1, version)
    assert p.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert not p.records


@pytest.mark.parametrize("version", [9, 12, 17])
def test_a_consumer_fetch_with_a_newer_epoch_is_unknown_leader_epoch(broker, wire, topic, version):
    p = _fetch(broker, wire, topic, EPOCH + 1, version)
    assert p.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert not p.records


@pytest.mark.parametrize("epoch", [EPOCH, -1])
def test_a_consumer_fetch_with_the_current_or_no_epoch_reads(broker, wire, topic, epoch):
    p = _fetch(broker, wire, topic, epoch)
    assert p.error_code == ErrorCode.NONE
    assert _values(p) == [b"a", b"b", b"c"]


@pytest.mark.parametrize("version", [12, 17])
def test_a_follower_fetch_with_a_wrong_epoch_is_refused_and_not_recorded(broker, wire, topic, version):
    for epoch, code in ((EPOCH - 1, ErrorCode.FENCED_LEADER_EPOCH), (EPOCH + 1, ErrorCode.UNKNOWN_LEADER_EPOCH)):
        p = _fetch(broker, wire, topic, epoch, version, replica=FOLLOWER, offset=3)
        assert p.error_code == code
        assert not p.records
    # A refused fetch tells the leader nothing of the follower's progress.
    assert _partition(broker, topic).followers[FOLLOWER].log_end_offset == -1
    p = _fetch(broker, wire, topic, EPOCH, version, replica=FOLLOWER, offset=0)
    assert p.error_code == ErrorCode.NONE and _values(p) == [b"a", b"b", b"c"]
    assert _partition(broker, topic).followers[FOLLOWER].log_end_offset == 0


def _list_offsets(wire, topic: str, epoch: int, timestamp: int = -1):
    body = L.MESSAGE(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=topic, partitions=[
        L.ListOffsetsPartition(partition_index=0, current_leader_epoch=epoch, timestamp=timestamp)])])
    _, resp = wire.request("ListOffsets", 5, body)
    return resp.topics[0].partitions[0]


def test_list_offsets_checks_the_current_leader_epoch(wire, topic):
    for epoch, code in ((EPOCH - 1, ErrorCode.FENCED_LEADER_EPOCH), (EPOCH + 1, ErrorCode.UNKNOWN_LEADER_EPOCH)):
        p = _list_offsets(wire, topic, epoch)
        assert p.error_code == code
        assert p.offset == -1
    p = _list_offsets(wire, topic, EPOCH)
    assert (p.error_code, p.offset, p.leader_epoch) == (ErrorCode.NONE, 3, EPOCH)
    p = _list_offsets(wire, topic, -1, timestamp=-2)
    assert (p.error_code, p.offset) == (ErrorCode.NONE, 0)
