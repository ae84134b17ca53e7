"""ACLs on a real broker, driven by kafka-python's and confluent-kafka's admin ACL APIs and their
producers and consumers. Connections are User:ANONYMOUS here (PLAINTEXT listeners), so the
grants and denials name it (or User:*)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import (
    ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient, ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import NewTopic as KpNewTopic
from kafka.admin import ResourceType as KpResourceType
from kafka.errors import GroupAuthorizationFailedError, SecurityDisabledError, TopicAuthorizationFailedError

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import InProcessBroker
from tests.server.wire import WireClient, message

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
ANON = "User:ANONYMOUS"


@pytest.fixture(scope="module")
def super_broker(tmp_path_factory):
    """ANONYMOUS is a super user: every ACL API is allowed; the ACLs are what is tested."""
    with InProcessBroker(tmp_path_factory.mktemp("acl-super") / "data", authorizer_class_name=AUTHORIZER,
                         super_users=ANON) as b:
        yield b


@pytest.fixture(scope="module")
def open_broker(tmp_path_factory):
    """No super user; a resource without ACLs is open (allow.everyone.if.no.acl.found=true)."""
    with InProcessBroker(tmp_path_factory.mktemp("acl-open") / "data", authorizer_class_name=AUTHORIZER,
                         allow_everyone_if_no_acl_found="true") as b:
        yield b


def test_acl_apis_answer_security_disabled_without_an_authorizer(shared_broker_plain):
    admin = AdminClient({"bootstrap.servers": shared_broker_plain.bootstrap})
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException, match="No Authorizer"):
        admin.create_acls([binding])[binding].result(10)
    kp = KafkaAdminClient(bootstrap_servers=shared_broker_plain.bootstrap)
    try:
        flt = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY))
        with pytest.raises(SecurityDisabledError):
            kp.describe_acls(flt)
    finally:
        kp.close()


@pytest.fixture(scope="module")
def shared_broker_plain(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("acl-none") / "data") as b:
        yield b


def test_confluent_kafka_creates_describes_and_deletes_acls(super_broker):
    admin = AdminClient({"bootstrap.servers": super_broker.bootstrap})
    read = AclBinding(ResourceType.TOPIC, "ck-orders", ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)
    prefixed = AclBinding(ResourceType.GROUP, "ck-", ResourcePatternType.PREFIXED, "User:alice", "10.0.0.1",
                          AclOperation.READ, AclPermissionType.ALLOW)
    deny = AclBinding(ResourceType.TOPIC, "ck-orders", ResourcePatternType.LITERAL, "User:bob", "*",
                      AclOperation.WRITE, AclPermissionType.DENY)
    for future in admin.create_acls([read, prefixed, deny]).values():
        assert future.result(10) is None
    bad = AclBinding(ResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.WRITE, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException, match="only supports"):
        admin.create_acls([bad])[bad].result(10)
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    assert set(admin.describe_acls(every).result(10)) >= {read, prefixed, deny}
    match = AclBindingFilter(ResourceType.GROUP, "ck-group-1", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(match).result(10) == [prefixed]
    only_bob = AclBindingFilter(ResourceType.TOPIC, "ck-orders", ResourcePatternType.LITERAL, "User:bob", None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert admin.delete_acls([only_bob])[only_bob].result(10) == [deny]
    assert set(admin.describe_acls(every).result(10)) & {read, prefixed, deny} == {read, prefixed}


def test_kafka_python_creates_describes_and_deletes_acls(super_broker):
    admin = KafkaAdminClient(bootstrap_servers=super_broker.bootstrap)
    try:
        pattern = ResourcePattern(KpResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED)
        acl = ACL("User:carol", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, pattern)
        result = admin.create_acls([acl])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        flt = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(KpResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED))
        acls, error = admin.describe_acls(flt)
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in acls] == [
            ("User:carol", ACLOperation.WRITE, "kp-")]
        [(_, deleted, error)] = admin.delete_acls([flt])
        assert error.errno == 0 and [a.principal for a in deleted] == ["User:carol"]
        assert admin.describe_acls(flt)[0] == []
    finally:
        admin.close()


def test_denied_produce_fetch_and_metadata(open_broker):
    admin = AdminClient({"bootstrap.servers": open_broker.bootstrap})
    for name in ("public", "no-write", "hidden"):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    # A topic with ACLs is no longer open to everyone: allow all, then deny WRITE and READ
    # (deny wins); DESCRIBE stays allowed.
    denials = [
        AclBinding(ResourceType.TOPIC, "no-write", ResourcePatternType.LITERAL, "User:*", "*",
                   AclOperation.ALL, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "no-write", ResourcePatternType.LITERAL, ANON, "*",
                   AclOperation.WRITE, AclPermissionType.DENY),
        AclBinding(ResourceType.TOPIC, "no-write", ResourcePatternType.LITERAL, ANON, "*",
                   AclOperation.READ, AclPermissionType.DENY),
        AclBinding(ResourceType.TOPIC, "hid", ResourcePatternType.PREFIXED, "User:*", "*",
                   AclOperation.DESCRIBE, AclPermissionType.DENY),
    ]
    for future in admin.create_acls(denials).values():
        future.result(10)

    # Metadata for every topic lists only the describable ones.
    listed = set(admin.list_topics(timeout=10).topics)
    assert {"public", "no-write"} <= listed and "hidden" not in listed

    # kafka-python: the denied topic's send fails with TOPIC_AUTHORIZATION_FAILED.
    producer = KafkaProducer(bootstrap_servers=open_broker.bootstrap, retries=0, max_block_ms=5000)
    try:
        producer.send("public", b"ok").get(10)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("no-write", b"no").get(10)
    finally:
        producer.close()

    # confluent-kafka: delivery report error on the denied topic.
    reports = []
    ck = Producer({"bootstrap.servers": open_broker.bootstrap, "message.send.max.retries": 0})
    ck.produce("no-write", b"no", on_delivery=lambda err, msg: reports.append(err))
    ck.produce("public", b"ok", on_delivery=lambda err, msg: reports.append(err))
    ck.flush(10)
    codes = sorted(str(e.name()) if e else "OK" for e in reports)
    assert codes == ["OK", "TOPIC_AUTHORIZATION_FAILED"]

    # Fetch from the READ-denied topic: the consumer sees TOPIC_AUTHORIZATION_FAILED.
    consumer = Consumer({"bootstrap.servers": open_broker.bootstrap, "group.id": "acl-readers",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition("no-write", 0, 0)])
        error = None
        for _ in range(20):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error():
                error = msg.error()
                break
        assert error is not None
        assert error.name() == "TOPIC_AUTHORIZATION_FAILED"
    finally:
        consumer.close()


def test_denied_group_and_transactional_id(open_broker):
    admin = AdminClient({"bootstrap.servers": open_broker.bootstrap})
    admin.create_topics([NewTopic("grouped", 1, 1)])["grouped"].result(10)
    denials = [AclBinding(ResourceType.GROUP, "denied-group", ResourcePatternType.LITERAL, ANON, "*",
                          AclOperation.READ, AclPermissionType.DENY),
               AclBinding(ResourceType.TRANSACTIONAL_ID, "no-txn", ResourcePatternType.LITERAL, ANON, "*",
                          AclOperation.WRITE, AclPermissionType.DENY)]
    for future in admin.create_acls(denials).values():
        future.result(10)
    consumer = KafkaConsumer("grouped", bootstrap_servers=open_broker.bootstrap, group_id="denied-group")
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(20):
                consumer.poll(500)
    finally:
        consumer.close()
    producer = Producer({"bootstrap.servers": open_broker.bootstrap, "transactional.id": "no-txn"})
    with pytest.raises(KafkaException, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED|Transactional Id authorization"):
        producer.init_transactions(10)


def test_create_topics_needs_create_on_the_cluster_or_the_topic(broker_with_acls):
    admin = AdminClient({"bootstrap.servers": broker_with_acls.bootstrap})
    # The cluster allows everything but CREATE; topics under nocreate- deny CREATE too.
    acls = [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:*", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW),
            AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, ANON, "*",
                       AclOperation.CREATE, AclPermissionType.DENY),
            AclBinding(ResourceType.TOPIC, "nocreate-", ResourcePatternType.PREFIXED, "User:*", "*",
                       AclOperation.CREATE, AclPermissionType.DENY)]
    for future in admin.create_acls(acls).values():
        future.result(10)
    futures = admin.create_topics([NewTopic("nocreate-1", 1, 1), NewTopic("fine-1", 1, 1)])
    futures["fine-1"].result(10)  # the topic has no ACLs: allow.everyone.if.no.acl.found
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED|[Aa]uthorization failed"):
        futures["nocreate-1"].result(10)
    kp = KafkaAdminClient(bootstrap_servers=broker_with_acls.bootstrap)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            kp.create_topics([KpNewTopic("nocreate-2", 1, 1)])
    finally:
        kp.close()


@pytest.fixture
def broker_with_acls(tmp_path):
    with InProcessBroker(tmp_path / "data", authorizer_class_name=AUTHORIZER,
                         allow_everyone_if_no_acl_found="true") as b:
        yield b


def test_cluster_operations_and_inter_broker_requests_follow_cluster_acls(broker_with_acls):
    admin = AdminClient({"bootstrap.servers": broker_with_acls.bootstrap})
    acls = [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:*", "*",
                       AclOperation.ALTER, AclPermissionType.ALLOW)]
    for future in admin.create_acls(acls).values():
        future.result(10)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert set(cluster.authorized_operations) == {AclOperation.ALTER, AclOperation.DESCRIBE}  # DESCRIBE implied
    wire = WireClient(broker_with_acls.bootstrap)
    try:
        _, answer = wire.request("UpdateMetadata", 7, message("UpdateMetadataRequest", controller_id=1,
                                                               controller_epoch=99, broker_epoch=-1))
        assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        _, dirs = wire.request("DescribeLogDirs", 1, message("DescribeLogDirsRequest", topics=None))
        assert dirs.error_code == ErrorCode.NONE  # DESCRIBE on the cluster, implied by ALTER
    finally:
        wire.close()


def part(request: str, struct: str, **fields):
    """A struct of a generated request module (``part("FetchRequest", "FetchTopic", ...)``)."""
    return getattr(codec.module(request), struct)(**fields)


def test_configs_follower_fetch_and_offsets_follow_their_operations(broker_with_acls):
    admin = AdminClient({"bootstrap.servers": broker_with_acls.bootstrap})
    admin.create_topics([NewTopic("cfg", 1, 1)])["cfg"].result(10)
    acls = [AclBinding(ResourceType.TOPIC, "cfg", ResourcePatternType.LITERAL, "User:*", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:*", "*",
                       AclOperation.ALTER, AclPermissionType.ALLOW)]
    for future in admin.create_acls(acls).values():
        future.result(10)
    wire = WireClient(broker_with_acls.bootstrap)
    try:
        # READ implies DESCRIBE (ListOffsets answers) but not DESCRIBE_CONFIGS.
        _, configs = wire.request("DescribeConfigs", 4, message("DescribeConfigsRequest", resources=[
            part("DescribeConfigsRequest", "DescribeConfigsResource", resource_type=2, resource_name="cfg", configuration_keys=None)]))
        assert [r.error_code for r in configs.results] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        _, offsets = wire.request("ListOffsets", 7, message("ListOffsetsRequest", replica_id=-1, topics=[
            part("ListOffsetsRequest", "ListOffsetsTopic", name="cfg", partitions=[
                part("ListOffsetsRequest", "ListOffsetsPartition", partition_index=0, timestamp=-1)])]))
        assert offsets.topics[0].partitions[0].error_code == ErrorCode.NONE
        # A fetch as a follower needs CLUSTER_ACTION, which ALTER does not give.
        partition = part("FetchRequest", "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1024)
        _, fetched = wire.request("Fetch", 12, message("FetchRequest", replica_id=1, max_wait_ms=0, min_bytes=0,
                                                        max_bytes=1024, session_epoch=-1, topics=[
                                                            part("FetchRequest", "FetchTopic", topic="cfg", partitions=[partition])]))
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        _, consumed = wire.request("Fetch", 12, message("FetchRequest", replica_id=-1, max_wait_ms=0, min_bytes=0,
                                                         max_bytes=1024, session_epoch=-1, topics=[
                                                             part("FetchRequest", "FetchTopic", topic="cfg", partitions=[partition])]))
        assert consumed.responses[0].partitions[0].error_code == ErrorCode.NONE
    finally:
        wire.close()


def test_created_topics_configs_only_with_describe_configs(broker_with_acls):
    admin = AdminClient({"bootstrap.servers": broker_with_acls.bootstrap})
    acls = [AclBinding(ResourceType.TOPIC, "made-", ResourcePatternType.PREFIXED, "User:*", "*",
                       AclOperation.CREATE, AclPermissionType.ALLOW)]
    for future in admin.create_acls(acls).values():
        future.result(10)
    wire = WireClient(broker_with_acls.bootstrap)
    try:
        topic = part("CreateTopicsRequest", "CreatableTopic", name="made-1", num_partitions=2, replication_factor=1)
        _, created = wire.request("CreateTopics", 5, message("CreateTopicsRequest", topics=[topic], timeout_ms=10000))
        [result] = created.topics
        assert result.error_code == ErrorCode.NONE
        assert (result.topic_config_error_code, result.configs, result.num_partitions) == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, -1)
    finally:
        wire.close()


def test_odradeks_own_clients_see_the_denials(broker_with_acls):
    from odradek.client.admin_types import NewTopic as OdNewTopic
    from odradek.client.errors import BrokerError
    from odradek.client.sync import AdminClient as OdAdmin
    from odradek.client.sync import Consumer as OdConsumer
    from odradek.client.sync import Producer as OdProducer
    from odradek.client.topic_partition import TopicPartition as OdTopicPartition
    from odradek.protocol import acl_binding as acl

    admin = OdAdmin(broker_with_acls.bootstrap)
    try:
        admin.create_topics([OdNewTopic("od-guarded", 1, 1)])
        pattern = acl.ResourcePattern(acl.TOPIC, "od-guarded", acl.LITERAL)
        admin.create_acls([acl.AclBinding(pattern, acl.AccessControlEntry("User:*", "*", acl.ALL, acl.ALLOW)),
                           acl.AclBinding(pattern, acl.AccessControlEntry(ANON, "*", acl.WRITE, acl.DENY)),
                           acl.AclBinding(pattern, acl.AccessControlEntry(ANON, "*", acl.READ, acl.DENY))])
    finally:
        admin.close()
    producer = OdProducer(broker_with_acls.bootstrap)
    try:
        with pytest.raises(BrokerError) as denied:
            producer.send("od-guarded", b"x").result(10)
        assert denied.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        producer.close()
    consumer = OdConsumer(broker_with_acls.bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([OdTopicPartition("od-guarded", 0)])
        with pytest.raises(BrokerError) as denied:
            consumer.poll(timeout_ms=5000)
        assert denied.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_authorized_operations_are_the_principals(broker_with_acls):
    from confluent_kafka import TopicCollection

    admin = AdminClient({"bootstrap.servers": broker_with_acls.bootstrap})
    admin.create_topics([NewTopic("ops-acl", 1, 1)])["ops-acl"].result(10)
    acls = [AclBinding(ResourceType.TOPIC, "ops-", ResourcePatternType.PREFIXED, "User:*", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "ops-acl", ResourcePatternType.LITERAL, ANON, "*",
                       AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW)]
    for future in admin.create_acls(acls).values():
        future.result(10)
    topic = admin.describe_topics(TopicCollection(["ops-acl"]), include_authorized_operations=True)["ops-acl"].result(10)
    assert set(topic.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE,
                                                AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS}


def test_the_brokers_own_in_process_requests_need_no_acl(broker_with_acls):
    """The controller's LeaderAndIsr / UpdateMetadata to its own broker come in-process, from
    the broker itself: they pass even where the clients' principal may not CLUSTER_ACTION."""
    admin = AdminClient({"bootstrap.servers": broker_with_acls.bootstrap})
    acls = [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, ANON, "*",
                       AclOperation.CREATE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, ANON, "*",
                       AclOperation.CLUSTER_ACTION, AclPermissionType.DENY)]
    for future in admin.create_acls(acls).values():
        future.result(10)
    admin.create_topics([NewTopic("led-1", 1, 1)])["led-1"].result(10)  # answered once it has a leader
    part = broker_with_acls.broker.replica_manager.get("led-1", 0)
    assert part is not None and part.is_leader(broker_with_acls.broker.broker_id)
