"""``FollowerState``: Kafka's ``ReplicaTest`` cases for the caught-up time."""

from odradek.replication.follower_state import UNKNOWN_OFFSET, FollowerState

LAG = 30_000


def test_fetch_at_the_leader_end_is_caught_up_now():
    state = FollowerState().after_fetch(10, 0, fetch_time_ms=1000, leader_end_offset=10)
    assert state.log_end_offset == 10 and state.last_caught_up_time_ms == 1000
    assert state.last_fetch_leader_log_end_offset == 10 and state.last_fetch_time_ms == 1000


def test_fetch_reaching_the_previous_leader_end_is_caught_up_at_the_previous_fetch():
    # The leader was at 10 at the first fetch (time 1000); the follower then fetches from 10
    # while the leader has moved to 15: it was caught up at 1000, not at 2000.
    state = FollowerState().after_fetch(5, 0, 1000, leader_end_offset=10)
    assert state.last_caught_up_time_ms == 0
    state = state.after_fetch(10, 0, 2000, leader_end_offset=15)
    assert state.last_caught_up_time_ms == 1000
    # Behind both: no progress.
    state = state.after_fetch(12, 0, 3000, leader_end_offset=20)
    assert state.last_caught_up_time_ms == 1000


def test_caught_up_time_never_goes_back():
    state = FollowerState().after_fetch(10, 0, 5000, leader_end_offset=10)
    state = state.after_fetch(10, 0, 4000, leader_end_offset=10)  # a late fetch
    assert state.last_caught_up_time_ms == 5000


def test_is_caught_up():
    state = FollowerState().after_fetch(10, 0, 1000, leader_end_offset=10)
    assert state.is_caught_up(10, 10**9, LAG)  # at the leader's end: always
    assert state.is_caught_up(11, 1000 + LAG, LAG)
    assert not state.is_caught_up(11, 1001 + LAG, LAG)


def test_reset_by_a_new_leader():
    old = FollowerState().after_fetch(10, 2, 1000, leader_end_offset=10)
    in_sync = old.reset(5000, 12, is_new_leader=True, in_sync=True)
    assert in_sync.log_end_offset == UNKNOWN_OFFSET and in_sync.last_caught_up_time_ms == 5000
    assert in_sync.last_fetch_leader_log_end_offset == UNKNOWN_OFFSET
    out = old.reset(5000, 12, is_new_leader=True, in_sync=False)
    assert out.last_caught_up_time_ms == 0


def test_reset_by_a_reelected_leader_keeps_offsets():
    old = FollowerState().after_fetch(10, 2, 1000, leader_end_offset=10)
    state = old.reset(5000, 12, is_new_leader=False, in_sync=True)
    assert (state.log_start_offset, state.log_end_offset) == (2, 10)
    assert state.last_fetch_leader_log_end_offset == 12 and state.last_fetch_time_ms == 5000
    state = old.reset(5000, 12, is_new_leader=False, in_sync=False)
    assert state.last_fetch_time_ms == 0 and state.last_caught_up_time_ms == 0
