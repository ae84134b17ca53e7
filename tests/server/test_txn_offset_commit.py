"""TxnOffsetCommit on the wire against a real broker: offsets committed inside a transaction
stay pending (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT, without it the
old offset) until a WriteTxnMarkers COMMIT makes them the group's offsets or an ABORT drops
them; pending offsets survive a restart through the log, and end there too."""

from __future__ import annotations

import threading

import pytest

from odradek.coordinator.group import group_coordinator
from odradek.coordinator.group.group_config import OFFSETS_TOPIC
from odradek.coordinator.partitioner import partition_for
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.testing.broker import InProcessBroker
from tests.server.group_clients import wait_for
from tests.server.group_wire import WireClient, module

pytestmark = pytest.mark.timeout(120)

TC = module("TxnOffsetCommitRequest")
OF = module("OffsetFetchRequest")
OC = module("OffsetCommitRequest")
WM = module("WriteTxnMarkersRequest")
JG = module("JoinGroupRequest")
TOPIC = "txn-in"
OFFSETS_PARTITIONS = 4  # the test broker's offsets.topic.num.partitions


def create_topic(broker) -> None:
    b = broker.broker
    broker.call(lambda: b.topics.create(b.topics.plan_topic(TOPIC, 3, 1, None, {})))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("txn-offsets") / "data") as b:
        create_topic(b)
        yield b


@pytest.fixture
def client(broker):
    with WireClient(broker.port) as c:
        c.call(ApiKey.FIND_COORDINATOR, 3, key="any", key_type=0)  # creates the offsets topic
        yield c


def producer(c) -> tuple[int, int]:
    r = c.call(ApiKey.INIT_PRODUCER_ID, 1, transactional_id=None, transaction_timeout_ms=60_000)
    assert r.error_code == E.NONE
    return r.producer_id, r.producer_epoch


def txn_commit(c, group, pid, epoch, offsets, version=3, topic=TOPIC, **fields):
    """``{partition: error}`` of a TxnOffsetCommit of ``offsets`` ({partition: offset})."""
    r = c.call(ApiKey.TXN_OFFSET_COMMIT, version, transactional_id="tid", group_id=group, producer_id=pid,
               producer_epoch=epoch, topics=[TC.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                   TC.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="md")
                   for p, o in offsets.items()])], **fields)
    return {p.partition_index: p.error_code for t in r.topics for p in t.partitions}


def fetch(c, group, stable=True, version=7, partitions=(0, 1, 2)):
    """``{partition: offset or error name}`` as OffsetFetch answers (a group error: its name)."""
    topics = [OF.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(partitions))]
    if version >= 8:
        r = c.call(ApiKey.OFFSET_FETCH, version, require_stable=stable, groups=[
            OF.OffsetFetchRequestGroup(group_id=group, topics=[
                OF.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=list(partitions))])])
        parts = [p for t in r.groups[0].topics for p in t.partitions]
    else:
        r = c.call(ApiKey.OFFSET_FETCH, version, group_id=group, topics=topics, require_stable=stable)
        if r.error_code != E.NONE:
            return E(r.error_code).name
        parts = [p for t in r.topics for p in t.partitions]
    return {p.partition_index: (E(p.error_code).name if p.error_code else p.committed_offset) for p in parts}


def end_txn(c, group, pid, epoch, commit: bool) -> int:
    """WriteTxnMarkers to the group's offsets partition, as the transaction coordinator sends."""
    partition = partition_for(group, OFFSETS_PARTITIONS)
    r = c.call(ApiKey.WRITE_TXN_MARKERS, 1, markers=[WM.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=0,
        topics=[WM.WritableTxnMarkerTopic(name=OFFSETS_TOPIC, partition_indexes=[partition])])])
    [marker] = r.markers
    [(error,)] = [(p.error_code,) for t in marker.topics for p in t.partitions]
    return error


def test_pending_until_committed(client):
    pid, epoch = producer(client)
    client.call(ApiKey.OFFSET_COMMIT, 2, group_id="g-commit", generation_id_or_member_epoch=-1, member_id="",
                retention_time_ms=-1, topics=[OC.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                    OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=3)])])
    assert txn_commit(client, "g-commit", pid, epoch, {0: 10, 1: 11}) == {0: E.NONE, 1: E.NONE}
    assert fetch(client, "g-commit") == {0: "UNSTABLE_OFFSET_COMMIT", 1: "UNSTABLE_OFFSET_COMMIT", 2: -1}
    assert fetch(client, "g-commit", version=8) == fetch(client, "g-commit")
    assert fetch(client, "g-commit", stable=False) == {0: 3, 1: -1, 2: -1}
    assert end_txn(client, "g-commit", pid, epoch, commit=True) == E.NONE
    assert fetch(client, "g-commit") == {0: 10, 1: 11, 2: -1}


def test_aborted_offsets_are_dropped(client):
    pid, epoch = producer(client)
    assert txn_commit(client, "g-abort", pid, epoch, {0: 10}) == {0: E.NONE}
    assert end_txn(client, "g-abort", pid, epoch, commit=False) == E.NONE
    assert fetch(client, "g-abort") == {0: -1, 1: -1, 2: -1}


@pytest.mark.parametrize("version", range(5))
def test_every_version(client, version):
    pid, epoch = producer(client)
    group = f"g-v{version}"
    assert txn_commit(client, group, pid, epoch, {2: 7}, version=version) == {2: E.NONE}
    assert fetch(client, group)[2] == "UNSTABLE_OFFSET_COMMIT"
    assert end_txn(client, group, pid, epoch, commit=True) == E.NONE
    assert fetch(client, group)[2] == 7


