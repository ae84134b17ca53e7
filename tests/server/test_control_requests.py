"""LeaderAndIsr, StopReplica and UpdateMetadata (keys 4, 5, 6) delivered to a real broker the
way the controller delivers them to itself: in-process, straight to the handler. Every
request is first encoded and decoded at its version, and every response encoded and
decoded at it, so each version's layout is what the handler sees and answers.

Topics here are made only by these requests (not in the metadata), so what the broker does
on its own at start-up or topic creation does not interfere; each test reads the broker's
controller epoch first and sends at or above it.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import uuid

import pytest

from odradek.protocol import codec
from odradek.protocol.api_keys import supported_range
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.state_change import retry_unhosted_roles
from odradek.server.handlers import HANDLERS
from odradek.server.request import RequestContext
from odradek.testing.broker import InProcessBroker
from tests.server.wire import WireClient, simple_batch

_names = itertools.count()


def versions(key: ApiKey) -> range:
    low, high = supported_range(key)
    return range(low, high + 1)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("data")) as b:
        yield b


def topic(prefix: str = "ctl") -> str:
    return f"{prefix}-{next(_names)}-{uuid.uuid4().hex[:6]}"


class _Local:
    """The connection of an in-process request: only its broker."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.listener_name = "PLAINTEXT"


def deliver(node: InProcessBroker, name: str, version: int, body):
    """Round-trip ``body`` through the wire codec at ``version``, run the handler on the
    broker's loop, and round-trip its response the same way."""
    mod = codec.module(name + "Request")
    frame = codec.encode_request(codec.RequestHeader(mod.API_KEY, version, 1, "controller"), body)
    _, decoded = codec.decode_request(frame)
    ctx = RequestContext(_Local(node.broker), mod.API_KEY, version, 1, "controller", version)
    response = node.call(HANDLERS[mod.API_KEY], ctx, decoded)
    out = codec.encode_response(mod.API_KEY, version, codec.ResponseHeader(1), response)
    return codec.decode_response(mod.API_KEY, version, out)[1]


def me(node) -> int:
    return node.broker.broker_id


def controller_epoch(node) -> int:
    return node.call(lambda: node.broker.controller_epoch)


# --- request builders ---------------------------------------------------------------------------
LAI = codec.module("LeaderAndIsrRequest")
SR = codec.module("StopReplicaRequest")
UM = codec.module("UpdateMetadataRequest")


def leader_and_isr(version: int, parts, controller_epoch: int, broker_epoch: int = -1, topic_id=None):
    """``parts``: (topic, partition, leader, leader_epoch, replicas, isr, zk_version)."""
    def state(t, p, leader, epoch, replicas, isr, zk):
        return LAI.LeaderAndIsrPartitionState(topic_name=t, partition_index=p, controller_epoch=controller_epoch,
                                              leader=leader, leader_epoch=epoch, isr=list(isr),
                                              partition_epoch=zk, replicas=list(replicas))
    body = LAI.LeaderAndIsrRequest(controller_id=99, controller_epoch=controller_epoch, broker_epoch=broker_epoch)
    if version < 2:
        body.ungrouped_partition_states = [state(*p) for p in parts]
    else:
        by_topic = {}
        for p in parts:
            by_topic.setdefault(p[0], []).append(state(*p))
        body.topic_states = [LAI.LeaderAndIsrTopicState(topic_name=t, topic_id=topic_id or topic_id_of(t),
                                                        partition_states=s) for t, s in by_topic.items()]
    return body


def topic_id_of(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, name)


def partition_errors(version: int, response) -> dict:
    if version < 5:
        return {(e.topic_name, e.partition_index): e.error_code for e in response.partition_errors}
    return {e.partition_index: e.error_code for t in response.topics for e in t.partition_errors}


