"""Transactional offsets on one shard (TxnOffsetCommit): pending until the producer's marker,
committed or dropped by it, invisible to require_stable fetches meanwhile, kept from expiry,
covered by deletions, and rebuilt exactly by replaying the log (records and markers)."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.group.coordinator_record import GroupMetadataRecord, OffsetCommitRecord
from odradek.coordinator.group.group_requests import (
    CommitPartition,
    CommitRequest,
    LeavingMember,
    TxnCommitRequest,
)
from odradek.coordinator.group.offset_metadata_manager import UNSTABLE
from odradek.protocol.generated.error_codes import ErrorCode
from tests.coordinator.group.harness import ShardHarness

E = ErrorCode
MINUTE = 60_000


@dataclass(frozen=True)
class Marker:
    producer_id: int
    committed: bool


class TxnHarness(ShardHarness):
    """Also records each write's producer id, and markers, so the log can be replayed."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.producers: list[int] = []  # the producer id of each entry of ``log``

    def apply(self, result):
        before = len(self.log)
        response = super().apply(result)
        pids = [w.producer_id for w in result.writes for _ in w.records]
        self.producers.extend(pids[: len(self.log) - before])
        return response

    def marker(self, producer_id: int, committed: bool) -> None:
        self.log.append(Marker(producer_id, committed))
        self.producers.append(producer_id)
        self.shard.replay_end_transaction(producer_id, committed)

    def replayed(self) -> ShardHarness:
        fresh = ShardHarness()
        for offset, (entry, pid) in enumerate(zip(self.log, self.producers)):
            if isinstance(entry, Marker):
                fresh.shard.replay_end_transaction(entry.producer_id, entry.committed)
            else:
                fresh.shard.replay(entry, pid, offset)
        return fresh


def txn_commit(h, pid=1000, epoch=0, group="g", offsets=(("t", 0, 5),), member="", generation=-1,
               instance=None, metadata="m"):
    req = TxnCommitRequest(group, pid, epoch, member, instance, generation,
                           tuple(CommitPartition(t, p, o, 3, metadata) for t, p, o in offsets))
    return h.apply(h.shard.commit_transactional_offsets(req))


def commit(h, group="g", offsets=(("t", 0, 5),)):
    req = CommitRequest(group, partitions=tuple(CommitPartition(t, p, o) for t, p, o in offsets))
    return h.apply(h.shard.commit_offsets(req))


def fetched(h, group="g", wanted=None, require_stable=False):
    return {(t, p): (v if v is UNSTABLE else v.offset if v else -1)
            for t, parts in h.shard.fetch_offsets(group, wanted, require_stable) for p, v in parts}


def test_pending_until_commit_marker():
    h = TxnHarness()
    assert txn_commit(h, offsets=[("t", 0, 5), ("t", 1, 7)]) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert fetched(h, wanted=[("t", [0, 1])]) == {("t", 0): -1, ("t", 1): -1}
    assert fetched(h, wanted=[("t", [0, 1, 2])], require_stable=True) == {
        ("t", 0): UNSTABLE, ("t", 1): UNSTABLE, ("t", 2): -1}
    assert h.shard.offsets.pending.pending(1000, "g", ("t", 0)).offset == 5
    h.marker(1000, committed=True)
    assert fetched(h, wanted=[("t", [0, 1])], require_stable=True) == {("t", 0): 5, ("t", 1): 7}
    assert not h.shard.offsets.pending
    assert h.state("g") == "Empty"


def test_abort_marker_drops_pending_offsets():
    h = TxnHarness()
    commit(h, offsets=[("t", 0, 2)])
    txn_commit(h, offsets=[("t", 0, 5), ("t", 1, 7)])
    h.marker(1000, committed=False)
    assert fetched(h, require_stable=True) == {("t", 0): 2}
    assert not h.shard.offsets.pending.has_open_transactions("g")


