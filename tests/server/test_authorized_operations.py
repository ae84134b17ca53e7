"""Authorized operations in Metadata and DescribeCluster: asked for, they list every operation
the resource supports (odradek has no authorizer); not asked for, Integer.MIN_VALUE."""

from __future__ import annotations

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from odradek.protocol.generated.metadata_request import MetadataRequestTopic
from tests.server.wire import WireClient, message

NOT_REQUESTED = -(2**31)
TOPIC_OPERATIONS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                    AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
CLUSTER_OPERATIONS = {AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                      AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                      AclOperation.DESCRIBE}


def bits(operations) -> int:
    return sum(1 << op.value for op in operations)


def test_confluent_kafka_sees_every_supported_operation_of_topics_and_cluster(shared_broker):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.create_topics([NewTopic("ops", 1, 1)])["ops"].result(10)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert set(cluster.authorized_operations) == CLUSTER_OPERATIONS
    topic = admin.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True)["ops"].result(10)
    assert set(topic.authorized_operations) == TOPIC_OPERATIONS


def test_metadata_v8_fills_in_only_what_is_asked_for(shared_broker):
    wire = WireClient(shared_broker.bootstrap)
    try:
        topics = [MetadataRequestTopic(name="ops-wire")]
        _, asked = wire.request("Metadata", 8, message(
            "MetadataRequest", topics=topics, allow_auto_topic_creation=True,
            include_cluster_authorized_operations=True, include_topic_authorized_operations=True))
        assert asked.cluster_authorized_operations == bits(CLUSTER_OPERATIONS)
        assert [t.topic_authorized_operations for t in asked.topics] == [bits(TOPIC_OPERATIONS)]
        _, plain = wire.request("Metadata", 8, message("MetadataRequest", topics=topics,
                                                        allow_auto_topic_creation=False))
        assert plain.cluster_authorized_operations == NOT_REQUESTED
        assert [t.topic_authorized_operations for t in plain.topics] == [NOT_REQUESTED]
        _, described = wire.request("DescribeCluster", 0, message("DescribeClusterRequest",
                                                                  include_cluster_authorized_operations=False))
        assert described.cluster_authorized_operations == NOT_REQUESTED
    finally:
        wire.close()
