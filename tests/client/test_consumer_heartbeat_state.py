"""The KIP-848 member's heartbeat state machine (client/consumer_heartbeat_state.py) as a pure
unit: scripted ConsumerGroupHeartbeat answers, the requests it builds in reply."""

from __future__ import annotations

import base64
import uuid

import pytest

from odradek.client.consumer_heartbeat_state import (
    ACKNOWLEDGING,
    FATAL,
    FENCED,
    JOINING,
    RECONCILING,
    STABLE,
    STALE,
    UNSUBSCRIBED,
    ConsumerHeartbeatState,
    Subscription,
    generate_member_id,
)
from odradek.protocol.generated.consumer_group_heartbeat_response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from odradek.protocol.generated.error_codes import ErrorCode

A, B = uuid.uuid4(), uuid.uuid4()


def answer(epoch: int, assignment: dict | None = None, *, member_id: str | None = None, interval: int = 5000,
           code: int = 0):
    if code:
        return ConsumerGroupHeartbeatResponse(error_code=code, error_message="scripted")
    return ConsumerGroupHeartbeatResponse(
        member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=interval,
        assignment=None if assignment is None else Assignment(
            [TopicPartitions(t, sorted(ps)) for t, ps in assignment.items()]))


def joined(topics=("t",), **kw) -> ConsumerHeartbeatState:
    state = ConsumerHeartbeatState("g", rebalance_timeout_ms=300_000, **kw)
    state.subscribe(Subscription(topics=frozenset(topics)))
    return state


def owned_of(request) -> dict | None:
    if request.topic_partitions is None:
        return None
    return {tp.topic_id: tp.partitions for tp in request.topic_partitions}


def reconcile(state: ConsumerHeartbeatState) -> dict:
    joins, target = state.pending_reconciliation()
    assert state.reconciled(joins, target)
    return target


def test_member_id_is_a_url_safe_base64_uuid_of_its_own():
    ids = {generate_member_id() for _ in range(200)}
    assert len(ids) == 200
    for member_id in ids:
        assert len(member_id) == 22 and not member_id.startswith("-")
        assert len(base64.urlsafe_b64decode(member_id + "==")) == 16


def test_join_sends_every_field_with_epoch_0_and_its_own_member_id():
    state = joined(("b", "a"), server_assignor="range")
    assert state.state == JOINING and state.next_heartbeat_at() == 0.0
    request = state.build_request(0.0, 1)
    assert request.member_id == state.member_id and len(request.member_id) == 22
    assert request.member_epoch == 0 and request.group_id == "g"
    assert request.subscribed_topic_names == ["a", "b"] and request.subscribed_topic_regex is None
    assert request.rebalance_timeout_ms == 300_000 and request.server_assignor == "range"
    assert request.topic_partitions == [] and request.instance_id is None
    assert state.next_heartbeat_at() is None  # one request in flight at a time


def test_assignment_is_reconciled_then_acknowledged_at_once_then_only_changes_are_sent():
    state = joined()
    member_id = state.member_id
    state.build_request(0.0, 1)
    assert state.on_response(answer(1, {A: [0, 1]}, member_id=member_id), 10.0) is None
    assert (state.state, state.member_epoch, state.next_heartbeat_at()) == (RECONCILING, 1, 15.0)
    # While reconciling, a heartbeat carries nothing that did not change.
    request = state.build_request(15.0, 1)
    assert (request.member_epoch, request.rebalance_timeout_ms, request.subscribed_topic_names,
            request.server_assignor, request.topic_partitions) == (1, -1, None, None, None)
    state.on_response(answer(1), 15.0)
    assert reconcile(state) == {A: frozenset({0, 1})}
    assert state.state == ACKNOWLEDGING and state.next_heartbeat_at() == 0.0  # acknowledged at once
    ack = state.build_request(16.0, 1)
    assert owned_of(ack) == {A: [0, 1]} and ack.subscribed_topic_names is None
    assert state.state == STABLE
    state.on_response(answer(1), 16.0)
    assert owned_of(state.build_request(21.0, 1)) is None


