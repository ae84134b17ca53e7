"""ClusterMetadata on the embedded store: Kafka's layout written, the cache kept in step."""

from __future__ import annotations

import json
import uuid

import pytest

from odradek.metadata import layout
from odradek.metadata.cluster_metadata import ClusterMetadata
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.errors import (
    BadVersionError,
    BrokerIdInUseError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicError,
)
from odradek.metadata.layout import BrokerInfo, Endpoint, PartitionState


def broker(broker_id: int, rack: str | None = None) -> BrokerInfo:
    return BrokerInfo(
        broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id % 1000),), rack
    )


@pytest.fixture
def store(tmp_path):
    with EmbeddedStore(tmp_path / "meta") as store:
        yield store


@pytest.fixture
def metadata(store):
    metadata = ClusterMetadata(store, clock=lambda: 1700000000.5)
    for broker_id in (1000, 1001, 1002):
        metadata.register_broker(broker(broker_id))
    yield metadata
    metadata.close()


def stored_json(store, path):
    return json.loads(store.get(path)[0])


def elect(metadata, name, partitions=None):
    """Write partition states as a controller would (the first replica leads, all replicas
    in the ISR): ClusterMetadata itself writes none."""
    topic = metadata.topic(name)
    for p in partitions if partitions is not None else topic.partitions:
        replicas = topic.partitions[p]
        metadata.set_partition_state(name, p, PartitionState(replicas[0], 0, replicas, 0), -1)


# -- cluster id and brokers -----------------------------------------------------------------


def test_cluster_id_is_made_once_and_kept(tmp_path):
    with EmbeddedStore(tmp_path) as store:
        first = ClusterMetadata(store).cluster_id()
        assert len(first) == 22
        assert ClusterMetadata(store).cluster_id() == first
        assert stored_json(store, "/cluster/id") == {"version": "1", "id": first}
    with EmbeddedStore(tmp_path) as store:
        assert ClusterMetadata(store).cluster_id() == first


def test_startup_creates_kafkas_persistent_paths(store):
    ClusterMetadata(store)
    for path in layout.PERSISTENT_PATHS:
        assert store.exists(path) is not None


def test_brokers_register_ephemerally(tmp_path):
    with EmbeddedStore(tmp_path) as store:
        metadata = ClusterMetadata(store, clock=lambda: 12.0)
        metadata.register_broker(broker(1001, "r1"))
        metadata.register_broker(broker(1000))
        assert [b.broker_id for b in metadata.brokers()] == [1000, 1001]
        assert metadata.brokers()[1].rack == "r1"
        assert stored_json(store, "/brokers/ids/1000")["timestamp"] == "12000"
        epoch = metadata.broker_epoch
        metadata.register_broker(broker(1000))  # this session's own: kept (a checked create)
        assert metadata.broker_epoch == epoch > 0
        store.create("/brokers/ids/1003", broker(1003).to_json(0))  # persistent: not ours
        with pytest.raises(BrokerIdInUseError):
            metadata.register_broker(broker(1003))
        store.delete("/brokers/ids/1003")
        metadata.unregister_broker(1001)
        assert [b.broker_id for b in metadata.brokers()] == [1000]
    with EmbeddedStore(tmp_path) as store:
        assert ClusterMetadata(store).brokers() == []


def test_another_instance_sees_registrations_through_watches(store, metadata):
    other = ClusterMetadata(store)
    assert [b.broker_id for b in other.brokers()] == [1000, 1001, 1002]
    metadata.unregister_broker(1002)
    assert [b.broker_id for b in other.brokers()] == [1000, 1001]


# -- topic creation -------------------------------------------------------------------------


