"""Share-partition keys and their ``__share_group_state`` partition (Kafka's SharePartitionKey).

The coordinator key of a share-partition is ``"group_id:topic_id:partition"`` with the topic id
written as Kafka's ``Uuid.toString`` (URL-safe base64 of the 16 bytes, no padding), e.g.
``"g1:AAAAAAAAAAAAAAAAAAAAAQ:0"``. Its partition is Kafka's ShareCoordinatorService.partitionFor:
``Utils.abs(key.hashCode()) % share.coordinator.state.topic.num.partitions`` with Java's
``String.hashCode`` (``coordinator.partitioner``), the same rule as groups.
"""

from __future__ import annotations

import base64
import binascii
from uuid import UUID

from odradek.coordinator.partitioner import partition_for

SHARE_GROUP_STATE_TOPIC = "__share_group_state"

__all__ = ["SHARE_GROUP_STATE_TOPIC", "format_key", "parse_key", "state_partition", "uuid_string"]


def uuid_string(topic_id: UUID) -> str:
    """Kafka's ``Uuid.toString``."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def format_key(group_id: str, topic_id: UUID, partition: int) -> str:
    return f"{group_id}:{uuid_string(topic_id)}:{partition}"


def parse_key(key: str) -> tuple[str, UUID, int] | None:
    """``(group_id, topic_id, partition)`` of a coordinator key, None when malformed. The group
    id may itself hold colons: the last two fields are split off the right."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        return None
    group_id, topic, partition = parts
    try:
        raw = base64.urlsafe_b64decode(topic + "=" * (-len(topic) % 4))
        index = int(partition)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 16 or index < 0:
        return None
    return group_id, UUID(bytes=raw), index


def state_partition(group_id: str, topic_id: UUID, partition: int, partition_count: int) -> int:
    """The ``__share_group_state`` partition holding this share-partition's state."""
    return partition_for(format_key(group_id, topic_id, partition), partition_count)