def test_a_new_target_leaves_the_revocation_to_the_edge_and_acknowledges_what_is_owned():
    state = joined()
    state.build_request(0.0, 1)
    state.on_response(answer(1, {A: [0, 1]}), 0.0)
    reconcile(state)
    state.build_request(0.0, 1)
    state.on_response(answer(2, {A: [1], B: [0]}), 1.0)
    assert state.state == RECONCILING
    assert state.pending_reconciliation()[1] == {A: frozenset({1}), B: frozenset({0})}
    assert state.owned == {A: frozenset({0, 1})}  # nothing is dropped until the edge says so
    reconcile(state)
    assert owned_of(state.build_request(1.0, 1)) == {A: [1], B: [0]}


def test_a_newer_target_during_a_reconciliation_is_reconciled_after_the_acknowledgement():
    state = joined()
    state.build_request(0.0, 1)
    state.on_response(answer(1, {A: [0, 1]}), 0.0)
    joins, target = state.pending_reconciliation()
    state.build_request(5.0, 1)
    state.on_response(answer(2, {A: [0]}), 5.0)  # arrives while the edge runs callbacks
    assert state.reconciled(joins, target)
    assert owned_of(state.build_request(6.0, 1)) == {A: [0, 1]}
    assert state.state == RECONCILING and state.pending_reconciliation()[1] == {A: frozenset({0})}


def test_an_assignment_equal_to_the_owned_partitions_needs_no_reconciliation():
    state = joined()
    state.build_request(0.0, 1)
    state.on_response(answer(1, {}), 0.0)
    assert state.state == STABLE and state.pending_reconciliation() is None


@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_fencing_loses_everything_and_rejoins_at_epoch_0_with_the_same_member_id(code):
    state = joined()
    member_id = state.member_id
    state.build_request(0.0, 1)
    state.on_response(answer(3, {A: [0]}), 0.0)
    joins, target = state.pending_reconciliation()
    state.build_request(1.0, 1)
    assert state.on_response(answer(0, code=code), 2.0) == "fenced"
    assert (state.state, state.member_epoch, state.next_heartbeat_at()) == (FENCED, 0, None)
    assert not state.reconciled(joins, target)  # the reconciliation under way is void
    state.release()  # the edge called on_partitions_lost
    assert state.state == JOINING and state.owned == {}
    rejoin = state.build_request(2.0, 1)
    assert (rejoin.member_id, rejoin.member_epoch, rejoin.topic_partitions) == (member_id, 0, [])
    assert rejoin.subscribed_topic_names == ["t"] and rejoin.rebalance_timeout_ms == 300_000


def test_a_stale_reconciliation_from_before_a_rejoin_is_refused_even_in_a_later_reconciling_state():
    state = joined()
    state.build_request(0.0, 1)
    state.on_response(answer(1, {A: [0]}), 0.0)
    joins, target = state.pending_reconciliation()
    state.build_request(0.0, 1)
    state.on_response(answer(0, code=ErrorCode.FENCED_MEMBER_EPOCH), 0.0)
    state.release()
    state.build_request(0.0, 1)
    state.on_response(answer(5, {A: [1]}), 0.0)
    assert state.state == RECONCILING
    assert not state.reconciled(joins, target)
    assert state.owned == {}


@pytest.mark.parametrize("instance_id, epoch", [(None, -1), ("static-1", -2)])
def test_leave_sends_epoch_minus_1_or_minus_2_for_a_static_member(instance_id, epoch):
    state = joined(instance_id=instance_id)
    state.build_request(0.0, 1)
    state.on_response(answer(1, {A: [0]}), 0.0)
    reconcile(state)
    state.leave()
    request = state.build_request(1.0, 1)
    assert (request.member_epoch, request.instance_id) == (epoch, instance_id)
    assert request.subscribed_topic_names is None and request.topic_partitions is None
    assert state.state == UNSUBSCRIBED and state.next_heartbeat_at() is None
    assert state.on_response(answer(epoch), 1.0) is None and state.state == UNSUBSCRIBED


