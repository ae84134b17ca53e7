"""TEMPORARY until the controller edge is merged: the solo stand-in writes partition states
as the controller's first election does (these were ClusterMetadata's tests when it wrote
them itself at creation)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from odradek.metadata.cluster_metadata import ClusterMetadata
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.layout import BrokerInfo, Endpoint, PartitionState
from odradek.server import solo_controller
from odradek.server.solo_controller import SoloController


@pytest.fixture
def store(tmp_path):
    with EmbeddedStore(tmp_path / "meta") as store:
        yield store


@pytest.fixture
def metadata(store):
    metadata = ClusterMetadata(store)
    for broker_id in (1000, 1001, 1002):
        metadata.register_broker(BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", broker_id),)))
    yield metadata
    metadata.close()


def solo(metadata) -> SoloController:
    return SoloController(SimpleNamespace(metadata=metadata, metadata_image=metadata.snapshot, broker_id=1000))


def test_the_first_live_replica_leads_and_dead_ones_stay_out_of_the_isr(store, metadata):
    metadata.create_topic("t", {0: [1005, 1001, 1000], 1: [1006, 1007, 1008]})
    solo(metadata).write_missing_states("t")
    assert metadata.partition_state("t", 0) == PartitionState(1001, 0, (1001, 1000), 0)
    # No live replica: no state znode, as Kafka leaves such a partition waiting for one.
    assert metadata.partition_state("t", 1) is None
    assert store.exists("/brokers/topics/t/partitions/1/state") is None


def test_states_carry_the_controller_epoch_and_existing_ones_are_kept(metadata):
    assert metadata.try_become_controller(1000) == 1
    metadata.create_topic("t", {0: [1000]})
    solo(metadata).write_missing_states("t")
    assert metadata.partition_state("t", 0).controller_epoch == 1
    metadata.set_partition_state("t", 0, PartitionState(1000, 5, (1000,), 1), 0)
    metadata.add_partitions("t", {1: [1001]})
    solo(metadata).write_missing_states("t")
    assert metadata.partition_state("t", 0).leader_epoch == 5
    assert metadata.partition_state("t", 1) == PartitionState(1001, 0, (1001,), 1)


def test_a_big_topic_is_written_in_batches(store, metadata, monkeypatch):
    monkeypatch.setattr(solo_controller, "MAX_OPS_PER_MULTI", 7)
    metadata.create_topic("big", {p: [1000 + p % 3] for p in range(50)})
    solo(metadata).write_missing_states("big")
    assert len(metadata.snapshot().partition_states["big"]) == 50
    assert store.children("/brokers/topics/big/partitions") == sorted(str(p) for p in range(50))


def test_a_deletion_removes_the_znodes_and_the_mark(store, metadata):
    metadata.create_topic("t", {0: [1000]}, {"a": "b"})
    metadata.delete_topic("t")
    solo(metadata).remove_topic_znodes("t")
    for path in ("/brokers/topics/t", "/config/topics/t", "/admin/delete_topics/t"):
        assert store.exists(path) is None
    image = metadata.snapshot()
    assert image.topic("t") is None and image.topics_being_deleted == frozenset()
