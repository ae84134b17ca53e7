"""Metadata by topic id (v10-v12), answered as Kafka answers, and never a closed connection.

Raw frames: no installed client asks Metadata by id (confluent-kafka's ``TopicCollection``
takes names only), so these tests build the requests the Java admin client's
``describeTopics(TopicCollection.ofTopicIds(..))`` sends (id with an empty or null name).
"""

from __future__ import annotations

import uuid

import pytest

from odradek.protocol.generated.error_codes import ErrorCode
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient, message

ZERO = uuid.UUID(int=0)
UNKNOWN = uuid.UUID("6b1f2c1e-0000-4000-8000-00000000abcd")


def metadata(version: int, *topics: tuple[str | None, uuid.UUID]):
    m = __import__("odradek.protocol.codec", fromlist=["module"]).module("MetadataRequest")
    return m.MESSAGE(topics=[m.MetadataRequestTopic(name=n, topic_id=i) for n, i in topics],
                     allow_auto_topic_creation=False)


@pytest.fixture(scope="module")
def topic(shared_broker):
    """``(client, name, id)`` of a two-partition topic on the module's broker."""
    c = WireClient(shared_broker.bootstrap)
    create_topic(c, "by-id", partitions=2)
    _, resp = c.request("Metadata", 12, metadata(12, ("by-id", ZERO)))
    yield c, "by-id", resp.topics[0].topic_id
    c.close()


def still_answers(c: WireClient) -> None:
    _, resp = c.request("ApiVersions", 0, message("ApiVersionsRequest"))
    assert resp.error_code == ErrorCode.NONE


@pytest.mark.parametrize("name", [None, ""], ids=["null-name", "empty-name"])
def test_v12_known_id_is_answered_in_full(topic, name):
    c, topic_name, topic_id = topic
    assert topic_id != ZERO
    _, resp = c.request("Metadata", 12, metadata(12, (name, topic_id)))
    [t] = resp.topics
    assert (t.error_code, t.name, t.topic_id) == (ErrorCode.NONE, topic_name, topic_id)
    assert sorted(p.partition_index for p in t.partitions) == [0, 1]


@pytest.mark.parametrize("name", [None, ""], ids=["null-name", "empty-name"])
def test_v12_unknown_id_is_unknown_topic_id_with_a_null_name(topic, name):
    c, _, _ = topic
    _, resp = c.request("Metadata", 12, metadata(12, (name, UNKNOWN)))
    [t] = resp.topics
    assert (t.error_code, t.name, t.topic_id, t.partitions) == (ErrorCode.UNKNOWN_TOPIC_ID, None, UNKNOWN, [])
    still_answers(c)


def test_v12_ids_known_unknown_and_repeated_each_answered_once(topic):
    c, topic_name, topic_id = topic
    _, resp = c.request("Metadata", 12, metadata(12, (None, topic_id), ("", UNKNOWN), (None, topic_id)))
    assert [(t.error_code, t.name, t.topic_id) for t in resp.topics] == [
        (ErrorCode.NONE, topic_name, topic_id), (ErrorCode.UNKNOWN_TOPIC_ID, None, UNKNOWN)]


def test_v12_id_wins_over_a_different_name(topic):
    """Kafka looks a request that carries ids up by id alone."""
    c, topic_name, topic_id = topic
    _, resp = c.request("Metadata", 12, metadata(12, ("some-other-name", topic_id)))
    assert [(t.error_code, t.name) for t in resp.topics] == [(ErrorCode.NONE, topic_name)]


def test_v12_null_name_without_id_is_invalid_request(topic):
    c, topic_name, _ = topic
    _, resp = c.request("Metadata", 12, metadata(12, (None, ZERO), (topic_name, ZERO)))
    assert [(t.error_code, t.name) for t in resp.topics] == [
        (ErrorCode.INVALID_REQUEST, None), (ErrorCode.NONE, topic_name)]


@pytest.mark.parametrize("version", [10, 11])
@pytest.mark.parametrize("name", [None, ""], ids=["null-name", "empty-name"])
def test_v10_v11_cannot_ask_by_id(topic, version, name):
    """v10 and v11 have the field but not the feature: Kafka refuses the request
    (INVALID_REQUEST for every topic, a null name answered as "")."""
    c, topic_name, topic_id = topic
    _, resp = c.request("Metadata", version, metadata(version, (name, topic_id), (topic_name, ZERO)))
    assert [(t.error_code, t.name) for t in resp.topics] == [
        (ErrorCode.INVALID_REQUEST, ""), (ErrorCode.INVALID_REQUEST, topic_name)]
    still_answers(c)


@pytest.mark.parametrize("version", [10, 11])
def test_v10_v11_by_name_still_work(topic, version):
    c, topic_name, topic_id = topic
    _, resp = c.request("Metadata", version, metadata(version, (topic_name, ZERO), (topic_name, ZERO)))
    assert [(t.error_code, t.name, t.topic_id) for t in resp.topics] == [(ErrorCode.NONE, topic_name, topic_id)]


def test_confluent_kafka_describe_reports_the_id_odradek_then_finds(topic, shared_broker):
    """librdkafka asks Metadata v12 by name; the id it reports is the one that finds the topic."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    c, topic_name, topic_id = topic
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    described = admin.describe_topics(TopicCollection([topic_name]))[topic_name].result(20)
    reported = uuid.UUID(bytes=bytes(
        (described.topic_id.get_most_significant_bits() & (2**64 - 1)).to_bytes(8, "big")
        + (described.topic_id.get_least_significant_bits() & (2**64 - 1)).to_bytes(8, "big")))
    assert reported == topic_id
    _, resp = c.request("Metadata", 12, metadata(12, (None, reported)))
    assert [(t.error_code, t.name) for t in resp.topics] == [(ErrorCode.NONE, topic_name)]