def test_create_topic_writes_kafkas_layout(store, metadata):
    topic = metadata.create_topic(
        "orders", {0: [1000, 1001], 1: [1001, 1002], 2: [1002, 1000]}, {"retention.ms": "60000"}
    )
    assert topic.partitions == {0: (1000, 1001), 1: (1001, 1002), 2: (1002, 1000)}
    doc = stored_json(store, "/brokers/topics/orders")
    assert doc == {
        "version": 3,
        "partitions": {"0": [1000, 1001], "1": [1001, 1002], "2": [1002, 1000]},
        "topic_id": layout.uuid_to_kafka(topic.topic_id),
        "adding_replicas": {},
        "removing_replicas": {},
    }
    assert stored_json(store, "/config/topics/orders") == {
        "version": 1,
        "config": {"retention.ms": "60000"},
    }
    # Partition states are the controller's to write (Kafka's AdminZkClient writes none).
    assert store.exists("/brokers/topics/orders/partitions") is None
    assert metadata.topic("orders") == topic
    assert metadata.topic_by_id(topic.topic_id) == topic
    assert metadata.topic_config("orders") == {"retention.ms": "60000"}
    assert metadata.partition_state("orders", 2) is None


def test_a_given_topic_id_is_used_and_must_be_free(metadata):
    topic_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert metadata.create_topic("a", {0: [1000]}, topic_id=topic_id).topic_id == topic_id
    with pytest.raises(TopicExistsError):
        metadata.create_topic("b", {0: [1000]}, topic_id=topic_id)
    with pytest.raises(TopicExistsError):
        metadata.create_topic("c", {0: [1000]}, topic_id=layout.ZERO_UUID)


def test_topic_names_must_be_new_legal_and_not_collide(metadata):
    metadata.create_topic("my.topic", {0: [1000]})
    with pytest.raises(TopicExistsError):
        metadata.create_topic("my.topic", {0: [1001]})
    with pytest.raises(InvalidTopicError, match="collides"):
        metadata.create_topic("my_topic", {0: [1000]})
    with pytest.raises(InvalidTopicError):
        metadata.create_topic("bad name", {0: [1000]})
    assert set(metadata.topics()) == {"my.topic"}


@pytest.mark.parametrize(
    "assignment, error",
    [
        ({}, InvalidPartitionsError),
        ({1: [1000]}, InvalidReplicaAssignmentError),
        ({0: [1000], 2: [1000]}, InvalidReplicaAssignmentError),
        ({0: [1000, 1000]}, InvalidReplicaAssignmentError),
        ({0: [1000, 1001], 1: [1000]}, InvalidReplicaAssignmentError),
        ({0: []}, InvalidReplicaAssignmentError),
        ({0: [-1]}, InvalidReplicaAssignmentError),
        ({0: ["x"]}, InvalidReplicaAssignmentError),
    ],
)
def test_malformed_assignments_are_refused(store, metadata, assignment, error):
    with pytest.raises(error):
        metadata.create_topic("t", assignment)
    assert store.exists("/brokers/topics/t") is None


def test_configs_must_be_strings(metadata):
    with pytest.raises(InvalidConfigError):
        metadata.create_topic("t", {0: [1000]}, {"retention.ms": 5})
    assert metadata.topic("t") is None


# -- partitions, deletion, state updates ----------------------------------------------------


def test_add_partitions_extends_the_assignment(store, metadata):
    metadata.create_topic("t", {0: [1000, 1001]})
    topic = metadata.add_partitions("t", {1: [1001, 1002], 2: [1002, 1000]})
    assert topic.partitions == {0: (1000, 1001), 1: (1001, 1002), 2: (1002, 1000)}
    assert stored_json(store, "/brokers/topics/t")["partitions"]["2"] == [1002, 1000]
    assert metadata.partition_state("t", 2) is None  # the controller's to write
    assert metadata.topic("t").topic_id == topic.topic_id


def test_add_partitions_checks_numbering_and_replication_factor(metadata):
    metadata.create_topic("t", {0: [1000, 1001]})
    with pytest.raises(InvalidReplicaAssignmentError):
        metadata.add_partitions("t", {2: [1000, 1001]})
    with pytest.raises(InvalidReplicaAssignmentError, match="replication factor"):
        metadata.add_partitions("t", {1: [1000]})
    with pytest.raises(InvalidPartitionsError):
        metadata.add_partitions("t", {})
    with pytest.raises(UnknownTopicError):
        metadata.add_partitions("nope", {1: [1000]})
    assert len(metadata.topic("t").partitions) == 1


