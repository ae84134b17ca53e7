"""Partition reassignment calls against one real broker (its own controller): the errors
Kafka gives, and a reordering of a one-replica partition; kafka-python's calls too. Moves
between brokers are in ``tests/server/cluster/test_reassign_partitions.py``."""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError
from kafka.structs import TopicPartition as KafkaTopicPartition

from odradek.client import AsyncAdminClient, BrokerError, NewTopic, TopicPartition
from odradek.protocol.generated.error_codes import ErrorCode
from tests.client.helpers import run


def test_errors_and_an_empty_list(broker, topic_name):
    tp = TopicPartition(topic_name, 0)

    async def main():
        async with AsyncAdminClient(broker.bootstrap) as admin:
            await admin.create_topics([NewTopic(topic_name, 1, 1)])
            assert await admin.list_partition_reassignments() == {}
            with pytest.raises(BrokerError) as raised:
                await admin.alter_partition_reassignments({
                    tp: [2], TopicPartition(topic_name, 5): [1], TopicPartition(topic_name + "-x", 0): None,
                    TopicPartition(topic_name, 0 + 0): [2]})
            errors = {k: e.code for k, e in raised.value.errors.items()}
            assert errors == {tp: ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              TopicPartition(topic_name, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              TopicPartition(topic_name + "-x", 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
            assert "not alive" in raised.value.errors[tp].message
            await admin.alter_partition_reassignments({tp: [1]})  # its own replicas: done at once
            assert await admin.list_partition_reassignments([tp]) == {}
            assert (await admin.describe_topics([topic_name]))[topic_name].partitions[0].replicas == (1,)

    run(main())


def test_kafka_python(broker, topic_name):
    run(_create(broker.bootstrap, topic_name))
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        tp = KafkaTopicPartition(topic_name, 0)
        assert admin.list_partition_reassignments() == {}
        assert admin.alter_partition_reassignments({tp: [1, 7]}) == {tp: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        assert admin.alter_partition_reassignments({tp: [1]}) == {tp: None}
    finally:
        admin.close()


async def _create(bootstrap: str, name: str) -> None:
    async with AsyncAdminClient(bootstrap) as admin:
        await admin.create_topics([NewTopic(name, 1, 1)])
