"""ShareCoordinatorShard as a pure state machine: records out, state only by replay."""

from __future__ import annotations

from uuid import UUID

from odradek.coordinator.share.persister import PersisterStateBatch as B
from odradek.coordinator.share.share_coordinator_config import ShareCoordinatorConfig
from odradek.coordinator.share.share_coordinator_record import SNAPSHOT_TYPE, UPDATE_TYPE, decode_record
from odradek.coordinator.share.share_coordinator_shard import ShareCoordinatorShard
from odradek.coordinator.share.state_batch_combiner import combine_state_batches
from odradek.protocol.generated.error_codes import ErrorCode as E

KEY = ("g", UUID(int=7), 0)


class Clock:
    def milliseconds(self) -> int:
        return 1000


class Harness:
    """A shard whose written records go through their bytes and into ``log``, then replay."""

    def __init__(self, per_snapshot: int = 500) -> None:
        self.config = ShareCoordinatorConfig(snapshot_update_records_per_snapshot=per_snapshot)
        self.shard = ShareCoordinatorShard(0, self.config, Clock())
        self.log = []

    def run(self, result):
        for record in result.records:
            decoded = decode_record(record.key_bytes(), record.value_bytes())
            assert decoded == record
            self.log.append(decoded)
            self.shard.replay(decoded)
        return result.response

    def replayed(self) -> ShareCoordinatorShard:
        fresh = ShareCoordinatorShard(0, self.config, Clock())
        for record in self.log:
            fresh.replay(record)
        return fresh


def test_combiner_paints_newer_over_older_and_trims_below_start():
    stored = [B(5, 19, 0, 1), B(20, 29, 2, 1)]
    assert combine_state_batches(stored, [B(15, 24, 4, 5)], 10) == (B(10, 14, 0, 1), B(15, 24, 4, 5), B(25, 29, 2, 1))
    # equal neighbours join; a run wholly below the start offset goes
    assert combine_state_batches([B(0, 4, 0, 1)], [B(5, 9, 0, 1), B(10, 12, 2, 1)], 3) == (B(3, 9, 0, 1),
                                                                                          B(10, 12, 2, 1))
    assert combine_state_batches([B(0, 4, 0, 1)], [], 5) == ()


def test_uninitialized_reads_as_start_offset_minus_one():
    h = Harness()
    state = h.run(h.shard.read(KEY, 0))
    assert (state.error, state.state_epoch, state.start_offset, state.batches) == (E.NONE, 0, -1, ())
    assert h.shard.read_summary(KEY) == (E.NONE, 0, -1)


def test_initialize_then_writes_merge_snapshot_and_updates():
    h = Harness()
    assert h.run(h.shard.initialize(KEY, 1, 10)) == E.NONE
    assert h.log[-1].record_type == SNAPSHOT_TYPE
    assert h.run(h.shard.write(KEY, 1, 0, 10, [B(10, 19, 0, 1), B(20, 29, 2, 1)])) == E.NONE
    assert h.run(h.shard.write(KEY, 1, 0, 15, [B(18, 24, 4, 5)])) == E.NONE
    assert [r.record_type for r in h.log] == [SNAPSHOT_TYPE, UPDATE_TYPE, UPDATE_TYPE]
    state = h.run(h.shard.read(KEY, 0))
    assert state.start_offset == 15 and state.state_epoch == 1
    assert state.batches == (B(15, 17, 0, 1), B(18, 24, 4, 5), B(25, 29, 2, 1))


def test_a_snapshot_replaces_updates_every_n():
    h = Harness(per_snapshot=2)
    h.run(h.shard.initialize(KEY, 1, 0))
    for i in range(7):
        assert h.run(h.shard.write(KEY, 1, 0, -1, [B(i, i, 2, 1)])) == E.NONE
    types = [r.record_type for r in h.log]
    # Kafka's count: the first update of a key counts 0, each further one +1; a write once it
    # reached N is a snapshot, which resets it to 0
    assert types == [SNAPSHOT_TYPE, UPDATE_TYPE, UPDATE_TYPE, UPDATE_TYPE, SNAPSHOT_TYPE,
                     UPDATE_TYPE, UPDATE_TYPE, SNAPSHOT_TYPE]
    assert h.log[4].value.snapshot_epoch == 1 and h.log[4].value.state_batches == (B(0, 3, 2, 1),)
    assert h.shard.states[KEY].batches == (B(0, 6, 2, 1),) and h.log[7].value.snapshot_epoch == 2


