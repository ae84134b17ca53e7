"""AsyncAdminClient against a real broker: topics, partitions, configs, cluster, records."""

from __future__ import annotations

import pytest

from odradek.client import (
    AlterConfigOp,
    AlterConfigOpType,
    AsyncAdminClient,
    AsyncProducer,
    BrokerError,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
    TopicPartition,
)
from odradek.protocol.generated.error_codes import ErrorCode
from tests.client.helpers import run


def test_create_describe_list_and_delete_topics(broker, topic_name):
    a, b, c = topic_name + "-a", topic_name + "-b", topic_name + "-c"

    async def main():
        async with AsyncAdminClient(broker.bootstrap) as admin:
            await admin.create_topics([
                NewTopic(a, num_partitions=3, replication_factor=1, configs={"retention.ms": "123456"}),
                NewTopic(b, replica_assignment={0: [1], 1: [1]}),
                c,  # broker defaults
            ])
            assert {a, b, c} <= set(await admin.list_topics())
            described = await admin.describe_topics([a, b, c])
            assert [len(described[t].partitions) for t in (a, b, c)] == [3, 2, 1]
            assert all(p.leader == 1 and p.replicas == (1,) and p.isr == (1,)
                       for t in (a, b) for p in described[t].partitions)
            assert not described[a].is_internal and described[a].topic_id.int != 0
            configs = await admin.describe_configs([ConfigResource(ResourceType.TOPIC, a)])
            entry = configs[ConfigResource(ResourceType.TOPIC, a)]["retention.ms"]
            assert (entry.value, entry.source, entry.is_default) == ("123456", ConfigSource.DYNAMIC_TOPIC_CONFIG, False)
            assert a in await admin.describe_topics()  # all topics
            await admin.delete_topics([a, b, c])
            assert not {a, b, c} & set(await admin.list_topics())

    run(main())


def test_per_topic_errors_are_raised_with_every_failure_listed(broker, topic_name):
    async def main():
        async with AsyncAdminClient(broker.bootstrap) as admin:
            await admin.create_topics([NewTopic(topic_name, 1, 1)])
            with pytest.raises(BrokerError) as info:
                await admin.create_topics([NewTopic(topic_name, 1, 1), NewTopic(topic_name + "-ok", 1, 1),
                                           NewTopic(topic_name + "-bad", 0, 1)])
            errors = info.value.errors
            assert errors[topic_name].code == ErrorCode.TOPIC_ALREADY_EXISTS
            assert errors[topic_name + "-bad"].code == ErrorCode.INVALID_PARTITIONS
            assert set(errors) == {topic_name, topic_name + "-bad"}  # the third one was created
            assert topic_name + "-ok" in await admin.list_topics()
            with pytest.raises(BrokerError) as info:
                await admin.create_topics([NewTopic(topic_name + "-rf", 1, 3)])  # one broker only
            assert info.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
            with pytest.raises(BrokerError) as info:
                await admin.delete_topics([topic_name + "-never"])
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            with pytest.raises(BrokerError) as info:
                await admin.describe_topics([topic_name + "-never"])
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            await admin.create_topics([NewTopic(topic_name + "-v", 1, 1)], validate_only=True)
            assert topic_name + "-v" not in await admin.list_topics()

    run(main())


def test_create_partitions(broker, topic_name):
    async def main():
        async with AsyncAdminClient(broker.bootstrap) as admin:
            await admin.create_topics([NewTopic(topic_name, 2, 1)])
            await admin.create_partitions({topic_name: 4})
            await admin.create_partitions({topic_name: NewPartitions(6, [[1], [1]])})
            assert len((await admin.describe_topics([topic_name]))[topic_name].partitions) == 6
            with pytest.raises(BrokerError) as info:
                await admin.create_partitions({topic_name: 3})  # cannot shrink
            assert info.value.code == ErrorCode.INVALID_PARTITIONS

    run(main())


def test_alter_and_incremental_alter_configs(broker, topic_name):
    resource = ConfigResource(ResourceType.TOPIC, topic_name)

    async def value_of(admin, name):
        return (await admin.describe_configs([resource]))[resource][name]

    async def main():
        async with AsyncAdminClient(broker.bootstrap) as admin:
            await admin.create_topics([NewTopic(topic_name, 1, 1)])
            await admin.incremental_alter_configs({resource: [AlterConfigOp("retention.ms", "5000"),
                                                              AlterConfigOp("cleanup.policy", "compact")]})
            assert (await value_of(admin, "retention.ms")).value == "5000"
            await admin.incremental_alter_configs({resource: [
                AlterConfigOp("cleanup.policy", "delete", AlterConfigOpType.APPEND),
                AlterConfigOp("retention.ms", op=AlterConfigOpType.DELETE)]})
            assert (await value_of(admin, "cleanup.policy")).value == "compact,delete"
            assert (await value_of(admin, "retention.ms")).source == ConfigSource.DEFAULT_CONFIG
            await admin.alter_configs({resource: {"segment.ms": "600000"}})  # replaces them all
            assert (await value_of(admin, "segment.ms")).value == "600000"
            assert (await value_of(admin, "cleanup.policy")).value == "delete"
            with pytest.raises(BrokerError) as info:
                await admin.incremental_alter_configs({resource: [AlterConfigOp("retention.ms", "soon")]})
            assert info.value.code == ErrorCode.INVALID_CONFIG
            broker_configs = await admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
            assert "log.retention.hours" in broker_configs[ConfigResource(ResourceType.BROKER, "1")]

    run(main())


def test_describe_cluster_delete_records_and_list_offsets(broker, topic_name):
    async def main():
        tp = TopicPartition(topic_name, 0)
        async with AsyncAdminClient(broker.bootstrap) as admin:
            cluster = await admin.describe_cluster()
            assert cluster.controller_id == 1 and [b.node_id for b in cluster.brokers] == [1]
            assert cluster.brokers[0].port == broker.port and cluster.cluster_id
            await admin.create_topics([NewTopic(topic_name, 1, 1)])
            async with AsyncProducer(broker.bootstrap) as producer:
                for i in range(10):
                    producer.send(topic_name, b"v", timestamp=1000 + i)
                await producer.flush()
            assert await admin.delete_records({tp: 4}) == {tp: 4}
            offsets = await admin.list_offsets({tp: -2})
            assert offsets[tp].offset == 4
            assert (await admin.list_offsets({tp: -1}))[tp].offset == 10
            assert (await admin.list_offsets({tp: 1006}))[tp].offset == 6
            assert (await admin.list_offsets({tp: -3}))[tp] .timestamp == 1009
            assert await admin.delete_records({tp: -1}) == {tp: 10}  # up to the high watermark
            with pytest.raises(BrokerError) as info:
                await admin.delete_records({tp: 99})
            assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE

    run(main())
