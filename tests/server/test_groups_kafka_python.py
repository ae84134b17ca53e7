"""Consumer groups driven by kafka-python: assignment, rebalancing, admin views."""

from __future__ import annotations

from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient

from tests.server.group_clients import (
    ConsumerThread,
    create_topic,
    disjoint_cover,
    kafka_python_adapter,
    produce,
    wait_for,
)


def consumer(bootstrap: str, group: str, topic: str, **kw) -> KafkaConsumer:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      heartbeat_interval_ms=200, enable_auto_commit=False, **kw)
    # Fetch the topic's metadata before joining. Otherwise a leader may first assign without
    # it and rejoin when it arrives; kafka-python 3.0.12 can then drop its own SyncGroup
    # result when a short poll() times out during that rejoin (a client bug: the consumer
    # sits with no partitions until its next rebalance).
    wait_for(lambda: c.partitions_for_topic(topic))
    c.subscribe([topic])
    return c


def poll_all(consumers, seen):
    for i, c in enumerate(consumers):
        for records in c.poll(1000).values():
            seen[i] += [r.value for r in records]


def evenly(threads, partitions: int) -> bool:
    return disjoint_cover(threads, partitions) and all(
        len(t.assignment) == partitions // len(threads) for t in threads)


def test_three_consumers_share_six_partitions_and_read_every_record_once(broker):
    create_topic(broker.bootstrap, "six", 6)
    # Auto-commit: a consumer commits its positions before it rejoins, so a rebalance (the
    # leader rejoins once when its metadata catches up) moves no record to a second reader.
    adapter = kafka_python_adapter(broker.bootstrap, "trio", "six", enable_auto_commit=True,
                                   auto_commit_interval_ms=100)
    threads = [ConsumerThread(adapter) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: evenly(threads, 6))
        values = [b"r%d" % i for i in range(300)]
        produce(broker.bootstrap, "six", values, partitions=6)
        wait_for(lambda: sum(len(t.records) for t in threads) >= 300)
        assert evenly(threads, 6)
        consumed = [list(t.records) for t in threads]  # before anyone leaves
    finally:
        for t in threads:
            t.stop()
    assert sorted(v for vs in consumed for v in vs) == sorted(values)  # each record exactly once
    assert sorted(len(vs) for vs in consumed) == [100, 100, 100]  # two partitions of 50 each


def test_a_consumer_that_leaves_causes_an_immediate_rebalance(broker):
    create_topic(broker.bootstrap, "leave", 6)
    # A session timeout far beyond the wait below: only LeaveGroup can make this pass.
    adapter = kafka_python_adapter(broker.bootstrap, "leavers", "leave", session_timeout_ms=120_000,
                                   request_timeout_ms=130_000)
    threads = [ConsumerThread(adapter) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: evenly(threads, 6))
        threads.pop().stop()  # close() sends LeaveGroup
        wait_for(lambda: evenly(threads, 6), timeout=60)
    finally:
        for t in threads:
            t.stop()


def test_committed_offsets_and_lag_in_the_admin_views(broker):
    create_topic(broker.bootstrap, "lagging", 2)
    produce(broker.bootstrap, "lagging", [b"x%d" % i for i in range(20)], partitions=2)
    c = consumer(broker.bootstrap, "watched", "lagging", client_id="watcher")
    seen = [[]]
    try:
        wait_for(lambda: len(seen[0]) >= 20, step=lambda: poll_all([c], seen))
        c.commit({TopicPartition("lagging", 0): _offset(4), TopicPartition("lagging", 1): _offset(10)})
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            assert {g["group_id"]: g["group_state"] for g in admin.list_groups()}["watched"] == "Stable"
            described = admin.describe_groups(["watched"])["watched"]
            [member] = described["members"]
            assert described["group_state"] == "Stable" and described["protocol_data"] == "range"
            assert member["client_id"] == "watcher" and member["member_metadata"]["topics"] == ["lagging"]
            assigned = member["member_assignment"]["assigned_partitions"]
            assert assigned == [{"topic": "lagging", "partitions": [0, 1]}]
            committed = admin.list_group_offsets("watched")["watched"]
            assert {tp.partition: om.offset for tp, om in committed.items()} == {0: 4, 1: 10}
            ends = c.end_offsets([TopicPartition("lagging", 0), TopicPartition("lagging", 1)])
            lag = {tp.partition: ends[tp] - om.offset for tp, om in committed.items()}
            assert lag == {0: 6, 1: 0}
        finally:
            admin.close()
    finally:
        c.close()


def _offset(n: int):
    from kafka.structs import OffsetAndMetadata

    return OffsetAndMetadata(n, "", -1)


def test_deleting_a_topic_removes_the_offsets_committed_for_it(broker):
    for name in ("doomed", "kept"):
        create_topic(broker.bootstrap, name, 2)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="survivor", enable_auto_commit=False)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        c.assign([TopicPartition("doomed", 0), TopicPartition("kept", 1)])
        c.commit({TopicPartition("doomed", 0): _offset(3), TopicPartition("kept", 1): _offset(7)})
        # Closed first: its metadata refreshes (auto-creation allowed, as in kafka-python's
        # default) could create "doomed" again between the deletion and the re-creation.
        c.close()
        assert len(admin.list_group_offsets("survivor")["survivor"]) == 2
        admin.delete_topics(["doomed"])
        create_topic(broker.bootstrap, "doomed", 2)  # a new topic of the same name starts afresh
        committed = admin.list_group_offsets("survivor")["survivor"]
        assert {(tp.topic, tp.partition): om.offset for tp, om in committed.items()} == {("kept", 1): 7}
    finally:
        admin.close()
        c.close()