def stop_replica(version: int, parts, controller_epoch: int, delete: bool, broker_epoch: int = -1):
    """``parts``: (topic, partition, leader_epoch)."""
    body = SR.StopReplicaRequest(controller_id=99, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                                 delete_partitions=delete)
    if version == 0:
        body.ungrouped_partitions = [SR.StopReplicaPartitionV0(topic_name=t, partition_index=p) for t, p, _ in parts]
    elif version < 3:
        body.topics = [SR.StopReplicaTopicV1(name=t, partition_indexes=[p]) for t, p, _ in parts]
    else:
        body.topic_states = [SR.StopReplicaTopicState(topic_name=t, partition_states=[
            SR.StopReplicaPartitionState(partition_index=p, leader_epoch=e, delete_partition=delete)])
            for t, p, e in parts]
    return body


def update_metadata(version: int, controller_epoch: int, parts=(), broker_epoch: int = -1, live=(1,)):
    """``parts``: (topic, partition, leader); ``live``: the brokers listed alive (by default the
    broker under test, test_config's node.id, as a controller always lists its receiver)."""
    def state(t, p, leader):
        return UM.UpdateMetadataPartitionState(topic_name=t, partition_index=p, controller_epoch=controller_epoch,
                                               leader=leader, leader_epoch=1, isr=[1], zk_version=0, replicas=[1])
    body = UM.UpdateMetadataRequest(controller_id=99, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                                    live_brokers=[UM.UpdateMetadataBroker(id=b) for b in live])
    if version < 5:
        body.ungrouped_partition_states = [state(*p) for p in parts]
    else:
        body.topic_states = [UM.UpdateMetadataTopicState(topic_name=t, partition_states=[state(t, p, leader)])
                             for t, p, leader in parts]
    return body


class Spy:
    """Records calls to the replica fetcher manager (and coordinator) interfaces."""

    def __init__(self) -> None:
        self.calls = []

    def add_partitions(self, states) -> None:
        self.calls.append(("add", dict(states)))

    def remove_partitions(self, keys) -> None:
        self.calls.append(("remove", list(keys)))

    def on_leadership_change(self, elected, resigned) -> None:
        self.calls.append(("leadership", list(elected), list(resigned)))


@pytest.fixture
def fetchers(node):
    """A spy in place of ``broker.replica_fetchers`` for one test."""
    spy = Spy()
    before = getattr(node.broker, "replica_fetchers", None)
    node.broker.replica_fetchers = spy
    yield spy
    node.broker.replica_fetchers = before


@pytest.fixture
def newer_epoch(node, monkeypatch):
    """A controller epoch newer than any the broker saw, which ``/controller_epoch`` holds
    for the test (as after an election), so the broker takes it as a real controller's."""
    epoch = controller_epoch(node) + 1
    real = node.broker.metadata.controller_epoch
    monkeypatch.setattr(node.broker.metadata, "controller_epoch", lambda: (max(epoch, real()[0]), 0))
    return epoch


def partition(node, t: str, p: int = 0):
    return node.call(node.broker.replica_manager.get, t, p)


# --- LeaderAndIsr -----------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(ApiKey.LEADER_AND_ISR))
def test_leader_and_isr_makes_this_broker_leader_at_every_version(node, version):
    t, mine = topic(), me(node)
    body = leader_and_isr(version, [(t, 0, mine, 3, [mine], [mine], 7)], controller_epoch(node))
    resp = deliver(node, "LeaderAndIsr", version, body)
    assert resp.error_code == ErrorCode.NONE
    assert set(partition_errors(version, resp).values()) == {ErrorCode.NONE}
    part = partition(node, t)
    assert part.is_leader(me(node)) and part.leader_epoch == 3 and part.zk_version == 7
    assert part.log.leader_epoch_cache.latest_epoch == 3
    assert node.call(node.broker.leader_partition, t, 0)[1] == ErrorCode.NONE