def test_replay_gives_the_same_state():
    h = Harness(per_snapshot=3)
    h.run(h.shard.initialize(KEY, 2, 5))
    for i in range(10):
        h.run(h.shard.write(KEY, 2, i % 3, 5 + i, [B(5 + i, 9 + i, i % 2 * 2, i)]))
    h.run(h.shard.read(KEY, 4))
    other = ("g", UUID(int=8), 3)
    h.run(h.shard.initialize(other, 1, 0))
    h.run(h.shard.delete(other))
    fresh = h.replayed()
    assert fresh.states == h.shard.states
    assert fresh.leader_epochs == h.shard.leader_epochs and fresh.state_epochs == h.shard.state_epochs
    assert fresh.update_counts == h.shard.update_counts


def test_an_older_leader_epoch_is_fenced():
    h = Harness()
    h.run(h.shard.initialize(KEY, 1, 0))
    assert h.run(h.shard.read(KEY, 5)).error == E.NONE  # records leader epoch 5
    assert h.log[-1].record_type == UPDATE_TYPE and h.log[-1].value.leader_epoch == 5
    assert h.run(h.shard.read(KEY, 4)).error == E.FENCED_LEADER_EPOCH
    before = len(h.log)
    assert h.run(h.shard.write(KEY, 1, 4, 0, [B(0, 0, 2, 1)])) == E.FENCED_LEADER_EPOCH
    assert len(h.log) == before
    assert h.run(h.shard.write(KEY, 1, 5, 0, [B(0, 0, 2, 1)])) == E.NONE
    assert h.replayed().read(KEY, 4).response.error == E.FENCED_LEADER_EPOCH  # survives a reload


def test_an_older_state_epoch_is_fenced():
    h = Harness()
    h.run(h.shard.initialize(KEY, 3, 0))
    assert h.run(h.shard.write(KEY, 2, 0, 0, [B(0, 0, 2, 1)])) == E.FENCED_STATE_EPOCH
    assert h.run(h.shard.initialize(KEY, 2, 0)) == E.FENCED_STATE_EPOCH
    assert h.run(h.shard.write(KEY, 3, 0, 0, [B(0, 0, 2, 1)])) == E.NONE
    assert h.run(h.shard.initialize(KEY, 4, 7)) == E.NONE  # a fresh start: nothing merged
    state = h.run(h.shard.read(KEY, 0))
    assert (state.state_epoch, state.start_offset, state.batches) == (4, 7, ())


def test_delete_writes_a_tombstone():
    h = Harness()
    assert h.run(h.shard.delete(KEY)) == E.NONE and h.log == []  # unknown: nothing written
    h.run(h.shard.initialize(KEY, 1, 0))
    h.run(h.shard.write(KEY, 1, 3, 0, [B(0, 4, 2, 1)]))
    assert h.run(h.shard.delete(KEY)) == E.NONE
    assert h.log[-1].record_type == SNAPSHOT_TYPE and h.log[-1].value is None
    assert KEY not in h.shard.states and KEY not in h.replayed().states
    assert h.run(h.shard.read(KEY, 0)).start_offset == -1


def test_delivery_complete_count_kept_through_updates_snapshots_and_replay():
    """KIP-1226: initialize sets 0 (-1 for no start offset), each write's count is stored
    (tagged field 0 of ShareUpdate/ShareSnapshot), a leader-epoch read keeps it, and the
    summary answers it with the leader epoch."""
    h = Harness(per_snapshot=2)
    assert h.run(h.shard.initialize(KEY, 1, -1)) == E.NONE
    assert h.shard.read_summary(KEY).delivery_complete_count == -1
    assert h.run(h.shard.initialize(KEY, 2, 5)) == E.NONE
    assert h.shard.read_summary(KEY).delivery_complete_count == 0
    for count in (4, 7, 9):  # ShareUpdates, then a ShareSnapshot once per_snapshot is reached
        assert h.run(h.shard.write(KEY, 2, 3, 5, [B(6, 6, 2, 1)], count)) == E.NONE
        assert h.shard.read_summary(KEY).delivery_complete_count == count
    h.run(h.shard.read(KEY, 4))  # a newer leader epoch is recorded with an empty ShareUpdate
    s = h.replayed().read_summary(KEY)
    assert (s.start_offset, s.leader_epoch, s.delivery_complete_count) == (5, 4, 9)
    assert h.run(h.shard.write(KEY, 2, 4, 5, [], -1)) == E.NONE  # a v0 writer: unknown
    assert h.replayed().read_summary(KEY).delivery_complete_count == -1