def test_a_member_not_in_the_group_sends_no_leave():
    state = ConsumerHeartbeatState("g", rebalance_timeout_ms=1000)
    state.leave()
    assert state.state == UNSUBSCRIBED and state.next_heartbeat_at() is None


def test_after_a_failed_attempt_or_error_the_next_request_is_full():
    state = joined(server_assignor="uniform")
    state.build_request(0.0, 1)
    state.on_response(answer(1, {A: [0]}), 0.0)
    reconcile(state)
    state.build_request(0.0, 1)
    state.on_response(answer(1), 0.0)
    state.build_request(5.0, 1)
    state.on_failure(5.0)  # connection lost
    assert state.next_heartbeat_at() == 5.0 + state.retry_backoff
    full = state.build_request(6.0, 1)
    assert (full.member_epoch, full.subscribed_topic_names, full.rebalance_timeout_ms, full.server_assignor,
            owned_of(full)) == (1, ["t"], 300_000, "uniform", {A: [0]})
    assert state.on_response(answer(0, code=ErrorCode.NOT_COORDINATOR), 7.0) == "rediscover"
    assert state.next_heartbeat_at() == 7.0  # at once, to the coordinator found again
    assert owned_of(state.build_request(7.0, 1)) == {A: [0]}
    assert state.on_response(answer(0, code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), 8.0) is None
    assert state.next_heartbeat_at() == 8.0 + state.retry_backoff and state.state == STABLE


@pytest.mark.parametrize("code", [ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.UNSUPPORTED_ASSIGNOR,
                                  ErrorCode.INVALID_REQUEST, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                  ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.FENCED_INSTANCE_ID])
def test_other_errors_are_fatal(code):
    state = joined()
    state.build_request(0.0, 1)
    assert state.on_response(answer(0, code=code), 0.0) == "fatal"
    assert state.state == FATAL and state.fatal == (code, "scripted") and state.next_heartbeat_at() is None


def test_a_regex_goes_to_the_coordinator_and_switching_clears_the_other_kind():
    state = ConsumerHeartbeatState("g", rebalance_timeout_ms=1000)
    state.subscribe(Subscription(regex="t.*"))
    request = state.build_request(0.0, 1)
    assert (request.subscribed_topic_regex, request.subscribed_topic_names) == ("t.*", None)
    state.on_response(answer(1, {}), 0.0)
    state.subscribe(Subscription(topics=frozenset({"x"})))
    request = state.build_request(0.0, 1)
    assert (request.subscribed_topic_regex, request.subscribed_topic_names) == ("", ["x"])
    state.on_response(answer(1), 0.0)
    state.subscribe(Subscription(regex="y.*"))
    request = state.build_request(0.0, 1)
    assert (request.subscribed_topic_regex, request.subscribed_topic_names) == ("y.*", [])


def test_an_expired_poll_timer_leaves_and_stays_stale_until_polled():
    state = joined()
    state.build_request(0.0, 1)
    state.on_response(answer(1, {A: [0]}), 0.0)
    reconcile(state)
    state.build_request(0.0, 1)
    state.on_response(answer(1), 0.0)
    state.poll_timer_expired()
    leave = state.build_request(1.0, 1)
    assert leave.member_epoch == -1
    assert state.state == STALE and state.next_heartbeat_at() is None
    assert state.owned == {A: frozenset({0})}  # until the edge releases them (as lost)
    state.release()
    state.rejoin()
    request = state.build_request(2.0, 1)
    assert (state.state, request.member_epoch, request.topic_partitions) == (JOINING, 0, [])