def test_a_partition_led_at_a_new_epoch_tells_its_watchers_once(node):
    """``ReplicaManager.make_leader`` notifies; taking the role notifies no second time (every
    watching fetch session is told of each notify: a failover's 10,000 new epochs)."""
    t, mine = topic(), me(node)
    deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 1, [mine], [mine], 0)], controller_epoch(node)))
    changed = []

    class Watcher:
        def partition_changed(self, key):
            changed.append(key)

    watcher = Watcher()
    node.call(node.broker.replica_manager.watch, (t, 0), watcher)
    try:
        body = leader_and_isr(7, [(t, 0, mine, 2, [mine], [mine], 1)], controller_epoch(node))
        assert deliver(node, "LeaderAndIsr", 7, body).error_code == ErrorCode.NONE
    finally:
        node.call(node.broker.replica_manager.unwatch, (t, 0), watcher)
    assert partition(node, t).leader_epoch == 2
    assert changed == [(t, 0)]


def test_topic_ids_are_kept_and_answered_by_id(node):
    t, topic_id, mine = topic(), uuid.uuid4(), me(node)
    body = leader_and_isr(5, [(t, 0, mine, 1, [mine], [mine], 0), (t, 1, mine, 1, [mine], [mine], 0)],
                          controller_epoch(node), topic_id=topic_id)
    resp = deliver(node, "LeaderAndIsr", 5, body)
    assert [tp.topic_id for tp in resp.topics] == [topic_id]
    assert sorted(e.partition_index for e in resp.topics[0].partition_errors) == [0, 1]
    assert partition(node, t).topic_id == topic_id


def test_leader_becomes_follower_keeps_data_and_fetches_from_the_new_leader(node, fetchers):
    t, mine, other = topic(), me(node), me(node) + 1
    epoch = controller_epoch(node)
    deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 1, [mine, other], [mine], 0)], epoch))
    assert fetchers.calls == [("remove", [(t, 0)])]  # a new leader's fetcher goes first

    def produce():
        part = node.broker.replica_manager.get(t, 0)
        node.broker.replica_manager.append(part, memoryview(bytearray(simple_batch([b"a", b"b", b"c"]))))
        return part.high_watermark, part.log_end_offset
    assert node.call(produce) == (3, 3)

    fetchers.calls.clear()
    resp = deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, other, 2, [mine, other], [other], 1)], epoch))
    assert partition_errors(7, resp) == {0: ErrorCode.NONE}
    part = partition(node, t)
    assert not part.is_leader(mine) and part.leader_id == other and part.leader_epoch == 2
    assert part.high_watermark == 3 and part.zk_version == 1 and part.followers == {}
    assert node.call(node.broker.leader_partition, t, 0)[0] is None  # (the topic is not in the metadata)
    assert fetchers.calls[0] == ("remove", [(t, 0)])
    kind, added = fetchers.calls[1]
    state = added[(t, 0)]
    assert kind == "add" and (state.leader_id, state.leader_epoch, state.fetch_offset) == (other, 2, 3)
    assert state.topic_id == part.topic_id


def test_a_new_follower_gets_a_log_and_a_fetcher_a_leaderless_one_no_fetcher(node, fetchers):
    t, mine, other = topic(), me(node), me(node) + 1
    resp = deliver(node, "LeaderAndIsr", 4, leader_and_isr(4, [(t, 0, other, 5, [other, mine], [other], 2),
                                                                (t, 1, -1, 5, [other, mine], [other], 2)],
                                                            controller_epoch(node)))
    assert set(partition_errors(4, resp).values()) == {ErrorCode.NONE}
    assert os.path.isdir(partition(node, t).log.directory)
    assert partition(node, t, 1).leader_id == -1
    adds = [states for kind, states in fetchers.calls if kind == "add"]
    assert [list(a) for a in adds] == [[(t, 0)]] and adds[0][(t, 0)].fetch_offset == 0


