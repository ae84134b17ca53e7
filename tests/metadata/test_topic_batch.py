"""metadata/topic_batch.create_topics: many topics written together, each refused for the
reasons ClusterMetadata.create_topic refuses it."""

from __future__ import annotations

import pytest

from odradek.metadata import layout, topic_batch
from odradek.metadata.cluster_metadata import ClusterMetadata
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.errors import TopicExistsError
from odradek.metadata.layout import BrokerInfo, Endpoint


@pytest.fixture
def metadata(tmp_path):
    with EmbeddedStore(tmp_path / "meta") as store:
        md = ClusterMetadata(store, clock=lambda: 1700000000.5)
        md.register_broker(BrokerInfo(1, (Endpoint("PLAINTEXT", "h", 9092),)))
        yield md
        md.close()


def test_topics_written_together_each_with_its_own_outcome(metadata):
    metadata.create_topic("old", {0: [1]})
    metadata.delete_topic("old")
    calls = []
    multi = metadata.store.multi
    metadata.store.multi = lambda ops: calls.append(len(ops)) or multi(ops)
    out = topic_batch.create_topics(metadata, [
        ("a", {0: [1], 1: [1]}, {"retention.ms": "5"}), ("old", {0: [1]}, None), ("b.c", {0: [1]}, None),
        ("b_c", {0: [1]}, None), ("bad", {1: [1]}, None), ("d", {0: [1]}, None)])
    assert calls == [6]  # one multi: a, b.c, d (config + assignment each)
    assert [type(o).__name__ for o in out] == ["TopicAssignment", "TopicExistsError", "TopicAssignment",
                                               "InvalidTopicError", "InvalidReplicaAssignmentError",
                                               "TopicAssignment"]
    image = metadata.snapshot()
    assert image.topic("a").topic_id == out[0].topic_id and len(image.topic("a").partitions) == 2
    assert metadata.topic_config("a") == {"retention.ms": "5"}
    assert image.topic("d") is not None and image.topic("b_c") is None


def test_a_topic_created_by_someone_else_meanwhile_fails_alone(metadata, monkeypatch):
    children = metadata.store.children
    raced = []

    def look_then_race(path):
        found = children(path)
        if path == layout.BROKER_TOPICS and not raced:
            raced.append(path)
            metadata.create_topic("x", {0: [1]})  # between the look and the write
        return found

    monkeypatch.setattr(metadata.store, "children", look_then_race)
    out = topic_batch.create_topics(metadata, [("w", {0: [1]}, None), ("x", {0: [1]}, None), ("y", {0: [1]}, None)])
    assert isinstance(out[1], TopicExistsError)
    assert not isinstance(out[0], Exception) and not isinstance(out[2], Exception)
    assert {"w", "x", "y"} <= set(metadata.snapshot().topics)


def test_writes_are_cut_into_multis_of_bounded_size(metadata, monkeypatch):
    monkeypatch.setattr(topic_batch, "MULTI_BYTES", 1)
    calls = []
    multi = metadata.store.multi
    metadata.store.multi = lambda ops: calls.append(len(ops)) or multi(ops)
    out = topic_batch.create_topics(metadata, [(f"t{i}", {0: [1]}, None) for i in range(3)])
    assert calls == [2, 2, 2] and not any(isinstance(o, Exception) for o in out)
