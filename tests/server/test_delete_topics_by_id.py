"""DeleteTopics entries by name or id (v6+), checked as Kafka's controller checks them."""

from __future__ import annotations

import uuid

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
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