def test_stale_and_repeated_requests_change_nothing(node, newer_epoch):
    t, mine, epoch = topic(), me(node), newer_epoch
    deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 4, [mine], [mine], 0)], epoch))
    assert controller_epoch(node) == epoch

    resp = deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 9, [mine], [mine], 0)], epoch - 1))
    assert resp.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert partition_errors(7, resp) == {0: ErrorCode.STALE_CONTROLLER_EPOCH}
    resp = deliver(node, "LeaderAndIsr", 1, leader_and_isr(1, [(t, 0, mine, 9, [mine], [mine], 0)], epoch - 1))
    assert partition_errors(1, resp) == {(t, 0): ErrorCode.STALE_CONTROLLER_EPOCH}

    resp = deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 4, [mine], [mine], 5)], epoch))
    assert resp.error_code == ErrorCode.NONE
    assert partition_errors(7, resp) == {0: ErrorCode.STALE_CONTROLLER_EPOCH}  # the same leader epoch
    assert partition(node, t).leader_epoch == 4 and partition(node, t).zk_version == 0


@pytest.mark.parametrize("name", ["LeaderAndIsr", "StopReplica", "UpdateMetadata"])
def test_a_controller_epoch_the_cluster_has_not_reached_is_refused(node, name):
    """No controller sent it (a controller writes ``/controller_epoch`` first): taking it
    would make the real controller's requests look stale from then on."""
    t, mine = topic(), me(node)
    seen = controller_epoch(node)
    future = max(seen, node.call(node.broker.metadata.controller_epoch)[0]) + 5
    body = {"LeaderAndIsr": lambda: leader_and_isr(7, [(t, 0, mine, 1, [mine], [mine], 0)], future),
            "StopReplica": lambda: stop_replica(3, [(t, 0, -2)], future, True),
            "UpdateMetadata": lambda: update_metadata(8, future)}[name]()
    resp = deliver(node, name, {"LeaderAndIsr": 7, "StopReplica": 3, "UpdateMetadata": 8}[name], body)
    assert resp.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert controller_epoch(node) == seen and partition(node, t) is None


def test_an_older_broker_epoch_is_refused(node, monkeypatch):
    t, mine = topic(), me(node)
    monkeypatch.setattr(type(node.broker), "broker_epoch", 100, raising=False)  # (a property, or none yet)
    epoch = controller_epoch(node)
    resp = deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 1, [mine], [mine], 0)], epoch, 99))
    assert resp.error_code == ErrorCode.STALE_BROKER_EPOCH and partition(node, t) is None
    assert deliver(node, "StopReplica", 4, stop_replica(4, [(t, 0, -2)], epoch, True, 99)).error_code \
        == ErrorCode.STALE_BROKER_EPOCH
    assert deliver(node, "UpdateMetadata", 8, update_metadata(8, epoch, broker_epoch=99)).error_code \
        == ErrorCode.STALE_BROKER_EPOCH
    resp = deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 1, [mine], [mine], 0)], epoch, 101))
    assert resp.error_code == ErrorCode.NONE and partition(node, t).is_leader(mine)


def test_a_partition_without_this_broker_is_unknown_and_not_hosted(node):
    t, other = topic(), me(node) + 1
    resp = deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, other, 1, [other], [other], 0)],
                                                            controller_epoch(node)))
    assert partition_errors(7, resp) == {0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert partition(node, t) is None


def test_a_log_that_cannot_be_created_is_a_storage_error_and_its_role_is_taken_later(node, monkeypatch):
    t, u, mine = topic(), topic(), me(node)
    real = node.broker.log_manager.get_or_create_log

    def refuse(*_args, **_kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(node.broker.log_manager, "get_or_create_log", refuse)
    epoch = controller_epoch(node)
    resp = deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 1, [mine], [mine], 4),
                                                                (u, 0, mine, 1, [mine], [mine], 0)], epoch))
    assert [e.error_code for tp in resp.topics for e in tp.partition_errors] == [ErrorCode.KAFKA_STORAGE_ERROR] * 2
    assert partition(node, t) is None and partition(node, u) is None
    assert node.call(retry_unhosted_roles, node.broker) == 0  # the disk is still full
    deliver(node, "StopReplica", 4, stop_replica(4, [(u, 0, -2)], epoch, True))  # u need not be led any more

    monkeypatch.setattr(node.broker.log_manager, "get_or_create_log", real)
    assert node.call(retry_unhosted_roles, node.broker) == 1
    part = partition(node, t)
    assert part.is_leader(mine) and part.leader_epoch == 1 and part.zk_version == 4
    assert partition(node, u) is None and node.call(lambda: dict(node.broker.replica_manager.unhosted_roles)) == {}


