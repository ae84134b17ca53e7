"""AsyncAdminClient.elect_leaders against a real single broker: every partition is led by its
only (preferred) replica, so nothing needs an election; unknown partitions are named."""

from __future__ import annotations

import pytest

from odradek.client import AdminClient, AsyncAdminClient, ElectionType, NewTopic, TopicPartition
from odradek.protocol.generated.error_codes import ErrorCode
from tests.client.helpers import run


@pytest.mark.parametrize("kind", [ElectionType.PREFERRED, ElectionType.UNCLEAN, "unclean"])
def test_single_broker_needs_no_election(broker, topic_name, kind):
    async def main():
        async with AsyncAdminClient(broker.bootstrap) as admin:
            await admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1)])
            named = [TopicPartition(topic_name, 0), (topic_name, 1), (topic_name, 7), ("no-such-topic", 0)]
            out = await admin.elect_leaders(kind, named, timeout_ms=10_000)
            assert set(out) == {TopicPartition(topic_name, p) for p in (0, 1, 7)} | {TopicPartition("no-such-topic", 0)}
            codes = {tp: e.code for tp, e in out.items()}
            assert codes[TopicPartition(topic_name, 0)] == ErrorCode.ELECTION_NOT_NEEDED
            assert codes[TopicPartition(topic_name, 1)] == ErrorCode.ELECTION_NOT_NEEDED
            assert codes[TopicPartition(topic_name, 7)] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert codes[TopicPartition("no-such-topic", 0)] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            # every partition: those needing no election are left out, as Kafka does
            assert await admin.elect_leaders(kind, None, timeout_ms=10_000) == {}

    run(main())


def test_sync_client_forwards_elect_leaders(broker, topic_name):
    admin = AdminClient(broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1)])
        out = admin.elect_leaders(ElectionType.PREFERRED, [(topic_name, 0)])
        assert out[TopicPartition(topic_name, 0)].code == ErrorCode.ELECTION_NOT_NEEDED
    finally:
        admin.close()