def test_request_errors(client):
    pid, epoch = producer(client)
    assert txn_commit(client, "g-err", pid, epoch, {0: 1, 9: 1}) == {0: E.NONE, 9: E.UNKNOWN_TOPIC_OR_PARTITION}
    assert txn_commit(client, "g-err", pid, epoch, {0: 1}, topic="no-such-topic") == {0: E.UNKNOWN_TOPIC_OR_PARTITION}
    assert txn_commit(client, "", pid, epoch, {0: 1}) == {0: E.INVALID_GROUP_ID}
    assert txn_commit(client, "g-err", -1, 0, {0: 1}) == {0: E.INVALID_PRODUCER_ID_MAPPING}
    # v3+: a generation of a group that does not exist
    assert txn_commit(client, "g-none", pid, epoch, {0: 1}, generation_id=1) == {0: E.ILLEGAL_GENERATION}
    assert end_txn(client, "g-err", pid, epoch, commit=False) == E.NONE


def test_members_are_checked_from_v3(client):
    pid, epoch = producer(client)
    r = client.call(ApiKey.JOIN_GROUP, 5, group_id="g-member", session_timeout_ms=30_000,
                    rebalance_timeout_ms=10_000, member_id="", group_instance_id="static-1", protocol_type="consumer",
                    protocols=[JG.JoinGroupRequestProtocol(name="range", metadata=b"")])
    assert r.error_code == E.NONE
    member, generation = r.member_id, r.generation_id
    assert txn_commit(client, "g-member", pid, epoch, {0: 1}, member_id=member, generation_id=generation + 1,
                      group_instance_id="static-1") == {0: E.ILLEGAL_GENERATION}
    assert txn_commit(client, "g-member", pid, epoch, {0: 1}, member_id="other", generation_id=generation,
                      group_instance_id="static-1") == {0: E.FENCED_INSTANCE_ID}
    assert txn_commit(client, "g-member", pid, epoch, {0: 1}, member_id=member, generation_id=generation,
                      group_instance_id="static-1") == {0: E.NONE}
    assert end_txn(client, "g-member", pid, epoch, commit=True) == E.NONE
    assert fetch(client, "g-member")[0] == 1


def test_older_producer_epoch_is_fenced(client):
    pid, _ = producer(client)
    assert txn_commit(client, "g-fenced", pid, 1, {0: 5}) == {0: E.NONE}
    assert txn_commit(client, "g-fenced", pid, 0, {0: 6}) == {0: E.INVALID_PRODUCER_EPOCH}
    assert end_txn(client, "g-fenced", pid, 1, commit=True) == E.NONE
    assert fetch(client, "g-fenced")[0] == 5


def test_pending_offsets_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    with InProcessBroker(data) as b:
        create_topic(b)
        with WireClient(b.port) as c:
            c.call(ApiKey.FIND_COORDINATOR, 3, key="g-restart", key_type=0)
            open_pid, open_epoch = producer(c)
            done_pid, done_epoch = producer(c)
            aborted_pid, aborted_epoch = producer(c)
            assert txn_commit(c, "g-restart", open_pid, open_epoch, {0: 10}) == {0: E.NONE}
            assert txn_commit(c, "g-restart", done_pid, done_epoch, {1: 11}) == {1: E.NONE}
            assert txn_commit(c, "g-restart", aborted_pid, aborted_epoch, {2: 12}) == {2: E.NONE}
            assert end_txn(c, "g-restart", done_pid, done_epoch, commit=True) == E.NONE
            assert end_txn(c, "g-restart", aborted_pid, aborted_epoch, commit=False) == E.NONE
            expected = {0: "UNSTABLE_OFFSET_COMMIT", 1: 11, 2: -1}
            assert fetch(c, "g-restart") == expected
    with InProcessBroker(data) as b:
        with WireClient(b.port) as c:
            wait_for(lambda: fetch(c, "g-restart") != "COORDINATOR_LOAD_IN_PROGRESS")
            assert fetch(c, "g-restart") == expected
            assert fetch(c, "g-restart", stable=False) == {0: -1, 1: 11, 2: -1}
            assert end_txn(c, "g-restart", open_pid, open_epoch, commit=True) == E.NONE
            assert fetch(c, "g-restart") == {0: 10, 1: 11, 2: -1}
    with InProcessBroker(data) as b:
        with WireClient(b.port) as c:
            wait_for(lambda: fetch(c, "g-restart") == {0: 10, 1: 11, 2: -1})


def test_a_marker_written_while_the_partition_loads_is_applied_after_the_load(tmp_path, monkeypatch):
    data = tmp_path / "data"
    with InProcessBroker(data) as b:
        create_topic(b)
        with WireClient(b.port) as c:
            c.call(ApiKey.FIND_COORDINATOR, 3, key="g-loading", key_type=0)
            pid, epoch = producer(c)
            assert txn_commit(c, "g-loading", pid, epoch, {1: 21}) == {1: E.NONE}
    release = threading.Event()
    real_load = group_coordinator.load_shard

    def load_started_before_the_marker(shard, plog):
        end = plog.log_end_offset  # the load reads up to here: the marker comes after
        release.wait(30)
        return real_load(shard, plog, end)

    monkeypatch.setattr(group_coordinator, "load_shard", load_started_before_the_marker)
    with InProcessBroker(data) as b:
        with WireClient(b.port) as c:
            try:
                assert fetch(c, "g-loading") == "COORDINATOR_LOAD_IN_PROGRESS"
                assert end_txn(c, "g-loading", pid, epoch, commit=True) == E.NONE
            finally:
                release.set()
            wait_for(lambda: fetch(c, "g-loading") == {0: -1, 1: 21, 2: -1})
