"""The decisions a broker makes on LeaderAndIsr and StopReplica (``replication/role_change.py``),
and ``Partition.become_follower``."""

from __future__ import annotations

import uuid

from odradek.controller.commands import LeaderAndIsrPartition
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.role_change import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    ControlHeader,
    HeldReplica,
    StopReplicaPartition,
    check_control_request,
    decide_roles,
    decide_stops,
    initial_fetch_offset,
)

ME = 1
TOPIC_ID = uuid.UUID(int=7)


def role(topic="t", partition=0, leader=ME, epoch=1, replicas=(1, 2), isr=(1, 2),
         topic_id=None) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(topic, partition, 1, leader, epoch, tuple(isr), 3, tuple(replicas), topic_id=topic_id)


def nothing_held(_key):
    return None


def held(**epochs):
    """A ``held`` function: topic name -> leader epoch of partition 0 (topic id TOPIC_ID)."""
    return lambda key: HeldReplica(epochs[key[0]], TOPIC_ID) if key[0] in epochs and key[1] == 0 else None


# --- whole-request checks -------------------------------------------------------------------------
def test_an_older_broker_epoch_is_stale_and_checked_before_the_controller_epoch():
    header = ControlHeader(controller_id=2, controller_epoch=1, broker_epoch=10)
    assert check_control_request(header, highest_controller_epoch=5, broker_epoch=11) == ErrorCode.STALE_BROKER_EPOCH


def test_an_unknown_or_newer_broker_epoch_is_accepted():
    assert check_control_request(ControlHeader(2, 5, -1), 5, 11) == ErrorCode.NONE
    assert check_control_request(ControlHeader(2, 5, 12), 5, 11) == ErrorCode.NONE
    assert check_control_request(ControlHeader(2, 5, 11), 5, 11) == ErrorCode.NONE


def test_an_older_controller_epoch_is_stale_the_same_or_newer_is_not():
    assert check_control_request(ControlHeader(2, 4), 5, -1) == ErrorCode.STALE_CONTROLLER_EPOCH
    assert check_control_request(ControlHeader(2, 5), 5, -1) == ErrorCode.NONE
    assert check_control_request(ControlHeader(2, 6), 5, -1) == ErrorCode.NONE


# --- LeaderAndIsr ------------------------------------------------------------------------------------
def test_roles_split_by_leader_for_partitions_not_hosted():
    decision = decide_roles(ME, [role("a"), role("b", leader=2), role("c", leader=-1)], nothing_held)
    assert [s.topic for s in decision.leaders] == ["a"]
    assert [s.topic for s in decision.followers] == ["b", "c"]
    assert decision.errors == {}


def test_a_leader_epoch_not_newer_than_the_held_one_is_ignored():
    decision = decide_roles(ME, [role("old", epoch=3), role("same", epoch=4), role("new", epoch=5)],
                            held(old=4, same=4, new=4))
    assert decision.errors == {("old", 0): ErrorCode.STALE_CONTROLLER_EPOCH,
                               ("same", 0): ErrorCode.STALE_CONTROLLER_EPOCH}
    assert [s.topic for s in decision.leaders] == ["new"]


def test_epoch_zero_is_newer_than_a_partition_not_hosted():
    assert decide_roles(ME, [role(epoch=0)], nothing_held).leaders


