"""One group, three client libraries: kafka-python, librdkafka and aiokafka agree on the
consumer protocol, whichever of them the coordinator makes leader."""

from __future__ import annotations

import pytest
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from tests.server.group_clients import (
    ConsumerThread,
    aiokafka_adapter,
    confluent_adapter,
    create_topic,
    disjoint_cover,
    kafka_python_adapter,
    produce,
    wait_for,
)


@pytest.mark.parametrize("strategy", ["roundrobin", "range"])
def test_three_libraries_share_one_group(broker, strategy):
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRange
    from aiokafka.coordinator.assignors.roundrobin import (
        RoundRobinPartitionAssignor as AioRoundRobin,
    )

    topic, group = f"mixed-{strategy}", f"mixed-{strategy}"
    create_topic(broker.bootstrap, topic, 6)
    kp_assignor = RoundRobinPartitionAssignor if strategy == "roundrobin" else RangePartitionAssignor
    aio_assignor = AioRoundRobin if strategy == "roundrobin" else AioRange
    threads = [
        ConsumerThread(kafka_python_adapter(broker.bootstrap, group, topic, enable_auto_commit=True,
                                            auto_commit_interval_ms=100,
                                            partition_assignment_strategy=[kp_assignor]), "kafka-python"),
        ConsumerThread(confluent_adapter(broker.bootstrap, group, topic, **{
            "partition.assignment.strategy": strategy, "enable.auto.commit": True,
            "auto.commit.interval.ms": 100}), "confluent"),
        ConsumerThread(aiokafka_adapter(broker.bootstrap, group, topic, partition_assignment_strategy=(aio_assignor,),
                                        enable_auto_commit=True, auto_commit_interval_ms=100), "aiokafka"),
    ]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: disjoint_cover(threads, 6) and all(len(t.assignment) == 2 for t in threads), timeout=60)
        values = [b"m%d" % i for i in range(120)]
        produce(broker.bootstrap, topic, values, partitions=6)
        wait_for(lambda: sum(len(t.records) for t in threads) >= 120)
        consumed = [list(t.records) for t in threads]
    finally:
        for t in threads:
            t.stop()
    assert sorted(v for vs in consumed for v in vs) == sorted(values)
    assert [len(vs) for vs in consumed] == [40, 40, 40]
