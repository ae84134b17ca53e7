"""ShareHeartbeatState (client/share_heartbeat_state.py) with scripted answers."""

import uuid

from odradek.client.share_heartbeat_state import (
    FATAL,
    JOINING,
    LEAVING,
    STABLE,
    UNSUBSCRIBED,
    ShareHeartbeatState,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.share_group_heartbeat_response import (
    Assignment,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)

T1, T2 = uuid.uuid4(), uuid.uuid4()


def answer(epoch=1, interval=5000, assignment=None, error=ErrorCode.NONE, member_id=None):
    assigned = None if assignment is None else Assignment(
        [TopicPartitions(t, sorted(ps)) for t, ps in assignment.items()])
    return ShareGroupHeartbeatResponse(error_code=error, member_id=member_id, member_epoch=epoch,
                                       heartbeat_interval_ms=interval, assignment=assigned)


def joined(assignment=None) -> ShareHeartbeatState:
    state = ShareHeartbeatState("g", rack_id="r1")
    state.subscribe(["a", "b"])
    state.build_request()
    state.on_response(answer(assignment=assignment or {T1: {0, 1}}), 10.0)
    return state


def test_join_at_epoch_zero_with_topics_and_rack_then_only_changes():
    state = ShareHeartbeatState("g", rack_id="r1")
    assert state.next_heartbeat_at() is None
    state.subscribe(["b", "a"])
    assert state.state == JOINING and state.next_heartbeat_at() == 0.0
    first = state.build_request()
    assert (first.group_id, first.member_epoch, first.subscribed_topic_names, first.rack_id) == ("g", 0, ["a", "b"], "r1")
    assert len(first.member_id) == 22 and first.member_id == state.member_id
    assert state.next_heartbeat_at() is None  # one in flight
    assert state.on_response(answer(epoch=3, interval=2000, assignment={T1: {0}}), 10.0) is None
    assert state.state == STABLE and state.assignment == {T1: frozenset({0})}
    assert state.next_heartbeat_at() == 12.0
    second = state.build_request()
    assert (second.member_epoch, second.subscribed_topic_names, second.rack_id) == (3, None, None)
    state.on_response(answer(epoch=3, assignment=None), 12.0)
    assert state.assignment == {T1: frozenset({0})}  # no assignment in the answer: unchanged
    state.subscribe(["a"])
    assert state.next_heartbeat_at() == 0.0
    assert state.build_request().subscribed_topic_names == ["a"]


def test_new_assignment_taken_at_once_and_counted():
    state = joined()
    changes = state.assignment_changes
    state.build_request()
    state.on_response(answer(epoch=2, assignment={T1: {1}, T2: {0}, uuid.uuid4(): set()}), 20.0)
    assert state.assignment == {T1: frozenset({1}), T2: frozenset({0})}
    assert state.assignment_changes == changes + 1
    assert state.member_epoch == 2


def test_fenced_rejoins_at_epoch_zero_with_same_member_id_and_every_field():
    for code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
        state = joined()
        member_id = state.member_id
        state.build_request()
        assert state.on_response(answer(error=code), 20.0) == "fenced"
        assert state.state == JOINING and state.member_epoch == 0 and state.assignment == {}
        request = state.build_request()
        assert (request.member_id, request.member_epoch, request.subscribed_topic_names) == (member_id, 0, ["a", "b"])


def test_coordinator_errors_rediscover_or_back_off_and_resend_every_field():
    state = joined()
    state.build_request()
    assert state.on_response(answer(error=ErrorCode.NOT_COORDINATOR), 20.0) == "rediscover"
    assert state.next_heartbeat_at() == 20.0 and state.state == STABLE
    assert state.build_request().subscribed_topic_names == ["a", "b"]
    state.on_response(answer(error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), 21.0)
    assert state.next_heartbeat_at() == 21.1
    state.build_request()
    state.on_failure(22.0)
    assert state.next_heartbeat_at() == 22.1
    assert state.build_request().subscribed_topic_names == ["a", "b"]


def test_other_errors_are_fatal():
    state = joined()
    state.build_request()
    assert state.on_response(answer(error=ErrorCode.GROUP_AUTHORIZATION_FAILED), 20.0) == "fatal"
    assert state.state == FATAL and state.fatal[0] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert state.next_heartbeat_at() is None and state.assignment == {}


def test_leave_sends_epoch_minus_one_once():
    state = joined()
    state.leave()
    assert state.state == LEAVING and state.assignment == {}
    request = state.build_request()
    assert (request.member_epoch, request.subscribed_topic_names) == (-1, None)
    assert state.on_response(answer(epoch=-1), 30.0) is None
    state.left()
    assert state.state == UNSUBSCRIBED and state.next_heartbeat_at() is None


def test_fenced_answer_after_leaving_does_not_rejoin():
    state = joined()
    state.leave()
    state.build_request()
    assert state.on_response(answer(error=ErrorCode.UNKNOWN_MEMBER_ID), 30.0) is None
    state.left()
    assert state.state == UNSUBSCRIBED
