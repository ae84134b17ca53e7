"""The group coordinator: Kafka's classic consumer group protocol and KIP-848's consumer group
protocol (``consumer/``: ConsumerGroupHeartbeat, ConsumerGroupDescribe, server-side
assignors), with committed offsets and group metadata kept in the compacted
``__consumer_offsets`` topic.

Layers, bottom up:

- ``group_state``, ``member``, ``classic_group``: a group's membership and states;
- ``offset_and_metadata``, ``coordinator_record``: the records of ``__consumer_offsets``;
- ``group_metadata_manager`` (rebalances), ``offset_metadata_manager`` (offsets), joined in
  ``group_coordinator_shard``: the sans-I/O state machine of one partition, changed by
  operations that return records (``coordinator_result``) and by replaying records;
- ``loader``: replays a partition's log into a shard;
- ``group_coordinator``: the asyncio runtime on the broker (loading, writing, timers).
"""

from odradek.coordinator.group.group_coordinator import GroupCoordinator

__all__ = ["GroupCoordinator"]