def test_the_group_coordinator_hears_of_offsets_partitions_led_and_given_up(node):
    mine, other = me(node), me(node) + 1
    coordinator = node.broker.group_coordinator
    spy = Spy()
    coordinator.on_leadership_change = spy.on_leadership_change
    try:
        epoch = controller_epoch(node)
        deliver(node, "LeaderAndIsr", 7, leader_and_isr(
            7, [("__consumer_offsets", 7, mine, 1, [mine, other], [mine], 0), (topic(), 0, mine, 1, [mine], [mine], 0)],
            epoch))
        deliver(node, "LeaderAndIsr", 7, leader_and_isr(  # a new epoch, the same leader: no election
            7, [("__consumer_offsets", 7, mine, 2, [mine, other], [mine, other], 1)], epoch))
        deliver(node, "LeaderAndIsr", 7, leader_and_isr(
            7, [("__consumer_offsets", 7, other, 3, [mine, other], [other], 2)], epoch))
        deliver(node, "StopReplica", 4, stop_replica(4, [("__consumer_offsets", 7, -2)], epoch, True))
    finally:
        del coordinator.on_leadership_change
    offsets = ("__consumer_offsets", 7)
    assert spy.calls == [("leadership", [offsets], []), ("leadership", [], [offsets]), ("leadership", [], [offsets])]


# --- StopReplica --------------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(ApiKey.STOP_REPLICA))
def test_stop_replica_with_delete_takes_the_partition_out_and_deletes_its_log(node, fetchers, version):
    t, mine = topic(), me(node)
    epoch = controller_epoch(node)
    deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 1, [mine], [mine], 0)], epoch))
    directory = partition(node, t).log.directory
    fetchers.calls.clear()
    resp = deliver(node, "StopReplica", version, stop_replica(version, [(t, 0, -2)], epoch, True))
    assert resp.error_code == ErrorCode.NONE
    assert [(e.topic_name, e.partition_index, e.error_code) for e in resp.partition_errors] == [(t, 0, ErrorCode.NONE)]
    assert partition(node, t) is None and not os.path.exists(directory)
    assert node.call(node.broker.log_manager.get_log, t, 0) is None
    assert fetchers.calls == [("remove", [(t, 0)])]


@pytest.mark.parametrize("version", [0, 3])
def test_stop_replica_without_delete_stops_fetching_and_keeps_the_replica(node, fetchers, version):
    t, mine, other = topic(), me(node), me(node) + 1
    epoch = controller_epoch(node)
    deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, other, 1, [other, mine], [other], 0)], epoch))
    fetchers.calls.clear()
    resp = deliver(node, "StopReplica", version, stop_replica(version, [(t, 0, 2)], epoch, False))
    assert [e.error_code for e in resp.partition_errors] == [ErrorCode.NONE]
    assert partition(node, t) is not None and fetchers.calls == [("remove", [(t, 0)])]


def test_stop_replica_fences_old_epochs_and_stale_controllers(node, newer_epoch):
    t, mine, epoch = topic(), me(node), newer_epoch
    deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 5, [mine], [mine], 0)], epoch))
    resp = deliver(node, "StopReplica", 3, stop_replica(3, [(t, 0, 5)], epoch, True))
    assert [e.error_code for e in resp.partition_errors] == [ErrorCode.FENCED_LEADER_EPOCH]
    resp = deliver(node, "StopReplica", 3, stop_replica(3, [(t, 0, 6)], epoch - 1, True))
    assert resp.error_code == ErrorCode.STALE_CONTROLLER_EPOCH and resp.partition_errors == []
    assert partition(node, t) is not None


