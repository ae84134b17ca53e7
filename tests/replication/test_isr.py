"""The leader's ISR and high watermark with followers, on a fake clock (``Partition`` with
``replication/isr.py``)."""

import uuid

import pytest

from odradek.replication.follower_state import FollowerState
from odradek.replication.isr import IsrChange, high_watermark_bound, maximal_isr
from odradek.replication.partition import Partition
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from tests.storage.helpers import T0, make_batch, open_log

LAG = 10_000
ME, B, C = 1, 2, 3


@pytest.fixture
def clock():
    return FakeClock(T0)


def leader(tmp_path, clock, isr=(ME, B, C), records: int = 0) -> Partition:
    log = open_log(tmp_path, LogConfig(), clock)
    part = Partition("topic", 0, uuid.uuid4(), log, replica_lag_time_max_ms=LAG, clock=clock)
    if records:
        produce(part, records)
    part.become_leader(ME, 3, (ME, B, C), isr, clock.milliseconds())
    return part


def produce(part: Partition, count: int) -> None:
    part.append_records_as_leader(memoryview(bytearray(make_batch(0, count))), T0)


def fetch(part: Partition, clock, replica: int, offset: int):
    return part.update_follower_fetch_state(replica, offset, 0, clock.milliseconds())


def test_becoming_leader_begins_the_epoch(tmp_path, clock):
    part = leader(tmp_path, clock, records=5)
    assert part.leader_epoch_start_offset == 5
    assert part.log.leader_epoch_cache.entries[-1] == (3, 5)
    assert set(part.followers) == {B, C}


def test_high_watermark_is_the_least_end_offset_in_the_isr(tmp_path, clock):
    part = leader(tmp_path, clock)
    produce(part, 10)
    assert part.high_watermark == 0  # the followers' offsets are unknown yet
    fetch(part, clock, B, 10)
    assert part.high_watermark == 0
    update = fetch(part, clock, C, 4)
    assert update.high_watermark_moved and part.high_watermark == 4
    fetch(part, clock, C, 10)
    assert part.high_watermark == 10


def test_a_lagging_follower_holds_the_high_watermark_until_it_leaves_the_isr(tmp_path, clock):
    part = leader(tmp_path, clock)
    produce(part, 10)
    fetch(part, clock, B, 10)
    fetch(part, clock, C, 2)
    assert part.high_watermark == 2
    clock.advance(LAG)
    fetch(part, clock, B, 10)
    assert part.maybe_shrink_isr(clock.milliseconds()) is None  # exactly the lag: still in
    clock.advance(1)
    change = part.maybe_shrink_isr(clock.milliseconds())
    assert change == IsrChange(3, (ME, B), removed=(C,))
    # A proposal only: nothing is used before the controller's state holds it.
    assert part.isr == (ME, B, C) and part.high_watermark == 2
    assert part.maybe_shrink_isr(clock.milliseconds()) is None  # one change at a time
    assert part.commit_isr(change.isr)
    assert part.isr == (ME, B) and part.high_watermark == 10 and part.pending_isr is None


def test_a_stuck_follower_leaves_the_isr(tmp_path, clock):
    part = leader(tmp_path, clock)
    fetch(part, clock, B, 0)
    fetch(part, clock, C, 0)
    clock.advance(LAG + 1)
    assert part.maybe_shrink_isr(clock.milliseconds()) is None  # nothing to fetch: caught up
    produce(part, 3)
    fetch(part, clock, B, 3)
    change = part.maybe_shrink_isr(clock.milliseconds())
    assert change.removed == (C,)


def test_a_follower_at_the_leader_end_never_leaves(tmp_path, clock):
    part = leader(tmp_path, clock)
    produce(part, 3)
    fetch(part, clock, B, 3)
    fetch(part, clock, C, 3)
    clock.advance(10 * LAG)
    assert part.maybe_shrink_isr(clock.milliseconds()) is None


