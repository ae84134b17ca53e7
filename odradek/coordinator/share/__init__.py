"""The share coordinator (KIP-932): durable state of share-partitions on ``__share_group_state``.

A share-partition is one (group id, topic id, partition) of a share group. Its durable state is
the share-partition start offset, the state epoch, the leader epoch of the writer, and the
in-flight state batches (offset runs with a delivery state and count) beyond the start offset.
It is kept on the compacted internal topic ``__share_group_state`` as Kafka's ShareSnapshot and
ShareUpdate records, keyed by ``"group_id:topic_id:partition"`` (Kafka's SharePartitionKey).

Modules:
- ``persister.py``: the interface share partitions use (Kafka's Persister) and its value types.
- ``memory_persister.py``: an in-memory Persister for unit tests.
"""
