"""Loading a shard replays transactional offset batches and transaction markers: pending
offsets come back pending, ended ones committed or dropped, as they were before."""

from __future__ import annotations

from odradek.coordinator.group import loader
from odradek.coordinator.group.group_requests import CommitPartition, CommitRequest, TxnCommitRequest
from odradek.coordinator.group.offset_metadata_manager import UNSTABLE
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.control import ABORT, COMMIT, build_end_txn_marker_batch
from odradek.storage.append_info import LogAppendInfo
from tests.coordinator.group.harness import ShardHarness
from tests.storage.helpers import T0, open_log


class LoggingHarness(ShardHarness):
    """Writes go to a real log, one batch per write (transactional when the write says so)."""

    def __init__(self, plog) -> None:
        super().__init__()
        self.plog = plog

    def _append(self, data: bytes) -> None:
        self.plog.append(data, LogAppendInfo.from_batches(data))

    def apply(self, result):
        for write in result.writes:
            spec = BatchSpec(base_offset=self.plog.log_end_offset)
            if write.producer_id >= 0:
                spec = BatchSpec(base_offset=self.plog.log_end_offset, producer_id=write.producer_id,
                                 producer_epoch=write.producer_epoch, transactional=True)
            builder = BatchBuilder(spec)
            for record in write.records:
                builder.append(T0, record.key_bytes(), record.value_bytes())
            self._append(builder.build())
        return super().apply(result)

    def marker(self, producer_id: int, committed: bool, epoch: int = 0) -> None:
        self._append(build_end_txn_marker_batch(COMMIT if committed else ABORT, 5, producer_id=producer_id,
                                                producer_epoch=epoch, timestamp=T0,
                                                base_offset=self.plog.log_end_offset))
        self.shard.replay_end_transaction(producer_id, committed)


def txn_commit(h, pid, offsets, group="g"):
    req = TxnCommitRequest(group, pid, 0, partitions=tuple(CommitPartition(t, p, o) for t, p, o in offsets))
    h.apply(h.shard.commit_transactional_offsets(req))


def commit(h, offsets, group="g"):
    h.apply(h.shard.commit_offsets(CommitRequest(group, partitions=tuple(CommitPartition(t, p, o) for t, p, o in offsets))))


def stable(shard, group="g", wanted=(("t", [0, 1, 2, 3]),)):
    return {(t, p): (v if v is UNSTABLE else v.offset if v else -1)
            for t, parts in shard.fetch_offsets(group, list(wanted), True) for p, v in parts}


def loaded(plog):
    fresh = ShardHarness()
    stats = loader.load_shard(fresh.shard, plog)
    return fresh.shard, stats


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