# --- UpdateMetadata ---------------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(ApiKey.UPDATE_METADATA))
def test_update_metadata_remembers_the_controller_epoch_at_every_version(node, newer_epoch, version):
    epoch = newer_epoch
    resp = deliver(node, "UpdateMetadata", version, update_metadata(version, epoch, [(topic(), 0, 1)]))
    assert resp.error_code == ErrorCode.NONE and controller_epoch(node) == epoch
    resp = deliver(node, "UpdateMetadata", version, update_metadata(version, epoch - 1))
    assert resp.error_code == ErrorCode.STALE_CONTROLLER_EPOCH and controller_epoch(node) == epoch


def test_update_metadata_hands_topics_being_deleted_to_the_group_coordinator(node):
    coordinator = node.broker.group_coordinator
    seen = []
    coordinator.on_topics_deleted = lambda topics: seen.append(set(topics))
    try:
        epoch = controller_epoch(node)
        deliver(node, "UpdateMetadata", 8, update_metadata(8, epoch, [("going", 0, -2), ("staying", 0, 1)]))
        deliver(node, "UpdateMetadata", 4, update_metadata(4, epoch, [("going", 1, -2)]))
    finally:
        del coordinator.on_topics_deleted
    assert seen == [{"going"}, {"going"}]


# --- over the wire --------------------------------------------------------------------------------
def test_the_requests_are_served_over_the_wire(node):
    t, mine = topic(), me(node)
    client = WireClient(node.bootstrap)
    try:
        _, resp = client.request("LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 1, [mine], [mine], 0)],
                                                                   controller_epoch(node)))
        assert partition_errors(7, resp) == {0: ErrorCode.NONE}
        _, resp = client.request("UpdateMetadata", 8, update_metadata(8, controller_epoch(node)))
        assert resp.error_code == ErrorCode.NONE
        _, resp = client.request("StopReplica", 4, stop_replica(4, [(t, 0, -2)], controller_epoch(node), True))
        assert [e.error_code for e in resp.partition_errors] == [ErrorCode.NONE]
    finally:
        client.close()


def test_requests_are_carried_out_one_at_a_time_in_arrival_order(node, fetchers):
    """The first request awaits its log's creation in a worker thread; the second, newer one
    arriving meanwhile waits for it instead of deciding against a half-done state."""
    t, mine, other = topic(), me(node), me(node) + 1
    epoch = controller_epoch(node)
    first = leader_and_isr(7, [(t, 0, mine, 1, [mine, other], [mine], 0)], epoch)
    second = leader_and_isr(7, [(t, 0, other, 2, [mine, other], [other], 1)], epoch)
    handler = HANDLERS[ApiKey.LEADER_AND_ISR]

    async def both():
        ctx = RequestContext(_Local(node.broker), ApiKey.LEADER_AND_ISR, 7, 1, "controller", 7)
        return await asyncio.gather(handler(ctx, first), handler(ctx, second))

    answers = node.call(both)
    assert [partition_errors(7, a) for a in answers] == [{0: ErrorCode.NONE}, {0: ErrorCode.NONE}]
    part = partition(node, t)
    assert (part.leader_id, part.leader_epoch, part.zk_version) == (other, 2, 1)


def test_logs_whose_directory_fsync_fails_are_a_storage_error_and_taken_later(node, monkeypatch):
    """A LeaderAndIsr's new logs share one sync per log directory (LogManager.creation_batch),
    done before the answer: when it fails, none of them is hosted or answered NONE."""
    from odradek.storage import deferred_sync
    t, mine = topic(), me(node)
    real = deferred_sync.sync_paths

    def refuse(_paths):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(deferred_sync, "sync_paths", refuse)
    epoch = controller_epoch(node)
    resp = deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, [(t, 0, mine, 1, [mine], [mine], 0),
                                                                (t, 1, mine, 1, [mine], [mine], 0)], epoch))
    assert [e.error_code for tp in resp.topics for e in tp.partition_errors] == [ErrorCode.KAFKA_STORAGE_ERROR] * 2
    assert partition(node, t, 0) is None and partition(node, t, 1) is None
    assert node.broker.log_manager.get_log(t, 0) is None

    monkeypatch.setattr(deferred_sync, "sync_paths", real)
    assert node.call(retry_unhosted_roles, node.broker) == 2
    assert partition(node, t, 0).is_leader(mine) and partition(node, t, 1).is_leader(mine)


