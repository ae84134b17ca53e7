"""ACLs per principal: users authenticated by SASL/PLAIN (``User:alice``, the super user
``User:admin``) on one broker, driven by kafka-python and confluent-kafka. Set-up goes over the
PLAINTEXT listener as User:ANONYMOUS, also a super user (the inter-broker principal)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType, ResourceType,
)
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError

from tests.server.sasl_broker import plain_port, sasl_broker, sasl_port
from tests.server.test_produce_fast_path import Spy


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with sasl_broker(tmp_path_factory.mktemp("acl-sasl") / "data", **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS"}) as b:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port(b)}"})
        for name in ("alice-t", "admin-t", "alice-fast", "alice-ro"):
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
        grants = [AclBinding(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*", op,
                             AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]
        # alice may read (so describe) alice-ro, not write it: her producer sends, and is refused
        grants.append(AclBinding(ResourceType.TOPIC, "alice-ro", ResourcePatternType.LITERAL, "User:alice", "*",
                                 AclOperation.WRITE, AclPermissionType.DENY))
        grants.append(AclBinding(ResourceType.GROUP, "alice-g", ResourcePatternType.LITERAL, "User:alice", "*",
                                 AclOperation.READ, AclPermissionType.ALLOW))
        for future in admin.create_acls(grants).values():
            future.result(10)
        yield b


def _ck(broker, user: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{sasl_port(broker)}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"}


def test_alice_writes_and_reads_only_her_topics(broker):
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{sasl_port(broker)}", security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret",
                             retries=0, max_block_ms=5000)
    try:
        producer.send("alice-t", b"mine").get(10)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("alice-ro", b"read only").get(10)
    finally:
        producer.close()
    consumer = Consumer({**_ck(broker, "alice"), "group.id": "alice-g", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["alice-t"])
        got = None
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got = msg.value()
                break
        assert got == b"mine"
    finally:
        consumer.close()


def test_allowed_topics_take_the_produce_fast_path_and_denied_ones_the_generic_refusal(broker):
    """With an authorizer, a plain producer's batches to a topic its principal may WRITE are
    the fast path's; a topic it may describe but not write is handed to the generic path,
    which refuses it."""
    spy = Spy(broker)
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{sasl_port(broker)}", security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret",
                             retries=0, max_block_ms=5000, enable_idempotence=False, acks=1)
    try:
        first = producer.send("alice-fast", b"one").get(10)
        assert producer.send("alice-fast", b"two").get(10).offset == first.offset + 1
        assert (spy.taken, spy.declined) == (2, 0)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("alice-ro", b"read only").get(10)
        assert (spy.taken, spy.declined) == (2, 1)
    finally:
        producer.close()
    partitions = broker.broker.replica_manager.partitions
    assert partitions[("alice-fast", 0)].log.log_end_offset == first.offset + 2
    assert partitions[("alice-ro", 0)].log.log_end_offset == 0


def test_metadata_lists_what_each_principal_may_describe(broker):
    alice = AdminClient(_ck(broker, "alice"))
    assert {"alice-t"} <= set(alice.list_topics(timeout=10).topics) and "admin-t" not in alice.list_topics(timeout=10).topics
    admin = AdminClient(_ck(broker, "admin"))
    assert {"alice-t", "admin-t"} <= set(admin.list_topics(timeout=10).topics)
    # alice may not create ACLs (no ALTER on the cluster); admin, a super user, may.
    grant = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                       AclPermissionType.ALLOW)
    with pytest.raises(Exception, match="CLUSTER_AUTHORIZATION_FAILED|[Aa]uthorization"):
        alice.create_acls([grant])[grant].result(10)
    assert admin.create_acls([grant])[grant].result(10) is None
    # a producer of alice's to a topic she may not write: confluent-kafka's delivery error
    errors = []
    p = Producer({**_ck(broker, "alice"), "message.send.max.retries": 0})
    p.produce("admin-t", b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert [e.name() for e in errors] == ["TOPIC_AUTHORIZATION_FAILED"]
