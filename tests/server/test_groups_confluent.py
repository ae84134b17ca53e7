"""Consumer groups driven by librdkafka (confluent-kafka): cooperative-sticky incremental
rebalancing, static membership, and the admin views."""

from __future__ import annotations

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from tests.server.group_clients import (
    QUIET,
    ConsumerThread,
    confluent_adapter,
    create_topic,
    disjoint_cover,
    produce,
    wait_for,
)


def generation(broker, group: str) -> int:
    """The group's generation, read from the coordinator on the broker's loop."""
    def read():
        coordinator = broker.broker.group_coordinator
        slot = coordinator._slot_for(group)
        return slot.shard.groups.group(group).generation_id

    return broker.call(read)


def test_cooperative_sticky_rebalances_incrementally(broker):
    create_topic(broker.bootstrap, "coop", 6)
    adapter = confluent_adapter(broker.bootstrap, "coop-group", "coop",
                                **{"partition.assignment.strategy": "cooperative-sticky"})
    first = ConsumerThread(adapter)
    first.start()
    second = ConsumerThread(adapter)
    try:
        wait_for(lambda: first.assignment == list(range(6)))
        second.start()
        wait_for(lambda: disjoint_cover([first, second], 6) and len(first.assignment) == 3)
        # The first consumer gave up only what moved; it never had everything revoked.
        revoked = [parts for kind, parts in first.events if kind == "revoke"]
        assert revoked and all(len(parts) == 3 for parts in revoked)
        assert sorted(revoked[0] + first.assignment) == list(range(6))
        assert ("assign", second.assignment) in second.events
    finally:
        first.stop()
        second.stop()


def test_static_member_restart_within_session_timeout_causes_no_rebalance(broker):
    create_topic(broker.bootstrap, "static", 4)
    static = confluent_adapter(broker.bootstrap, "static-group", "static",
                               **{"group.instance.id": "instance-a", "session.timeout.ms": 30_000})
    dynamic = ConsumerThread(confluent_adapter(broker.bootstrap, "static-group", "static"))
    a = ConsumerThread(static)
    a.start()
    dynamic.start()
    try:
        wait_for(lambda: disjoint_cover([a, dynamic], 4))
        before, events, owned = generation(broker, "static-group"), list(dynamic.events), a.assignment
        a.stop()  # a static member's close sends no LeaveGroup
        restarted = ConsumerThread(static)
        restarted.start()
        try:
            wait_for(lambda: restarted.assignment == owned)
            assert generation(broker, "static-group") == before
            assert dynamic.events == events  # the other member saw no rebalance
        finally:
            restarted.stop()
    finally:
        dynamic.stop()


def test_admin_lists_describes_and_reads_offsets(broker):
    create_topic(broker.bootstrap, "views", 3)
    produce(broker.bootstrap, "views", [b"v%d" % i for i in range(30)], partitions=3)
    t = ConsumerThread(confluent_adapter(broker.bootstrap, "viewed", "views", **{"client.id": "viewer"}))
    t.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    try:
        wait_for(lambda: len(t.records) == 30)
        committed = [TopicPartition("views", 0, 10), TopicPartition("views", 1, 3), TopicPartition("views", 2, 0)]
        t.call(lambda c: c.commit(offsets=committed, asynchronous=False))

        stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(20)
        assert "viewed" in {g.group_id for g in stable.valid}
        empty = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(20)
        assert "viewed" not in {g.group_id for g in empty.valid}

        description = admin.describe_consumer_groups(["viewed"])["viewed"].result(20)
        assert description.state == ConsumerGroupState.STABLE and description.partition_assignor == "range"
        [member] = description.members
        assert member.client_id == "viewer"
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1, 2]

        request = [ConsumerGroupTopicPartitions("viewed")]
        offsets = admin.list_consumer_group_offsets(request)["viewed"].result(20)
        assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {0: 10, 1: 3, 2: 0}
        lag = {tp.partition: 10 - tp.offset for tp in offsets.topic_partitions}
        assert lag == {0: 0, 1: 7, 2: 10}  # each partition holds 10 records
    finally:
        t.stop()


def test_a_consumer_beyond_group_max_size_is_refused(tmp_path):
    from confluent_kafka import Consumer, KafkaError

    from odradek.testing.broker import InProcessBroker

    with InProcessBroker(tmp_path / "data", group_max_size=1) as small:
        create_topic(small.bootstrap, "crowded", 2)
        config = {"bootstrap.servers": small.bootstrap, "group.id": "crowd", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, "topic.metadata.refresh.interval.ms": 1000}
        first, second = Consumer(config), Consumer(config)
        try:
            first.subscribe(["crowded"])
            wait_for(lambda: len(first.assignment()) == 2, step=lambda: first.poll(0.1))
            second.subscribe(["crowded"])
            errors = []

            def poll_second():
                message = second.poll(0.2)
                if message is not None and message.error():
                    errors.append(message.error().code())
                first.poll(0)

            wait_for(lambda: KafkaError.GROUP_MAX_SIZE_REACHED in errors, step=poll_second)
            assert len(first.assignment()) == 2 and not second.assignment()
        finally:
            first.close()
            second.close()