def test_new_leaders_epochs_are_synced_together_and_a_failed_sync_is_a_storage_error(node, monkeypatch):
    """A failover makes thousands of hosted followers leaders: their leader-epoch-checkpoints
    are made durable with one sync per log directory before the answer (state_change
    _make_leaders_durably), not two fsyncs each; a failed sync answers KAFKA_STORAGE_ERROR."""
    from odradek.storage import deferred_sync
    t, mine, other = topic(), me(node), me(node) + 1
    epoch = controller_epoch(node)
    followers = [(t, p, other, 1, [mine, other], [mine, other], 0) for p in range(3)]
    deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, followers, epoch))
    real, synced = deferred_sync.sync_paths, []
    monkeypatch.setattr(deferred_sync, "sync_paths", lambda paths: synced.append(list(paths)) or real(paths))
    leaders = [(t, p, mine, 2, [mine, other], [mine, other], 1) for p in range(3)]
    resp = deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, leaders, epoch))
    assert [e.error_code for tp in resp.topics for e in tp.partition_errors] == [ErrorCode.NONE] * 3
    assert len(synced) == 1 and sum(p.endswith("leader-epoch-checkpoint") for p in synced[0]) == 3
    assert all(partition(node, t, p).is_leader(mine) for p in range(3))

    def refuse(_paths):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(deferred_sync, "sync_paths", refuse)
    leaders = [(t, p, mine, 3, [mine, other], [mine, other], 2) for p in range(3)]
    resp = deliver(node, "LeaderAndIsr", 7, leader_and_isr(7, leaders, epoch))
    assert [e.error_code for tp in resp.topics for e in tp.partition_errors] == [ErrorCode.KAFKA_STORAGE_ERROR] * 3


def test_a_large_leader_and_isr_lets_other_requests_in_between_its_durable_turns(node, monkeypatch):
    """A failover's LeaderAndIsr of thousands of partitions takes `ROLES_PER_TURN` at a time,
    the loop free between two turns; whenever other work runs, every partition led so far has
    its new epoch on disk (each turn's checkpoints synced before the loop moves on)."""
    from odradek.replication import state_change
    from odradek.storage import deferred_sync
    t, mine, other = topic(), me(node), me(node) + 1
    epoch = controller_epoch(node)
    deliver(node, "LeaderAndIsr", 7, leader_and_isr(
        7, [(t, p, other, 1, [mine, other], [mine, other], 0) for p in range(5)], epoch))
    monkeypatch.setattr(state_change, "ROLES_PER_TURN", 2)
    real, synced = deferred_sync.sync_paths, []
    monkeypatch.setattr(deferred_sync, "sync_paths", lambda paths: synced.append(
        sum(p.endswith("leader-epoch-checkpoint") for p in paths)) or real(paths))
    body = leader_and_isr(7, [(t, p, mine, 2, [mine, other], [mine, other], 1) for p in range(5)], epoch)
    handler = HANDLERS[ApiKey.LEADER_AND_ISR]
    seen = []  # (partitions led at epoch 2, checkpoints synced) each time other work ran

    async def meanwhile():
        ctx = RequestContext(_Local(node.broker), ApiKey.LEADER_AND_ISR, 7, 1, "controller", 7)
        answer = asyncio.ensure_future(handler(ctx, body))
        while not answer.done():
            led = sum(node.broker.replica_manager.get(t, p).leader_epoch == 2 for p in range(5))
            seen.append((led, sum(synced)))
            await asyncio.sleep(0)
        return await answer

    resp = node.call(meanwhile)
    assert [e.error_code for tp in resp.topics for e in tp.partition_errors] == [ErrorCode.NONE] * 5
    assert synced == [2, 2, 1]
    assert {(2, 2), (4, 4)} <= set(seen), seen  # in between the turns
    assert all(led == durable for led, durable in seen), seen
