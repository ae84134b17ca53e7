"""DeleteTopics entries by name or id (v6+), checked as Kafka's controller checks them, and
under ACLs (``ControllerApis.deleteTopics``): an id never reveals a name its sender may not
describe."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType
from confluent_kafka.admin import ResourceType

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import InProcessBroker
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient

ZERO = uuid.UUID(int=0)
UNKNOWN = uuid.UUID("6b1f2c1e-0000-4000-8000-00000000dcba")
DT = codec.module("DeleteTopicsRequest")
MR = codec.module("MetadataRequest")


def delete(c: WireClient, *entries: tuple[str | None, uuid.UUID]):
    body = DT.MESSAGE(topics=[DT.DeleteTopicState(name=n, topic_id=i) for n, i in entries], timeout_ms=5000)
    _, resp = c.request("DeleteTopics", 6, body)
    return [(r.error_code, r.name, r.topic_id) for r in resp.responses]


def topic_id(c: WireClient, name: str) -> uuid.UUID | None:
    _, resp = c.request("Metadata", 12, MR.MESSAGE(topics=[MR.MetadataRequestTopic(name=name)],
                                                   allow_auto_topic_creation=False))
    t = resp.topics[0]
    return t.topic_id if t.error_code == ErrorCode.NONE else None


def test_by_id_known_and_unknown(shared_broker):
    c = WireClient(shared_broker.bootstrap)
    create_topic(c, "del-by-id")
    tid = topic_id(c, "del-by-id")
    assert delete(c, (None, tid), (None, UNKNOWN)) == [
        (ErrorCode.NONE, "del-by-id", tid), (ErrorCode.UNKNOWN_TOPIC_ID, None, UNKNOWN)]
    assert topic_id(c, "del-by-id") is None


def test_name_and_id_together_or_neither_are_invalid_request_and_delete_nothing(shared_broker):
    c = WireClient(shared_broker.bootstrap)
    create_topic(c, "del-both")
    tid = topic_id(c, "del-both")
    assert delete(c, ("del-both", tid), (None, ZERO)) == [
        (ErrorCode.INVALID_REQUEST, "del-both", tid), (ErrorCode.INVALID_REQUEST, None, ZERO)]
    assert topic_id(c, "del-both") == tid


def test_duplicates_are_invalid_request_and_delete_nothing(shared_broker):
    c = WireClient(shared_broker.bootstrap)
    create_topic(c, "del-twice-name")
    create_topic(c, "del-twice-id")
    tid = topic_id(c, "del-twice-id")
    results = delete(c, ("del-twice-name", ZERO), (None, tid), ("del-twice-name", ZERO), (None, tid))
    assert [code for code, _, _ in results] == [ErrorCode.INVALID_REQUEST] * 4
    assert topic_id(c, "del-twice-name") is not None and topic_id(c, "del-twice-id") == tid
    _, resp = c.request("DeleteTopics", 4, DT.MESSAGE(topic_names=["del-twice-name"] * 2, timeout_ms=5000))
    assert [r.error_code for r in resp.responses] == [ErrorCode.INVALID_REQUEST] * 2
    assert topic_id(c, "del-twice-name") is not None


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    """ACLs on; a topic without any is open to everyone (allow.everyone.if.no.acl.found)."""
    with InProcessBroker(tmp_path_factory.mktemp("del-acl") / "data",
                         authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                         allow_everyone_if_no_acl_found="true") as b:
        yield b


def allow(topic: str, principal: str, operation) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", operation,
                      AclPermissionType.ALLOW)


def test_by_id_without_describe_answers_no_name(acl_broker):
    """Clients here are User:ANONYMOUS. ``secret-payroll`` has ACLs for someone else only: no
    DESCRIBE, so its id answers a null name; ``seen-payroll`` may be described but not deleted:
    its name is shown; ``own-payroll`` may be deleted; a name the request gave is never hidden."""
    c = WireClient(acl_broker.bootstrap)
    try:
        for name in ("secret-payroll", "seen-payroll", "own-payroll"):
            create_topic(c, name)
        ids = {name: topic_id(c, name) for name in ("secret-payroll", "seen-payroll", "own-payroll")}
        admin = AdminClient({"bootstrap.servers": acl_broker.bootstrap})
        acls = [allow("secret-payroll", "User:hr", AclOperation.ALL),
                allow("seen-payroll", "User:ANONYMOUS", AclOperation.DESCRIBE),
                allow("own-payroll", "User:ANONYMOUS", AclOperation.DELETE)]
        for future in admin.create_acls(acls).values():
            future.result(10)
        assert delete(c, (None, ids["secret-payroll"]), (None, ids["seen-payroll"]), (None, ids["own-payroll"])) == [
            (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, ids["secret-payroll"]),
            (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "seen-payroll", ids["seen-payroll"]),
            (ErrorCode.NONE, "own-payroll", ids["own-payroll"])]
        assert delete(c, ("secret-payroll", ZERO)) == [
            (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "secret-payroll", ZERO)]
        image = acl_broker.broker.metadata_image()
        assert image.topic("secret-payroll") is not None and image.topic("seen-payroll") is not None
        assert image.topic("own-payroll") is None
    finally:
        c.close()
