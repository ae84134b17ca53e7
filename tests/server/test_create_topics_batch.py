"""CreateTopics of many topics in one request (handlers/create_topics.py, written together by
``TopicManager.create_many``): each topic answers its own error as when they were created one
at a time, and the good ones are created."""

from __future__ import annotations

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.server.group_wire import WireClient, module

CT = module("CreateTopicsRequest")


def _topic(name, partitions=2, rf=1, configs=()):
    return CT.CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf, assignments=[],
                             configs=[CT.CreatableTopicConfig(name=k, value=v) for k, v in configs])


def _create(port, topics, validate_only=False, version=7):
    with WireClient(port) as c:
        r = c.call(ApiKey.CREATE_TOPICS, version, timeout_ms=10_000, validate_only=validate_only, topics=topics)
    return {t.name: t for t in r.topics}


def test_good_topics_are_created_beside_bad_ones_each_with_its_error(shared_broker):
    b = shared_broker.broker
    shared_broker.call(lambda: b.topics.create(b.topics.plan_topic("batch-old", 1, 1, None, {})))
    topics = [
        _topic("batch-good-1", 3), _topic("batch-old"), _topic("batch-rf", rf=4),
        _topic("batch-config", configs=[("no.such.config", "1")]),
        _topic("batch-bad-value", configs=[("min.insync.replicas", "0")]),
        _topic("batch bad name"), _topic("batch-twice"), _topic("batch-twice"),
        _topic("batch.dot"), _topic("batch_dot"), _topic("batch-good-2", 1, configs=[("retention.ms", "1234")]),
    ]
    r = _create(shared_broker.port, topics)
    codes = {name: t.error_code for name, t in r.items()}
    assert codes == {
        "batch-good-1": E.NONE, "batch-old": E.TOPIC_ALREADY_EXISTS, "batch-rf": E.INVALID_REPLICATION_FACTOR,
        "batch-config": E.INVALID_CONFIG, "batch-bad-value": E.INVALID_CONFIG,
        "batch bad name": E.INVALID_TOPIC_EXCEPTION, "batch-twice": E.INVALID_REQUEST,
        "batch.dot": E.NONE, "batch_dot": E.INVALID_TOPIC_EXCEPTION, "batch-good-2": E.NONE,
    }
    image = b.metadata_image()
    for name in ("batch-good-1", "batch-good-2", "batch.dot"):
        assert image.topic(name) is not None and image.topic(name).topic_id == r[name].topic_id
        assert r[name].num_partitions == len(image.topic(name).partitions)
        assert r[name].replication_factor == 1
    for name in ("batch-rf", "batch-config", "batch-bad-value", "batch bad name", "batch_dot"):
        assert image.topic(name) is None
        assert r[name].configs is None and r[name].num_partitions == -1
    assert image.topic("batch-twice") is None
    assert {c.name: c.value for c in r["batch-good-2"].configs}["retention.ms"] == "1234"
    assert b.metadata.topic_config("batch-good-2")["retention.ms"] == "1234"
    assert r["batch-good-1"].error_message is None and "already exists" in r["batch-old"].error_message


def test_validate_only_checks_every_topic_and_creates_none(shared_broker):
    b = shared_broker.broker
    r = _create(shared_broker.port, [_topic("batch-check-1", 2), _topic("batch-check-rf", rf=9),
                                     _topic("batch-check-2", 4)], validate_only=True)
    assert {n: t.error_code for n, t in r.items()} == {
        "batch-check-1": E.NONE, "batch-check-rf": E.INVALID_REPLICATION_FACTOR, "batch-check-2": E.NONE}
    assert r["batch-check-2"].num_partitions == 4
    assert all(b.metadata_image().topic(n) is None for n in r)