def test_a_follower_fetching_behind_a_steady_stream_stays(tmp_path, clock):
    # Each fetch reaches where the leader was at the previous one: caught up then.
    part = leader(tmp_path, clock)
    fetch(part, clock, C, 0)
    for i in range(1, 30):
        produce(part, 1)
        fetch(part, clock, B, i - 1)
        fetch(part, clock, C, i - 1)
        clock.advance(LAG // 3)
        assert part.maybe_shrink_isr(clock.milliseconds()) is None


def test_expand_when_caught_up_to_the_high_watermark_and_the_epoch(tmp_path, clock):
    part = leader(tmp_path, clock, isr=(ME, B), records=5)
    produce(part, 5)
    fetch(part, clock, B, 10)
    assert part.high_watermark == 10
    assert fetch(part, clock, C, 4).isr_change is None  # below the epoch's start (5)
    assert fetch(part, clock, C, 8).isr_change is None  # below the high watermark
    update = fetch(part, clock, C, 10)
    assert update.isr_change == IsrChange(3, (ME, B, C), added=(C,))
    assert part.isr == (ME, B) and part.pending_isr == update.isr_change
    # While pending, the high watermark already waits for C (the maximal ISR).
    produce(part, 5)
    fetch(part, clock, B, 15)
    assert part.high_watermark == 10
    part.commit_isr(update.isr_change.isr)
    assert part.isr == (ME, B, C)


def test_a_failed_proposal_is_abandoned_and_made_again(tmp_path, clock):
    part = leader(tmp_path, clock, isr=(ME, B))
    change = fetch(part, clock, C, 0).isr_change
    assert change is not None
    part.abandon_isr_change()
    assert part.isr == (ME, B) and part.pending_isr is None
    assert part.maybe_expand_isr(C) == change
    assert part.maybe_expand_isr(C) is None  # pending again
    part.abandon_isr_change()
    assert part.maybe_expand_isr(C, eligible=False) is None  # not a live broker


def test_a_caught_up_follower_outside_the_isr_holds_the_high_watermark(tmp_path, clock):
    # ISR = the leader alone; C caught up recently: the high watermark waits for it rather
    # than run ahead with every produce (so that C can reach it and join).
    # (Each expansion it proposes is refused here, so that it stays outside.)
    part = leader(tmp_path, clock, isr=(ME,))
    produce(part, 10)
    fetch(part, clock, C, 10)
    part.abandon_isr_change()
    produce(part, 5)
    fetch(part, clock, C, 12)
    part.abandon_isr_change()
    part.maybe_advance_high_watermark(clock.milliseconds())
    assert part.high_watermark == 12
    clock.advance(LAG + 1)
    part.maybe_advance_high_watermark(clock.milliseconds())
    assert part.high_watermark == 15  # C fell behind: not waited for any more


def test_the_high_watermark_never_goes_back(tmp_path, clock):
    part = leader(tmp_path, clock, isr=(ME, B))
    produce(part, 10)
    fetch(part, clock, B, 10)
    assert part.high_watermark == 10
    part.commit_isr((ME, B, C))  # a slower follower joins (by the controller)
    assert part.high_watermark == 10


def test_unknown_replicas_are_refused(tmp_path, clock):
    part = leader(tmp_path, clock)
    assert fetch(part, clock, 99, 0) is None


def test_single_replica_partitions_need_no_clock(tmp_path, clock):
    log = open_log(tmp_path, LogConfig(), clock)
    part = Partition("topic", 0, uuid.uuid4(), log, leader_id=ME, isr=(ME,))
    produce(part, 3)
    assert part.high_watermark == 3


def test_reelection_keeps_what_followers_told(tmp_path, clock):
    part = leader(tmp_path, clock)
    produce(part, 5)
    fetch(part, clock, B, 5)
    fetch(part, clock, C, 5)
    part.become_leader(ME, 4, (ME, B, C), (ME, B, C), clock.milliseconds())
    assert part.followers[B].log_end_offset == 5
    assert part.log.leader_epoch_cache.entries[-1] == (4, 5)


def test_pure_rules():
    followers = {B: FollowerState(log_end_offset=7, last_caught_up_time_ms=0),
                 C: FollowerState(log_end_offset=3, last_caught_up_time_ms=0)}
    assert high_watermark_bound(ME, 10, followers, (ME, B, C), 10**6, LAG) == 3
    assert high_watermark_bound(ME, 10, followers, (ME, B), 10**6, LAG) == 7
    assert high_watermark_bound(ME, 10, followers, (ME,), 10**6, LAG) == 10
    assert high_watermark_bound(ME, 10, {}, (ME, B), 10**6, LAG) == -1
    assert maximal_isr((ME, B), IsrChange(0, (ME, B, C), added=(C,))) == (ME, B, C)
    assert maximal_isr((ME, B, C), IsrChange(0, (ME, B), removed=(C,))) == (ME, B, C)