def test_producers_are_independent_and_markers_of_others_do_nothing():
    h = TxnHarness()
    txn_commit(h, pid=1, offsets=[("t", 0, 5)])
    txn_commit(h, pid=2, offsets=[("t", 1, 9)])
    h.marker(3, committed=True)  # a producer with nothing here
    h.marker(2, committed=False)
    assert fetched(h, wanted=[("t", [0, 1])], require_stable=True) == {("t", 0): UNSTABLE, ("t", 1): -1}
    h.marker(1, committed=True)
    assert fetched(h, wanted=[("t", [0, 1])], require_stable=True) == {("t", 0): 5, ("t", 1): -1}


def test_all_offsets_fetch_marks_only_committed_partitions_unstable():
    h = TxnHarness()
    commit(h, offsets=[("t", 0, 1), ("u", 0, 1)])
    txn_commit(h, offsets=[("t", 0, 5), ("t", 3, 5)])
    assert fetched(h, require_stable=True) == {("t", 0): UNSTABLE, ("u", 0): 1}
    assert fetched(h) == {("t", 0): 1, ("u", 0): 1}


def test_a_later_plain_commit_wins_over_an_earlier_transactional_one():
    h = TxnHarness()
    txn_commit(h, offsets=[("t", 0, 5), ("t", 1, 5)])
    commit(h, offsets=[("t", 0, 8)])  # written after the transactional record
    h.marker(1000, committed=True)
    assert fetched(h) == {("t", 0): 8, ("t", 1): 5}
    assert fetched(h.replayed()) == fetched(h)


def test_a_transactional_commit_wins_over_an_earlier_plain_one():
    h = TxnHarness()
    commit(h, offsets=[("t", 0, 8)])
    txn_commit(h, offsets=[("t", 0, 5)])
    h.marker(1000, committed=True)
    assert fetched(h) == {("t", 0): 5}


def test_replay_rebuilds_pending_and_committed_offsets():
    h = TxnHarness()
    commit(h, offsets=[("t", 0, 1)])
    txn_commit(h, pid=1, offsets=[("t", 0, 5)])
    txn_commit(h, pid=2, offsets=[("t", 1, 6)])
    h.marker(1, committed=True)
    txn_commit(h, pid=1, epoch=1, offsets=[("t", 2, 7)])
    fresh = h.replayed()
    assert fetched(fresh, require_stable=True) == fetched(h, require_stable=True) == {("t", 0): 5}
    assert fetched(fresh, wanted=[("t", [1, 2])], require_stable=True) == {("t", 1): UNSTABLE, ("t", 2): UNSTABLE}
    fresh.shard.replay_end_transaction(2, False)
    fresh.shard.replay_end_transaction(1, True)
    assert fetched(fresh, require_stable=True) == {("t", 0): 5, ("t", 2): 7}


def test_who_may_commit_transactionally():
    h = TxnHarness()
    assert txn_commit(h, group="new", generation=1) == {("t", 0): E.ILLEGAL_GENERATION}
    assert txn_commit(h, group="new") == {("t", 0): E.NONE}  # a simple group is created
    [a] = h.joined_group("grp")
    assert txn_commit(h, group="grp", member=a, generation=1) == {("t", 0): E.NONE}
    assert txn_commit(h, group="grp", member=a, generation=0) == {("t", 0): E.ILLEGAL_GENERATION}
    assert txn_commit(h, group="grp", member="x", generation=1) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # Old producers (v0-v2) send neither member nor generation: accepted whatever the state.
    assert txn_commit(h, group="grp") == {("t", 0): E.NONE}
    assert txn_commit(h, group="grp", metadata="x" * 5000) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}


def test_completing_rebalance_does_not_refuse_transactional_commits():
    h = TxnHarness()
    [a] = h.joined_group("grp")
    h.join("grp", member_id=a, client_id="c0")  # the member rejoins: a new generation
    h.tick()
    assert h.state("grp") == "CompletingRebalance"
    assert txn_commit(h, group="grp", member=a, generation=2) == {("t", 0): E.NONE}


