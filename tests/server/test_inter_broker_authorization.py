"""Inter-broker requests from a client without CLUSTER_ACTION: each answers
CLUSTER_AUTHORIZATION_FAILED and changes nothing (Kafka's KafkaApis authorizes them all with
CLUSTER_ACTION on the cluster).

Each request is one that the broker would act on if it came from its controller or a fellow
broker (current epochs, the topic's real id, this broker's id and epoch): a LeaderAndIsr that
demotes this broker, a StopReplica that deletes the partition, a ControlledShutdown of this
broker, an AlterPartition of the ISR, an abort marker, an AddPartitionsToTxn (v4, the broker
form). After it, the partition is still led here, and a produce lands at the next offset (no
marker or anything else was appended). Clients here are User:ANONYMOUS, denied CLUSTER_ACTION.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType
from confluent_kafka.admin import ResourceType

from odradek.controller.request_encoding import encode_alter_partition
from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import InProcessBroker
from tests.server.test_bad_input import create_topic
from tests.server.test_control_requests import leader_and_isr, stop_replica
from tests.server.wire import WireClient, produce_body, simple_batch

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("inter-broker-acl") / "data",
                         authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                         allow_everyone_if_no_acl_found="true") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        deny = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                          AclOperation.CLUSTER_ACTION, AclPermissionType.DENY)
        admin.create_acls([deny])[deny].result(10)
        yield b


def produce(wire: WireClient, topic: str) -> tuple[int, int]:
    _, resp = wire.request("Produce", 8, produce_body(topic, 0, simple_batch([b"v"])))
    answer = resp.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


class Victim:
    """A topic led by this broker, with one record, and what a request about it needs."""

    def __init__(self, node: InProcessBroker, name: str) -> None:
        broker = node.broker
        self.name, self.me = name, broker.broker_id
        part = node.call(lambda: broker.replica_manager.get(name, 0))
        self.leader_epoch, self.zk_version = part.leader_epoch, part.zk_version
        self.topic_id = node.call(lambda: broker.metadata_image().topic(name).topic_id)
        self.controller_epoch = node.call(lambda: broker.controller_epoch)
        self.broker_epoch = node.call(lambda: broker.broker_epoch)


def _leader_and_isr(v: Victim):  # demotes this broker: another leader, a newer epoch
    other = v.me + 100
    return "LeaderAndIsr", 6, leader_and_isr(6, [(v.name, 0, other, v.leader_epoch + 1, [v.me, other], [other],
                                                  v.zk_version + 1)], v.controller_epoch, topic_id=v.topic_id)


def _stop_replica(v: Victim):  # deletes the partition
    return "StopReplica", 3, stop_replica(3, [(v.name, 0, v.leader_epoch + 1)], v.controller_epoch, delete=True)


def _update_metadata(v: Victim):  # shows the topic being deleted (leader -2)
    m = codec.module("UpdateMetadataRequest")
    state = m.UpdateMetadataPartitionState(topic_name=v.name, partition_index=0, controller_epoch=v.controller_epoch,
                                           leader=-2, leader_epoch=v.leader_epoch + 1, isr=[v.me],
                                           zk_version=v.zk_version + 1, replicas=[v.me])
    alive = [m.UpdateMetadataBroker(id=v.me)]
    return "UpdateMetadata", 7, m.MESSAGE(controller_id=v.me, controller_epoch=v.controller_epoch,
                                          broker_epoch=v.broker_epoch, live_brokers=alive, topic_states=[
                                              m.UpdateMetadataTopicState(topic_name=v.name, topic_id=v.topic_id,
                                                                         partition_states=[state])])


def _controlled_shutdown(v: Victim):  # this broker, by its real epoch
    return "ControlledShutdown", 3, codec.module("ControlledShutdownRequest").MESSAGE(broker_id=v.me,
                                                                                      broker_epoch=v.broker_epoch)


def _alter_partition(v: Victim):  # the leader's ISR change, at the current partition epoch
    request = encode_alter_partition(v.me, v.broker_epoch, [((v.name, 0), v.leader_epoch, (v.me,), v.zk_version)], 2,
                                     {v.name: v.topic_id})
    return "AlterPartition", 2, request


def _write_txn_markers(v: Victim):  # an abort marker, appended to the partition
    m = codec.module("WriteTxnMarkersRequest")
    return "WriteTxnMarkers", 1, m.MESSAGE(markers=[m.WritableTxnMarker(
        producer_id=4242, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[m.WritableTxnMarkerTopic(name=v.name, partition_indexes=[0])])])


def _add_partitions_to_txn(v: Victim):  # the broker form (v4+), adding as well as verifying
    m = codec.module("AddPartitionsToTxnRequest")
    return "AddPartitionsToTxn", 4, m.MESSAGE(transactions=[m.AddPartitionsToTxnTransaction(
        transactional_id="inter-broker-txn", producer_id=4242, producer_epoch=0, verify_only=False,
        topics=[m.AddPartitionsToTxnTopic(name=v.name, partitions=[0])])])


def _marker_error(answer) -> int:
    return answer.markers[0].topics[0].partitions[0].error_code


REQUESTS = [_leader_and_isr, _stop_replica, _update_metadata, _controlled_shutdown, _alter_partition,
            _write_txn_markers, _add_partitions_to_txn]


@pytest.mark.parametrize("build", REQUESTS, ids=lambda f: f.__name__.strip("_"))
def test_refused_without_cluster_action_and_nothing_changes(node, build):
    topic = f"victim{build.__name__}".replace("_", "-")
    wire = WireClient(node.bootstrap)
    try:
        create_topic(wire, topic)
        assert produce(wire, topic) == (ErrorCode.NONE, 0)
        victim = Victim(node, topic)
        name, version, body = build(victim)
        _, answer = wire.request(name, version, body)
        error = _marker_error(answer) if name == "WriteTxnMarkers" else answer.error_code
        assert error == DENIED
        broker = node.broker
        part = node.call(lambda: broker.replica_manager.get(topic, 0))
        assert part is not None and part.is_leader(victim.me) and part.leader_epoch == victim.leader_epoch
        assert node.call(lambda: victim.me not in broker.controller_service.controller.ctx.shutting_down)
        assert produce(wire, topic) == (ErrorCode.NONE, 1)  # led here, and nothing appended meanwhile
    finally:
        wire.close()