def test_delete_topic_only_marks_it_for_the_controller(store, metadata):
    topic = metadata.create_topic("t", {0: [1000], 1: [1001]}, {"a": "b"})
    metadata.delete_topic("t")
    metadata.delete_topic("t")  # marking twice is harmless
    assert store.exists("/admin/delete_topics/t") is not None
    image = metadata.snapshot()
    assert image.topics_being_deleted == {"t"} and image.topic("t") == topic
    assert store.exists("/brokers/topics/t") is not None and store.exists("/config/topics/t") is not None
    with pytest.raises(TopicExistsError):
        metadata.create_topic("t", {0: [1000]})
    store.create("/admin/delete_topics/gone")  # znodes removed, the mark not yet
    with pytest.raises(TopicExistsError, match="marked for deletion"):
        metadata.create_topic("gone", {0: [1000]})
    with pytest.raises(UnknownTopicError):
        metadata.delete_topic("nope")


def test_delete_topics_marks_them_together(store, metadata, monkeypatch):
    """One multi for the marks (not a create per topic); a topic already marked and an
    unknown one are fine, the unknown one is returned."""
    for name in ("a", "b", "c"):
        metadata.create_topic(name, {0: [1000]})
    metadata.delete_topic("c")
    multis, creates = [], []
    monkeypatch.setattr(store, "multi", lambda ops, real=store.multi: multis.append(ops) or real(ops))
    monkeypatch.setattr(store, "create", lambda *a, real=store.create, **k: creates.append(a) or real(*a, **k))
    assert metadata.delete_topics(["a", "nope", "b", "c"]) == ["nope"]
    assert [a for a in creates if a[0].startswith("/admin/delete_topics/")] == []
    assert [len(ops) for ops in multis] == [2]
    assert metadata.snapshot().topics_being_deleted == {"a", "b", "c"}


def test_set_partition_state_is_a_compare_and_set(metadata):
    metadata.create_topic("t", {0: [1000, 1001]})
    elect(metadata, "t")
    current = metadata.partition_state("t", 0)
    new = metadata.set_partition_state(
        "t", 0, PartitionState(1001, 1, (1001,), 0), current.zk_version
    )
    assert new.zk_version == current.zk_version + 1
    assert metadata.partition_state("t", 0) == new
    with pytest.raises(BadVersionError):
        metadata.set_partition_state(
            "t", 0, PartitionState(1000, 2, (1000,), 0), current.zk_version
        )
    assert metadata.partition_state("t", 0).leader == 1001


def test_set_partition_state_creates_a_missing_state(metadata):
    metadata.create_topic("t", {0: [1009]})
    with pytest.raises(BadVersionError):
        metadata.set_partition_state("t", 0, PartitionState(1009, 0, (1009,), 0), 0)
    made = metadata.set_partition_state("t", 0, PartitionState(1009, 0, (1009,), 0), -1)
    assert made.zk_version == 0 and metadata.partition_state("t", 0) == made
    with pytest.raises(UnknownTopicError):
        metadata.set_partition_state("nope", 0, made, -1)


# -- configs --------------------------------------------------------------------------------


def test_topic_and_broker_configs(store, metadata):
    metadata.create_topic("t", {0: [1000]})
    assert metadata.topic_config("t") == {}
    metadata.set_topic_config("t", {"cleanup.policy": "compact"})
    assert metadata.topic_config("t") == {"cleanup.policy": "compact"}
    assert metadata.snapshot().topic_config("t") == {"cleanup.policy": "compact"}
    with pytest.raises(UnknownTopicError):
        metadata.set_topic_config("nope", {})
    assert metadata.broker_config(None) == {}
    metadata.set_broker_config(None, {"log.retention.ms": "1"})
    metadata.set_broker_config(1000, {"log.retention.ms": "2"})
    assert metadata.broker_config(None) == {"log.retention.ms": "1"}
    assert metadata.broker_config(1000) == {"log.retention.ms": "2"}
    assert stored_json(store, "/config/brokers/<default>")["config"] == {"log.retention.ms": "1"}


