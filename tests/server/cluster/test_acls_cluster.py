"""ACLs on a two-broker cluster: an ACL created through one broker is written in Kafka's
ZooKeeper layout, announced under /kafka-acl-changes, and enforced by the other broker too.
allow.everyone.if.no.acl.found=true keeps the cluster resource (inter-broker requests) and the
topics without ACLs open to User:ANONYMOUS."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType, ResourceType,
)

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from tests.server.cluster.cluster_clients import create_topic
from tests.server.cluster.harness import wait_until
from tests.server.wire import WireClient, message

pytestmark = pytest.mark.timeout(120)


def _acls_seen_by(bootstrap: str) -> set[tuple[str, int]]:
    wire = WireClient(bootstrap)
    try:
        _, answer = wire.request("DescribeAcls", 1, message(
            "DescribeAclsRequest", resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1))
    finally:
        wire.close()
    assert answer.error_code == ErrorCode.NONE
    return {(r.resource_name, a.operation) for r in answer.resources for a in r.acls}


def _partitions_led_known_by(bootstrap: str, topic: str) -> int:
    """How many of ``topic``'s partitions this broker's Metadata answers with a leader."""
    wire = WireClient(bootstrap)
    try:
        request = codec.module("MetadataRequest")
        _, answer = wire.request("Metadata", 9, request.MESSAGE(
            topics=[request.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False))
    finally:
        wire.close()
    return sum(1 for t in answer.topics if t.error_code == ErrorCode.NONE
               for p in t.partitions if p.leader_id >= 0)


def test_an_acl_made_on_one_broker_holds_on_every_broker(make_cluster):
    cluster = make_cluster({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                            "allow.everyone.if.no.acl.found": "true"})
    cluster.start([1, 2])
    create_topic(cluster.bootstrap, "guarded", 2, 2)
    # CreateTopics answers once the broker asked knows the topic; the other learns it from its
    # ZooKeeper watches a moment later. Each partition's leader is asked below.
    for broker_id in (1, 2):
        wait_until(lambda: _partitions_led_known_by(cluster[broker_id].bootstrap, "guarded") == 2, 20,
                   f"broker {broker_id} knowing guarded's leaders")
    admin = AdminClient({"bootstrap.servers": cluster[1].bootstrap})
    acls = [AclBinding(ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL, "User:*", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                       AclOperation.WRITE, AclPermissionType.DENY)]
    for future in admin.create_acls(acls).values():
        future.result(10)
    stored = json.loads(cluster.zk.get("/kafka-acl/Topic/guarded")[0])
    assert stored["version"] == 1 and {"principal": "User:ANONYMOUS", "permissionType": "Deny",
                                       "operation": "Write", "host": "*"} in stored["acls"]
    assert cluster.zk.get_children("/kafka-acl-changes")
    wanted = {("guarded", AclOperation.ALL.value), ("guarded", AclOperation.WRITE.value)}
    wait_until(lambda: _acls_seen_by(cluster[2].bootstrap) == wanted, 20, "broker 2 learning the ACLs")
    # Both partitions refuse the write (with two brokers, two partitions get a leader on each, as placed).
    assert [_denied_write(cluster.bootstrap, "guarded", p) for p in (0, 1)] == ["TOPIC_AUTHORIZATION_FAILED"] * 2


def _denied_write(bootstrap: str, topic: str, partition: int) -> str:
    """The error of one record sent to ``partition``, by a producer of its own: librdkafka takes
    TOPIC_AUTHORIZATION_FAILED as a permanent error of the whole topic and drops its partitions,
    so a record for the other partition still queued in the same producer would fail in the
    client (``_DESTROY``) without ever reaching its leader."""
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.send.max.retries": 0})
    producer.produce(topic, b"x", partition=partition, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(20)
    assert len(errors) == 1 and errors[0] is not None, errors
    return errors[0].name()
