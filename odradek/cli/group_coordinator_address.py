"""Where a group's coordinator is, as ``kafka-consumer-groups --describe --state`` and
``kafka-share-groups --describe --state`` print it in their COORDINATOR (ID) column.

Consumer, classic and share groups alike are coordinated by the leader of the group's
``__consumer_offsets`` partition (Kafka's ``GroupCoordinator.partitionFor``: the group id's
hash modulo the partition count, coordinator/partitioner.py). Used by cli/groups_cmd.py and
cli/share_groups_cmd.py.
"""

from __future__ import annotations

from odradek.cli import groups_text

GROUP_METADATA_TOPIC = "__consumer_offsets"


def coordinator_address(admin, group: str) -> str:
    """``host:port (id)`` of the group's coordinator; ``-`` when its partition has no live
    leader, or ``__consumer_offsets`` is not there (no group ever committed) or not ours to
    see. ``admin`` is a sync admin client (client/sync_admin.py)."""
    from odradek.client import KafkaError  # here: the command's --help need not load the client
    from odradek.coordinator.partitioner import partition_for

    try:
        offsets = admin.describe_topics([GROUP_METADATA_TOPIC])[GROUP_METADATA_TOPIC]
    except KafkaError:
        return groups_text.MISSING
    index = partition_for(group, len(offsets.partitions))
    leader = next((p.leader for p in offsets.partitions if p.partition == index), -1)
    broker = next((b for b in admin.describe_cluster().brokers if b.node_id == leader), None)
    return groups_text.MISSING if broker is None else f"{broker.host}:{broker.port} ({leader})"
