"""``MetadataPartitionsCache``: a topic's answered partitions are reused only while every input
they were built from is the same, and rebuilt as soon as one differs; and the Metadata handler
that uses it answers every change of the image."""

from __future__ import annotations

import uuid
from dataclasses import replace
from types import MappingProxyType, SimpleNamespace

from odradek.metadata.alive_brokers import AliveBrokers
from odradek.metadata.image import MetadataImage, with_entry
from odradek.metadata.layout import BrokerInfo, Endpoint, PartitionState, TopicAssignment
from odradek.metadata.offline_replicas import OfflineReplicas, ReportedPartition
from odradek.protocol.generated.metadata_request import MetadataRequest, MetadataRequestTopic
from odradek.server import authorize
from odradek.server.handlers import metadata as metadata_handler
from odradek.server.metadata_partitions import MetadataPartitionsCache


def assignment(name: str = "t"):
    return SimpleNamespace(name=name, partitions={0: (1, 2)})


class Builds:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> list:
        self.count += 1
        return [f"partitions #{self.count}"]


def test_the_same_inputs_reuse_the_partitions_built():
    cache, build = MetadataPartitionsCache(), Builds()
    a, states, offline = assignment(), MappingProxyType({0: "state"}), MappingProxyType({})
    first = cache.partitions(a, states, frozenset({1, 2}), offline, build)
    again = cache.partitions(a, states, frozenset({2, 1}), offline, build)  # an equal live set
    assert again is first and build.count == 1


def test_any_input_changed_builds_again():
    cache, build = MetadataPartitionsCache(), Builds()
    a, states, live, offline = assignment(), MappingProxyType({0: "state"}), frozenset({1, 2}), MappingProxyType({})
    cache.partitions(a, states, live, offline, build)
    changes = [
        (assignment(), states, live, offline),  # the topic reassigned (a new assignment)
        (a, MappingProxyType({0: "state"}), live, offline),  # new states (equal, but another image's)
        (a, states, frozenset({1}), offline),  # a broker gone
        (a, states, live, MappingProxyType({("t", 0): (2,)})),  # the controller's offline replicas
    ]
    for inputs in changes:
        before = build.count
        assert cache.partitions(*inputs, build) == [f"partitions #{before + 1}"]
        cache.partitions(a, states, live, offline, build)  # back to the first inputs: built again too
        assert build.count == before + 2


def test_prune_drops_topics_gone_from_the_image():
    cache, build = MetadataPartitionsCache(), Builds()
    for name in ("a", "b", "c"):
        cache.partitions(assignment(name), None, frozenset(), MappingProxyType({}), build)
    cache.prune({"b"})
    assert len(cache) == 1
    b = assignment("b")
    cache.partitions(b, None, frozenset(), MappingProxyType({}), build)
    assert build.count == 4  # "b" was built for another assignment object


class FakeBroker:
    """What the Metadata handler reads of a broker, with an image the test replaces."""

    def __init__(self, image) -> None:
        self.image = image
        self.broker_id = 1
        self.cluster_id = "c"
        self.config = {"auto.create.topics.enable": False}
        self.metadata_partitions = MetadataPartitionsCache()
        self.metadata = SimpleNamespace(alive_brokers=AliveBrokers(), offline_replicas=OfflineReplicas(),
                                        store=SimpleNamespace(connected=True))
        self.authorizer = None

    def metadata_image(self):
        return self.image

    def controller_id(self) -> int:
        return self.image.controller_id

    def is_internal_topic(self, topic: str) -> bool:
        return False


def answered(broker) -> tuple:
    """(leader, leader epoch, isr, offline replicas) of partition 0 of topic "t", v12."""
    ctx = SimpleNamespace(broker=broker, api_version=12, connection=SimpleNamespace(listener_name="PLAINTEXT"),
                          principal=None)
    request = MetadataRequest(topics=[MetadataRequestTopic(name="t")], allow_auto_topic_creation=False)
    (p,) = metadata_handler.handle(ctx, request).topics[0].partitions
    return p.leader_id, p.leader_epoch, tuple(p.isr_nodes), tuple(p.offline_replicas)


def test_metadata_answers_follow_every_image_change_of_the_topic(monkeypatch):
    """The handler answers from its cache only what the image still says: a new leader, a
    broker gone and the controller's offline replicas are each answered at once."""
    monkeypatch.setattr(authorize, "enabled", lambda ctx: False)
    brokers = {i: BrokerInfo(i, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + i),)) for i in (1, 2)}
    t = TopicAssignment("t", uuid.uuid4(), {0: (1, 2)})
    image = MetadataImage(brokers=MappingProxyType(brokers), topics=MappingProxyType({"t": t}),
                          partition_states=MappingProxyType({"t": MappingProxyType({0: PartitionState(1, 5, (1, 2), 1)})}))
    broker = FakeBroker(image)
    assert answered(broker) == answered(broker) == (1, 5, (1, 2), ())
    broker.image = replace(image, partition_states=with_entry(image.partition_states, "t",
                                                              MappingProxyType({0: PartitionState(2, 6, (2,), 1)})))
    assert answered(broker) == (2, 6, (2,), ())
    broker.image = replace(broker.image, brokers=MappingProxyType({2: brokers[2]}))
    assert answered(broker) == (2, 6, (2,), (1,))
    broker.metadata.offline_replicas.update([ReportedPartition("t", 0, 2, [2])])
    assert answered(broker) == (2, 6, (2,), (1, 2))


def test_the_handler_keeps_the_partitions_in_the_brokers_cache(monkeypatch):
    """An empty cache is still the broker's: the first answer fills it, the next reuses it."""
    monkeypatch.setattr(authorize, "enabled", lambda ctx: False)
    t = TopicAssignment("t", uuid.uuid4(), {0: (1,)})
    image = MetadataImage(brokers=MappingProxyType({1: BrokerInfo(1, (Endpoint("PLAINTEXT", "127.0.0.1", 9001),))}),
                          topics=MappingProxyType({"t": t}),
                          partition_states=MappingProxyType({"t": MappingProxyType({0: PartitionState(1, 0, (1,), 1)})}))
    broker = FakeBroker(image)
    builds = Builds()
    real = broker.metadata_partitions.partitions
    broker.metadata_partitions.partitions = lambda *a: real(*a[:-1], lambda: builds() and a[-1]())
    assert answered(broker) == answered(broker) == (1, 0, (1,), ())
    assert len(broker.metadata_partitions) == 1 and builds.count == 1
