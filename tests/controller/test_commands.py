"""Commands: writes applied to a store as one guarded multi; the request batch's merging."""

from __future__ import annotations

import uuid

import pytest

from odradek.controller.commands import (
    CreateZnode,
    DeleteZnode,
    LeaderAndIsrRequest,
    LiveBroker,
    SetZnode,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from odradek.controller.controller_context import ControllerContext, ReplicaAssignment
from odradek.controller.request_batch import RequestBatch
from odradek.metadata import layout
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.errors import BadVersionError, NodeExistsError
from odradek.metadata.layout import PartitionState


@pytest.fixture
def store():
    s = EmbeddedStore()
    s.create(layout.CONTROLLER_EPOCH, b"1")  # version 0
    return s


def test_writes_are_guarded_by_the_controller_epoch_version(store):
    CreateZnode("/a", 0, b"x").apply(store)
    SetZnode("/a", 0, b"y", 0).apply(store)
    assert store.get("/a") == (b"y", 1)
    store.set(layout.CONTROLLER_EPOCH, b"2")  # a newer controller
    with pytest.raises(BadVersionError):
        SetZnode("/a", 0, b"z", 1).apply(store)
    with pytest.raises(BadVersionError):
        CreateZnode("/b", 0).apply(store)
    assert store.exists("/b") is None


def test_set_is_conditional_on_the_expected_version(store):
    store.create("/a", b"x")
    store.set("/a", b"someone else")
    with pytest.raises(BadVersionError):
        SetZnode("/a", 0, b"mine", 0).apply(store)


def test_create_exists_ok(store):
    store.create("/a")
    CreateZnode("/a", 0, exists_ok=True).apply(store)
    with pytest.raises(NodeExistsError):
        CreateZnode("/a", 0).apply(store)


def test_recursive_delete_and_missing_znode(store):
    store.create("/t/partitions/0/state", b"s", make_parents=True)
    DeleteZnode("/t", 0, recursive=True).apply(store)
    assert store.exists("/t") is None
    DeleteZnode("/t", 0).apply(store)  # already gone: fine


def batch_context():
    ctx = ControllerContext(controller_id=1, epoch=2, epoch_zk_version=0)
    ctx.live_brokers = {b: LiveBroker(b, 100 + b) for b in (1, 2)}
    ctx.assignments[("t", 0)] = ReplicaAssignment((1, 2, 3))
    ctx.topic_ids["t"] = uuid.UUID(int=1)
    ctx.leadership[("t", 0)] = PartitionState(1, 4, (1, 2), 2, 7)
    return ctx


def test_batch_merges_per_broker_and_orders_requests():
    ctx = batch_context()
    batch = RequestBatch(ctx)
    state = ctx.leadership[("t", 0)]
    batch.add_leader_and_isr([1, 2, 3], ("t", 0), state, is_new=True)
    batch.add_leader_and_isr([1], ("t", 0), state, is_new=False)  # is_new stays set
    batch.add_stop_replica([2], ("t", 0), delete=True)
    batch.add_stop_replica([2], ("t", 0), delete=False)  # delete stays set
    batch.add_write(SetZnode("/x", 0, b"", 1))
    commands = batch.drain()
    assert isinstance(commands[0], SetZnode)
    kinds = [(type(c).__name__, c.broker_id) for c in commands[1:]]
    assert kinds == [
        ("LeaderAndIsrRequest", 1), ("UpdateMetadataRequest", 1),
        ("LeaderAndIsrRequest", 2), ("UpdateMetadataRequest", 2), ("StopReplicaRequest", 2),
    ]  # broker 3 is not live: nothing for it
    lai = commands[1]
    assert isinstance(lai, LeaderAndIsrRequest) and lai.partition_states[0].is_new
    assert (lai.broker_epoch, lai.controller_epoch, lai.controller_id) == (101, 2, 1)
    stop = commands[-1]
    assert isinstance(stop, StopReplicaRequest) and stop.partitions[0].delete_partition
    um = commands[2]
    assert isinstance(um, UpdateMetadataRequest)
    assert um.partition_states[0].offline_replicas == (3,)
    assert [b.broker_id for b in um.live_brokers] == [1, 2]
    assert batch.is_empty()


def test_update_metadata_calls_replicas_of_brokers_shutting_down_offline():
    """Kafka's addUpdateMetadataRequestForBrokers asks isReplicaOnline without counting
    brokers in controlled shutdown: broker 2 still gets requests, but is offline in them."""
    ctx = batch_context()
    ctx.shutting_down.add(2)
    batch = RequestBatch(ctx)
    batch.add_update_metadata([1, 2], [("t", 0)])
    sent = {c.broker_id: c for c in batch.drain()}
    assert sorted(sent) == [1, 2]
    for um in sent.values():
        assert isinstance(um, UpdateMetadataRequest)
        assert um.partition_states[0].offline_replicas == (2, 3)