def test_a_partition_whose_replicas_leave_this_broker_out_is_unknown():
    decision = decide_roles(ME, [role(leader=2, replicas=(2, 3))], nothing_held)
    assert decision.errors == {("t", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert not decision.leaders and not decision.followers


def test_another_topic_id_than_the_held_log_is_inconsistent():
    other = uuid.UUID(int=8)
    decision = decide_roles(ME, [role("t", epoch=9, topic_id=other), role("u", epoch=9, topic_id=TOPIC_ID)],
                            held(t=1, u=1))
    assert decision.errors == {("t", 0): ErrorCode.INCONSISTENT_TOPIC_ID}
    assert [s.topic for s in decision.leaders] == ["u"]


def test_bad_names_and_partition_numbers_are_refused():
    decision = decide_roles(ME, [role(".."), role("a/b"), role("ok", partition=-1)], nothing_held)
    assert decision.errors == {("..", 0): ErrorCode.INVALID_TOPIC_EXCEPTION,
                               ("a/b", 0): ErrorCode.INVALID_TOPIC_EXCEPTION,
                               ("ok", -1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_a_partition_named_twice_is_decided_once_by_its_first_state():
    decision = decide_roles(ME, [role(leader=2), role(leader=ME)], nothing_held)
    assert [s.leader for s in decision.followers] == [2] and not decision.leaders


# --- StopReplica ------------------------------------------------------------------------------------
def test_stop_sentinels_and_newer_epochs_stop_older_or_same_are_fenced():
    parts = [StopReplicaPartition("a", 0, EPOCH_DURING_DELETE, True), StopReplicaPartition("b", 0, NO_EPOCH, False),
             StopReplicaPartition("c", 0, 5, True), StopReplicaPartition("d", 0, 4, True),
             StopReplicaPartition("e", 0, 3, False)]
    decision = decide_stops(parts, held(a=4, b=4, c=4, d=4, e=4))
    assert decision.stop == {("a", 0): True, ("b", 0): False, ("c", 0): True}
    assert decision.errors == {("d", 0): ErrorCode.FENCED_LEADER_EPOCH, ("e", 0): ErrorCode.FENCED_LEADER_EPOCH}


def test_a_partition_not_hosted_is_stopped_so_a_left_over_log_is_deleted():
    decision = decide_stops([StopReplicaPartition("gone", 3, 0, True)], nothing_held)
    assert decision.stop == {("gone", 3): True} and decision.errors == {}


def test_stop_refuses_bad_names():
    decision = decide_stops([StopReplicaPartition("..", 0, -1, True)], nothing_held)
    assert decision.errors == {("..", 0): ErrorCode.INVALID_TOPIC_EXCEPTION} and not decision.stop


# --- where a follower starts ------------------------------------------------------------------------
def test_a_follower_with_epochs_starts_at_its_log_end_else_at_its_high_watermark():
    assert initial_fetch_offset(log_end_offset=10, high_watermark=7, latest_epoch=2) == 10
    assert initial_fetch_offset(log_end_offset=10, high_watermark=7, latest_epoch=None) == 7


# --- Partition.become_follower -------------------------------------------------------------------------
class _EpochCache:
    latest_epoch = None


class _Log:
    def __init__(self, end: int) -> None:
        self.log_end_offset = end
        self.log_start_offset = 0
        self.leader_epoch_cache = _EpochCache()
        self.assigned = []

    def assign_leader_epoch(self, epoch: int) -> None:
        self.assigned.append(epoch)


def test_become_follower_keeps_the_high_watermark_and_drops_leader_state():
    from odradek.replication.partition import Partition

    part = Partition("t", 0, TOPIC_ID, _Log(10))
    part.become_leader(ME, 1, (1, 2), (1, 2), now_ms=0, zk_version=4)
    assert part.zk_version == 4 and part.followers
    part.high_watermark = 6
    changed = part.become_follower(2, 2, (1, 2), (2,), zk_version=5)
    assert changed
    assert not part.is_leader(ME) and part.leader_id == 2 and part.leader_epoch == 2
    assert part.high_watermark == 6 and part.zk_version == 5
    assert part.followers == {} and part.pending_isr is None and part.leader_epoch_start_offset == -1
    assert part.log.assigned == [1]  # a follower's epochs come from the leader's batches
    assert not part.become_follower(2, 2, (1, 2), (2,), zk_version=5)


def test_each_topic_name_is_checked_once_per_request(monkeypatch):
    """A 10,000-partition LeaderAndIsr names 100 topics: a name is checked once, not once per
    partition; every partition of a bad name is still refused."""
    import odradek.replication.role_change as role_change

    checked = []
    real = role_change.validate_topic_name
    monkeypatch.setattr(role_change, "validate_topic_name", lambda name: (checked.append(name), real(name))[1])
    states = [role(t, p) for t in ("a", "b", "bad/name") for p in range(20)] + [role("a", -1)]
    decision = decide_roles(ME, states, nothing_held)
    assert sorted(checked) == ["a", "b", "bad/name"]
    assert len(decision.leaders) == 40
    assert decision.errors == {**{("bad/name", p): ErrorCode.INVALID_TOPIC_EXCEPTION for p in range(20)},
                               ("a", -1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