def test_writes_are_transactional_batches_of_the_producer():
    h = TxnHarness()
    result = h.shard.commit_transactional_offsets(
        TxnCommitRequest("g", 42, 3, partitions=(CommitPartition("t", 0, 1),)))
    [write] = result.writes
    assert (write.producer_id, write.producer_epoch, write.replay) == (42, 3, True)


def test_failed_write_leaves_nothing_pending():
    h = TxnHarness()
    h.write_error = E.INVALID_PRODUCER_EPOCH
    txn_commit(h)
    assert not h.shard.offsets.pending


def test_pending_offsets_are_not_expired_and_keep_the_group():
    h = TxnHarness()
    commit(h, offsets=[("t", 0, 1), ("t", 1, 1)])
    txn_commit(h, offsets=[("t", 0, 5)])
    h.clock.advance(2 * MINUTE)
    h.apply(h.shard.expire_offsets(h.clock.milliseconds()))
    assert fetched(h) == {("t", 0): 1}  # t-1 expired, t-0 held by the open transaction
    assert "g" in h.shard.groups.groups
    h.marker(1000, committed=False)
    h.apply(h.shard.expire_offsets(h.clock.milliseconds()))
    assert fetched(h) == {} and "g" not in h.shard.groups.groups


def test_open_transaction_without_committed_offsets_keeps_the_group():
    h = TxnHarness()
    txn_commit(h)
    h.clock.advance(2 * MINUTE)
    h.apply(h.shard.expire_offsets(h.clock.milliseconds()))
    assert "g" in h.shard.groups.groups
    h.marker(1000, committed=True)
    assert fetched(h) == {("t", 0): 5}


def test_offset_delete_tombstones_pending_partitions():
    h = TxnHarness()
    commit(h, offsets=[("t", 0, 1)])
    txn_commit(h, offsets=[("t", 0, 5), ("t", 1, 6), ("u", 0, 1)])
    error, errors = h.apply(h.shard.delete_offsets("g", [("t", 0), ("t", 1)]))
    assert error == E.NONE and errors == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert [(r.topic, r.partition) for r in h.log[-2:]] == [("t", 0), ("t", 1)]
    h.marker(1000, committed=True)
    assert fetched(h) == {("u", 0): 1}
    assert fetched(h.replayed()) == fetched(h)


def test_delete_groups_tombstones_pending_only_partitions():
    h = TxnHarness()
    commit(h, offsets=[("t", 0, 1)])
    txn_commit(h, offsets=[("t", 0, 5), ("t", 1, 6)])
    assert h.apply(h.shard.delete_groups(["g"])) == {"g": E.NONE}
    tombstones = [(r.topic, r.partition) for r in h.log if isinstance(r, OffsetCommitRecord) and r.offset is None]
    assert tombstones == [("t", 0), ("t", 1)]
    assert isinstance(h.log[-1], GroupMetadataRecord) and h.log[-1].value is None
    h.marker(1000, committed=True)
    assert fetched(h) == {}


def test_deleted_topics_drop_pending_offsets():
    h = TxnHarness()
    txn_commit(h, offsets=[("gone", 0, 5), ("t", 0, 6)])
    h.apply(h.shard.on_topics_deleted({"gone"}))
    h.marker(1000, committed=True)
    assert fetched(h) == {("t", 0): 6}


def test_unload_forgets_pending_offsets():
    h = TxnHarness()
    txn_commit(h)
    h.shard.unload()
    assert not h.shard.offsets.pending
    assert not h.shard.offsets.pending.has_open_transactions("g")


def test_member_leaving_does_not_touch_pending_offsets():
    h = TxnHarness()
    [a] = h.joined_group("grp")
    txn_commit(h, group="grp", member=a, generation=1)
    h.apply(h.shard.leave_group("grp", [LeavingMember(a)]))
    h.tick()
    h.marker(1000, committed=True)
    assert fetched(h, "grp") == {("t", 0): 5}