# -- the cache ------------------------------------------------------------------------------


def test_images_are_immutable_snapshots(metadata):
    metadata.create_topic("t", {0: [1000, 1001]})
    elect(metadata, "t")
    before = metadata.snapshot()
    metadata.set_partition_state("t", 0, PartitionState(1001, 1, (1001,), 0), 0)
    metadata.create_topic("u", {0: [1000]})
    elect(metadata, "u")
    assert before.partition_state("t", 0).leader == 1000 and before.topic("u") is None
    after = metadata.snapshot()
    assert after.leader("t", 0) == 1001 and after.leader("u", 0) == 1000
    assert after.leader("nope", 0) == layout.NO_LEADER
    with pytest.raises(TypeError):
        after.topics["x"] = None


def test_changes_by_another_writer_reach_the_cache(store, metadata):
    reader = ClusterMetadata(store)
    metadata.create_topic("t", {0: [1000, 1001]}, {"k": "v"})
    assert reader.topic("t") == metadata.topic("t")
    assert reader.topic_config("t") == {"k": "v"}
    metadata.add_partitions("t", {1: [1001, 1000]})
    elect(metadata, "t", [1])
    assert reader.partition_state("t", 1).leader == 1001
    metadata.set_partition_state("t", 0, PartitionState(1001, 3, (1001,), 0), -1)
    assert reader.partition_state("t", 0).leader_epoch == 3
    metadata.set_topic_config("t", {})
    assert reader.topic_config("t") == {}
    metadata.try_become_controller(1002)
    assert reader.controller_id() == 1002
    metadata.delete_topic("t")
    assert reader.snapshot().topics_being_deleted == {"t"}


def test_listeners_get_each_new_image(metadata):
    images = []
    metadata.add_listener(images.append)
    metadata.create_topic("t", {0: [1000]})
    assert images and images[-1].topic("t") is not None
    assert images[-1] is metadata.snapshot()


def test_metadata_is_reloaded_from_disk(tmp_path):
    with EmbeddedStore(tmp_path) as store:
        metadata = ClusterMetadata(store)
        metadata.register_broker(broker(1000))
        topic = metadata.create_topic("t", {0: [1000], 1: [1000]}, {"a": "1"})
        metadata.set_partition_state("t", 1, PartitionState(1000, 4, (1000,), 0), -1)
    with EmbeddedStore(tmp_path) as store:
        image = ClusterMetadata(store).snapshot()
        assert image.topic("t") == topic and image.topic_by_id(topic.topic_id) == topic
        assert image.partition_state("t", 1).leader_epoch == 4
        assert image.topic_config("t") == {"a": "1"}
        assert image.brokers == {}


def test_malformed_znodes_are_skipped_not_fatal(store, metadata):
    metadata.create_topic("t", {0: [1000]})
    elect(metadata, "t")
    store.set("/brokers/topics/t/partitions/0/state", b"garbage")
    assert metadata.partition_state("t", 0) is None
    store.create("/brokers/topics/junk", b"{")
    assert metadata.topic("junk") is None and metadata.topic("t") is not None
    store.create("/brokers/ids/2000", b"[]", ephemeral=True)
    assert 2000 not in metadata.snapshot().brokers


# -- controller -----------------------------------------------------------------------------


def test_one_controller_at_a_time_and_epochs_grow(store, metadata):
    other = ClusterMetadata(store)
    assert metadata.try_become_controller(1000) == 1
    assert other.try_become_controller(1001) is None
    assert other.controller_id() == 1000
    assert stored_json(store, "/controller")["brokerid"] == 1000
    other.resign_controller(1001)  # not the controller: no effect
    assert metadata.controller_id() == 1000
    metadata.resign_controller(1000)
    assert other.controller_id() == layout.NO_LEADER
    assert other.try_become_controller(1001) == 2
    assert metadata.controller_epoch() == (2, 2)
