"""Share partitions on the partition leader (KIP-932 share groups; Kafka 4.2's share/ module).

For each (share group, topic partition) the leader keeps which records are in flight, which
member holds which, how often each was delivered, and moves the share-partition start offset
past what is done; durable state goes through the Persister to the share coordinator
(``odradek/coordinator/share/``).

Modules:
- ``share_partition.py``: ``SharePartition``, the sans-I/O state machine and its public API.
- ``share_partition_io.py``: the async edge (read state, write then answer).
- ``in_flight_cache.py``: the in-flight window (start offset, batches, trimming).
- ``in_flight_state.py``: per-batch / per-offset record state and pending transitions.
- ``acquisition_lock.py``: acquisition locks on a ``TimerQueue``.
- ``state_update.py``: what must be written (WriteShareGroupState batches).
- ``aborted_transactions.py``: read_committed: offsets of aborted transactions.
- ``auto_offset_reset.py``: share.auto.offset.reset.
- ``record_state.py``, ``share_types.py``, ``offset_runs.py``: values and helpers.
- ``share_partition_manager.py``: ``SharePartitionManager``, the share-partitions this broker
  leads, their lock timers and persister writes (ShareFetch/ShareAcknowledge use it).
- ``share_session_cache.py``: share sessions and their epochs.
- ``delayed_share_fetch.py``: reading the log and acquiring for a ShareFetch, and its wait.
"""
