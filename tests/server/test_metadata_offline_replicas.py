"""Metadata's ``offline_replicas`` (v5+) includes what the controller's UpdateMetadata says is
offline: a replica in a failed log directory of a live broker, which the broker's
ZooKeeper-fed image cannot know (Kafka's ``MetadataCache`` answers the controller's list).

The UpdateMetadata requests are delivered in-process, as the controller delivers them to
itself (`tests.server.test_control_requests.deliver`), to a topic the broker's own controller
already told it about, so that controller has nothing more to say about it meanwhile."""

from __future__ import annotations

import time

from odradek.metadata.offline_replicas import OfflineReplicas
from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from tests.server.test_control_requests import controller_epoch, deliver, me, topic

UM = codec.module("UpdateMetadataRequest")
MR = codec.module("MetadataRequest")


def update_metadata(version: int, epoch: int, name: str, leader: int, offline: list[int]):
    state = UM.UpdateMetadataPartitionState(
        topic_name=name, partition_index=0, controller_epoch=epoch, leader=leader,
        leader_epoch=0, isr=[leader], zk_version=0, replicas=[leader], offline_replicas=offline)
    body = UM.UpdateMetadataRequest(controller_id=99, controller_epoch=epoch, broker_epoch=-1,
                                    live_brokers=[UM.UpdateMetadataBroker(id=leader)])  # as a controller lists it
    if version < 5:
        body.ungrouped_partition_states = [state]
    else:
        body.topic_states = [UM.UpdateMetadataTopicState(topic_name=name, partition_states=[state])]
    return body


def offline_replicas(node, name: str, version: int = 9) -> list[int]:
    body = MR.MESSAGE(topics=[MR.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False)
    (answered,) = deliver(node, "Metadata", version, body).topics
    return answered.partitions[0].offline_replicas


class Heard(OfflineReplicas):
    """The broker's `OfflineReplicas`, noting every partition an UpdateMetadata named."""

    def __init__(self) -> None:
        super().__init__()
        self.named: set[tuple[str, int]] = set()

    def update(self, states) -> None:
        states = list(states)
        self.named |= {(s.topic, s.partition) for s in states}
        super().update(states)


def led_topic(node, monkeypatch) -> str:
    """A one-partition topic on this broker alone, once the broker's own controller told it
    about the partition (so no later UpdateMetadata of its overtakes the test's)."""
    heard = Heard()
    monkeypatch.setattr(node.broker.metadata, "offline_replicas", heard)
    name = topic("offline")
    node.call(node.broker.metadata.create_topic, name, {0: [me(node)]})
    deadline = time.monotonic() + 30
    while (name, 0) not in heard.named:
        assert time.monotonic() < deadline, "no UpdateMetadata for the new topic"
        time.sleep(0.01)
    return name


def test_offline_replicas_of_update_metadata_are_answered_by_metadata(shared_broker, monkeypatch):
    node, name = shared_broker, led_topic(shared_broker, monkeypatch)
    mine, epoch = me(node), controller_epoch(node)
    assert offline_replicas(node, name) == []
    for version in (4, 8):  # flat and per topic
        resp = deliver(node, "UpdateMetadata", version, update_metadata(version, epoch, name, mine, [mine]))
        assert resp.error_code == ErrorCode.NONE
        assert offline_replicas(node, name) == [mine]
        assert offline_replicas(node, name, version=5) == [mine]
        deliver(node, "UpdateMetadata", version, update_metadata(version, epoch, name, mine, []))
        assert offline_replicas(node, name) == []


def test_a_stale_controller_cannot_mark_replicas_offline(shared_broker, monkeypatch):
    node, name = shared_broker, led_topic(shared_broker, monkeypatch)
    mine, epoch = me(node), controller_epoch(node)
    resp = deliver(node, "UpdateMetadata", 8, update_metadata(8, epoch - 1, name, mine, [mine]))
    assert resp.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert offline_replicas(node, name) == []
