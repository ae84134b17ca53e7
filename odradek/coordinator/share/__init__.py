"""The share coordinator (KIP-932): durable state of share-partitions on ``__share_group_state``.

A share-partition is one (group id, topic id, partition) of a share group. Its durable state is
the share-partition start offset, the state epoch, the leader epoch of the writer, and the
in-flight state batches (offset runs with a delivery state and count) beyond the start offset.
It is kept on the compacted internal topic ``__share_group_state`` as Kafka's ShareSnapshot and
ShareUpdate records, keyed by ``"group_id:topic_id:partition"`` (Kafka's SharePartitionKey).

Modules:
- ``persister.py``: the interface share partitions use (Kafka's Persister) and its value types.
- ``memory_persister.py``: an in-memory Persister for unit tests.
- ``state_batch_combiner.py``: merging state batches (Kafka's PersisterStateBatchCombiner).
- ``share_partition_key.py``: the coordinator key and its ``__share_group_state`` partition.
- ``share_coordinator_record.py``: ShareSnapshot / ShareUpdate records.
- ``share_coordinator_shard.py``: the sans-I/O state machine of one partition; ``loader.py`` replays it.
- ``share_coordinator.py``: the runtime (leadership, loading, acks=all appends).
- ``default_persister.py``: the broker's Persister (local calls or the state RPCs).
"""


def start_share_coordinator(broker):
    """``(ShareCoordinator, DefaultStatePersister)`` of ``broker`` (called from
    ``server/broker.py`` after the group and transaction coordinators)."""
    from odradek.coordinator.share.default_persister import DefaultStatePersister
    from odradek.coordinator.share.share_coordinator import ShareCoordinator

    coordinator = ShareCoordinator.start(broker)
    return coordinator, DefaultStatePersister(broker, coordinator)
