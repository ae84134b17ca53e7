"""ElectLeaders (43) on one broker, from kafka-python and confluent-kafka: the only replica of
each partition leads already (ELECTION_NOT_NEEDED), unknown partitions are
UNKNOWN_TOPIC_OR_PARTITION, a bad election type INVALID_REQUEST, and the broker stays up."""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType as CkElectionType
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient as CkAdmin
from kafka import errors as kp_errors
from kafka.admin import NewTopic

from odradek.protocol.generated.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from odradek.protocol.generated.error_codes import ErrorCode
from tests.server.wire import WireClient

TOPIC = "elect-me"


@pytest.fixture(scope="module")
def topic(kp_admin):
    kp_admin.create_topics([NewTopic(TOPIC, 2, 1)])
    return TOPIC


def test_kafka_python_preferred_and_unclean(kp_admin, topic):
    for kind in (0, 1):
        response = kp_admin.elect_leaders(kind, {topic: [0, 1]}, raise_errors=False)
        codes = {(r.topic, p.partition_id): p.error_code
                 for r in response.replica_election_results for p in r.partition_result}
        assert codes == {(topic, 0): ErrorCode.ELECTION_NOT_NEEDED, (topic, 1): ErrorCode.ELECTION_NOT_NEEDED}
    with pytest.raises(kp_errors.UnknownTopicOrPartitionError):
        kp_admin.elect_leaders(0, {topic: [5]})
    kp_admin.elect_leaders(0, None)  # every partition: none needs an election, no error


def test_confluent_kafka_elect_leaders(shared_broker, topic):
    admin = CkAdmin({"bootstrap.servers": shared_broker.bootstrap})
    future = admin.elect_leaders(CkElectionType.PREFERRED, [CkTopicPartition(topic, 0), CkTopicPartition(topic, 9)])
    results = future.result(timeout=30)
    errors = {(tp.topic, tp.partition): e for tp, e in results.items()}
    assert errors[(topic, 0)].code() == ErrorCode.ELECTION_NOT_NEEDED
    assert errors[(topic, 9)].code() == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    results = admin.elect_leaders(CkElectionType.UNCLEAN, [CkTopicPartition("no-such", 0)]).result(timeout=30)
    assert [e.code() for e in results.values()] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def test_unknown_election_type_is_invalid_request(shared_broker, topic):
    body = ElectLeadersRequest(election_type=7, topic_partitions=[TopicPartitions(topic, [0])], timeout_ms=1000)
    client = WireClient(shared_broker.bootstrap)
    try:
        _, response = client.request("ElectLeaders", 2, body)
        _, v0 = client.request("ElectLeaders", 0, ElectLeadersRequest(topic_partitions=None, timeout_ms=1000))
    finally:
        client.close()
    assert v0.replica_election_results == []  # v0: preferred, every partition, none needed
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert response.replica_election_results[0].partition_result[0].error_code == ErrorCode.INVALID_REQUEST
