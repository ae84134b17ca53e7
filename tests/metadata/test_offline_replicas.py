"""`OfflineReplicas`: the controller's offline replicas, per partition, as UpdateMetadata says."""

from __future__ import annotations

from odradek.metadata.offline_replicas import OfflineReplicas, ReportedPartition


def test_each_named_partition_takes_the_latest_list_and_others_keep_theirs():
    held = OfflineReplicas()
    assert held.of("t", 0) == ()
    held.update([ReportedPartition("t", 0, 2, (1,)), ReportedPartition("t", 1, 1, (3, 2))])
    assert (held.of("t", 0), held.of("t", 1)) == ((1,), (3, 2))
    held.update([ReportedPartition("t", 1, 1, ())])  # back online: cleared
    assert (held.of("t", 0), held.of("t", 1)) == ((1,), ())
    assert held.of("u", 0) == ()


def test_a_partition_being_deleted_is_forgotten():
    held = OfflineReplicas()
    held.update([ReportedPartition("t", 0, 2, (1,))])
    held.update([ReportedPartition("t", 0, -2, (1,))])  # LeaderDuringDelete
    assert held.of("t", 0) == ()


def test_an_update_that_changes_nothing_keeps_the_snapshot():
    """``snapshot`` is replaced only when the offline replicas change (Metadata's cache of
    answered partitions is kept by it, ``server/metadata_partitions.py``)."""
    held = OfflineReplicas()
    held.update([ReportedPartition("t", 0, 1, (2,))])
    snapshot = held.snapshot
    held.update([ReportedPartition("t", 0, 1, (2,)), ReportedPartition("u", 0, 1, ())])
    assert held.snapshot is snapshot
    held.update([ReportedPartition("t", 0, 1, ())])
    assert held.snapshot is not snapshot and held.of("t", 0) == () and snapshot[("t", 0)] == (2,)
