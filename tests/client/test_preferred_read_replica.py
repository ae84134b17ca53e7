"""The consumer's preferred read replicas (client/preferred_read_replica.py), without sockets:
Kafka's ``SubscriptionState`` and ``FetchCollector`` rules for KIP-392."""

from __future__ import annotations

from types import SimpleNamespace

from odradek.client.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from odradek.client.preferred_read_replica import PreferredReadReplicas
from odradek.client.topic_partition import TopicPartition
from odradek.protocol.generated.error_codes import ErrorCode

TP = TopicPartition("t", 0)
AGE = 300.0  # metadata.max.age.ms 300000


def _meta(brokers=(1, 2, 3), offline=()) -> ClusterMetadata:
    part = PartitionInfo("t", 0, 1, 5, (1, 2, 3), (1, 2, 3), tuple(offline))
    return ClusterMetadata({b: BrokerInfo(b, "127.0.0.1", 9000 + b, f"r{b}") for b in brokers},
                           {"t": TopicInfo("t", None, False, (part,))})


def _answer(code=ErrorCode.NONE, preferred=-1):
    return SimpleNamespace(error_code=code, preferred_read_replica=preferred)


def test_a_named_replica_is_read_until_metadata_max_age_passes():
    replicas = PreferredReadReplicas(AGE)
    assert replicas.node_for(TP, 1, _meta(), 10.0) == 1
    assert replicas.on_answer(TP, _answer(preferred=2), 10.0) is False
    assert replicas.node_for(TP, 1, _meta(), 10.0 + AGE - 1) == 2
    assert replicas.node_for(TP, 1, _meta(), 10.0 + AGE) == 1  # expired: the leader again
    assert replicas.preferred(TP) is None


def test_an_answer_without_a_replica_keeps_the_choice():
    replicas = PreferredReadReplicas(AGE)
    replicas.on_answer(TP, _answer(preferred=2), 0.0)
    replicas.on_answer(TP, _answer(), 1.0)  # the replica's own answers name none
    assert replicas.node_for(TP, 1, _meta(), 2.0) == 2


def test_an_error_or_a_failed_fetch_sends_the_partition_back_to_the_leader():
    replicas = PreferredReadReplicas(AGE)
    for code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH):
        replicas.on_answer(TP, _answer(preferred=2), 0.0)
        assert replicas.on_answer(TP, _answer(code), 1.0) is False  # handled as before: a metadata refresh
        assert replicas.node_for(TP, 1, _meta(), 1.0) == 1
    replicas.on_answer(TP, _answer(preferred=2), 0.0)
    replicas.on_failure([TP])
    assert replicas.node_for(TP, 1, _meta(), 1.0) == 1


def test_offset_out_of_range_from_a_replica_asks_the_leader_instead_of_resetting():
    replicas = PreferredReadReplicas(AGE)
    replicas.on_answer(TP, _answer(preferred=2), 0.0)
    assert replicas.on_answer(TP, _answer(ErrorCode.OFFSET_OUT_OF_RANGE), 1.0) is True
    assert replicas.node_for(TP, 1, _meta(), 1.0) == 1
    # from the leader it is final: the consumer resets as before
    assert replicas.on_answer(TP, _answer(ErrorCode.OFFSET_OUT_OF_RANGE), 2.0) is False


def test_a_replica_not_online_in_the_metadata_is_not_used():
    replicas = PreferredReadReplicas(AGE)
    replicas.on_answer(TP, _answer(preferred=2), 0.0)
    assert replicas.node_for(TP, 1, _meta(brokers=(1, 3)), 1.0) == 1
    replicas.on_answer(TP, _answer(preferred=2), 0.0)
    assert replicas.node_for(TP, 1, _meta(offline=(2,)), 1.0) == 1
    replicas.on_answer(TP, _answer(preferred=2), 0.0)
    assert replicas.node_for(TP, None, _meta(), 1.0) is None  # no leader known: refresh first
