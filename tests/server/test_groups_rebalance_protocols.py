"""``group.coordinator.rebalance.protocols`` on the wire (Kafka's
``KafkaApis.isConsumerGroupProtocolEnabled``): without ``consumer``, ConsumerGroupHeartbeat and
ConsumerGroupDescribe answer UNSUPPORTED_VERSION while ApiVersions still lists them (as Kafka's
``ApiVersionManager``), librdkafka with ``group.protocol=consumer`` fails with a fatal error
naming the API, and classic groups work as before. And KIP-848's OffsetCommit rule end to end:
a consumer-protocol member committing below v9 gets UNSUPPORTED_VERSION (Kafka's
``ConsumerGroup.validateOffsetCommit``)."""

from __future__ import annotations

import confluent_kafka
import pytest

from odradek.coordinator.group.group_config import GroupConfig
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.server.config import BrokerConfig
from odradek.testing.broker import InProcessBroker
from tests.server.group_clients import create_topic, produce, wait_for
from tests.server.group_wire import WireClient, module

CLASSIC_ONLY = {"group.coordinator.rebalance.protocols": "classic"}


def heartbeat_join(c: WireClient, group: str, topics):
    return c.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, group_id=group, member_id="", member_epoch=0,
                  rebalance_timeout_ms=5000, subscribed_topic_names=list(topics), topic_partitions=[])


def _fatal(e: confluent_kafka.KafkaError) -> bool:
    return e.fatal() or e.code() == confluent_kafka.KafkaError._FATAL


def test_without_consumer_the_kip848_apis_answer_unsupported_version_but_stay_listed(tmp_path):
    with InProcessBroker(tmp_path / "data", **CLASSIC_ONLY) as b:
        create_topic(b.bootstrap, "t", 2)
        with WireClient(b.port) as c:
            listed = {k.api_key: k for k in c.call(ApiKey.API_VERSIONS, 3, client_software_name="t",
                                                    client_software_version="1").api_keys}
            assert ApiKey.CONSUMER_GROUP_HEARTBEAT in listed and ApiKey.CONSUMER_GROUP_DESCRIBE in listed
            assert heartbeat_join(c, "g", ["t"]).error_code == E.UNSUPPORTED_VERSION
            described = c.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=["g"])
            assert [(g.group_id, g.error_code) for g in described.groups] == [("g", E.UNSUPPORTED_VERSION)]

        errors = []
        consumer = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g",
                                             "group.protocol": "consumer", "error_cb": errors.append})
        try:
            consumer.subscribe(["t"])

            def failed():
                m = consumer.poll(0.1)
                if m is not None and m.error() is not None:
                    errors.append(m.error())
                return any(_fatal(e) for e in errors)

            wait_for(failed)
        finally:
            consumer.close()
        assert any("ConsumerGroupHeartbeat" in e.str() and _fatal(e) for e in errors), errors

        # Classic groups are served as before.
        produce(b.bootstrap, "t", [b"x"], partitions=2)
        classic = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "gc",
                                            "auto.offset.reset": "earliest"})
        try:
            classic.subscribe(["t"])
            got = []
            wait_for(lambda: (m := classic.poll(0.1)) is not None and m.error() is None and got.append(m.value())
                     or got)
            assert got == [b"x"]
        finally:
            classic.close()


def test_the_default_serves_the_consumer_protocol_and_classic_cannot_be_left_out():
    assert GroupConfig.from_broker_config(BrokerConfig.from_props({})).consumer_assignors
    with pytest.raises(ValueError, match="classic"):
        GroupConfig.from_broker_config(BrokerConfig.from_props({"group.coordinator.rebalance.protocols": "consumer"}))


def test_offset_commit_below_v9_from_a_consumer_protocol_member_is_unsupported_version(broker):
    create_topic(broker.bootstrap, "oc", 1)
    req = module("OffsetCommitRequest")
    with WireClient(broker.port) as c:
        def joined():  # FindCoordinator creates __consumer_offsets; until then NOT_COORDINATOR
            c.call(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["goc"])
            r = heartbeat_join(c, "goc", ["oc"])
            return r if r.error_code == E.NONE else None

        r = wait_for(joined)
        member_id, epoch = r.member_id, r.member_epoch

        def commit(version: int, offset: int) -> int:
            topics = [req.OffsetCommitRequestTopic(name="oc", partitions=[
                req.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])]
            answer = c.call(ApiKey.OFFSET_COMMIT, version, group_id="goc", generation_id_or_member_epoch=epoch,
                            member_id=member_id, topics=topics)
            return answer.topics[0].partitions[0].error_code

        assert commit(8, 5) == E.UNSUPPORTED_VERSION
        assert commit(9, 6) == E.NONE
        fetched = c.call(ApiKey.OFFSET_FETCH, 7, group_id="goc", topics=None)
        assert fetched.topics[0].partitions[0].committed_offset == 6
