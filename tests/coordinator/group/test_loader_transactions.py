"""Loading a shard replays transactional offset batches and transaction markers: pending
offsets come back pending, ended ones committed or dropped, as they were before."""

from __future__ import annotations

from odradek.coordinator.group import loader
from odradek.coordinator.group.group_requests import CommitPartition, CommitRequest, TxnCommitRequest
from odradek.coordinator.group.offset_metadata_manager import UNSTABLE
from tests.coordinator.group.log_harness import LoggingHarness, loaded
from tests.storage.helpers import open_log


def txn_commit(h, pid, offsets, group="g"):
    req = TxnCommitRequest(group, pid, 0, partitions=tuple(CommitPartition(t, p, o) for t, p, o in offsets))
    h.apply(h.shard.commit_transactional_offsets(req))


def commit(h, offsets, group="g"):
    h.apply(h.shard.commit_offsets(CommitRequest(group, partitions=tuple(CommitPartition(t, p, o) for t, p, o in offsets))))


def stable(shard, group="g", wanted=(("t", [0, 1, 2, 3]),)):
    return {(t, p): (v if v is UNSTABLE else v.offset if v else -1)
            for t, parts in shard.fetch_offsets(group, list(wanted), True) for p, v in parts}


def test_load_replays_transactions_and_markers(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "READ_BYTES", 120)  # several reads
    plog = open_log(tmp_path)
    h = LoggingHarness(plog)
    commit(h, [("t", 0, 1), ("t", 3, 1)])
    txn_commit(h, 7, [("t", 0, 10), ("t", 1, 11)])
    txn_commit(h, 8, [("t", 2, 12)])
    commit(h, [("t", 3, 4)])
    h.marker(7, committed=True)
    h.marker(8, committed=False)
    txn_commit(h, 9, [("t", 3, 13)])  # still open
    shard, stats = loaded(plog)
    assert stats.end_offset == plog.log_end_offset and stats.skipped == 0
    assert stable(shard) == stable(h.shard) == {("t", 0): 10, ("t", 1): 11, ("t", 2): -1, ("t", 3): UNSTABLE}
    shard.replay_end_transaction(9, True)
    assert stable(shard)[("t", 3)] == 13


def test_plain_commit_after_transactional_record_wins_after_load(tmp_path):
    plog = open_log(tmp_path)
    h = LoggingHarness(plog)
    txn_commit(h, 7, [("t", 0, 10)])
    commit(h, [("t", 0, 20)])
    h.marker(7, committed=True)
    shard, _ = loaded(plog)
    assert stable(shard) == stable(h.shard) == {("t", 0): 20, ("t", 1): -1, ("t", 2): -1, ("t", 3): -1}
