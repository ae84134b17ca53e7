"""ShareSession (client/share_session.py) and Acknowledgements (client/share_acknowledgements.py)."""

import uuid

from odradek.client.share_acknowledgements import Acknowledgements, AcknowledgeType, TopicIdPartition
from odradek.client.share_session import FetchParams, ShareSession, next_epoch
from odradek.protocol.generated.error_codes import ErrorCode

A, R, J, G = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.GAP
T = uuid.UUID(int=1)
P0, P1, P2 = (TopicIdPartition(T, "t", p) for p in range(3))
PARAMS = FetchParams(max_wait_ms=100, max_records=10)


def acks(**types) -> Acknowledgements:
    return Acknowledgements({int(k[1:]): v for k, v in types.items()})


def named(request) -> dict[int, list]:
    return {p.partition_index: [(b.first_offset, b.last_offset, b.acknowledge_types) for b in p.acknowledgement_batches]
            for t in request.topics for p in t.partitions}


def forgotten(request) -> list[int]:
    return [p for t in request.forgotten_topics_data for p in t.partitions]


def opened(*parts) -> ShareSession:
    session = ShareSession(1, "g", "m")
    session.set_wanted(parts)
    session.next_request(PARAMS, fetch=True)
    session.on_response(ErrorCode.NONE)
    return session


def test_acknowledgement_batches_merge_runs_and_types():
    assert Acknowledgements({5: A, 6: A, 7: R, 9: A}).batches() == [(5, 7, [1, 1, 2]), (9, 9, [1])]
    assert Acknowledgements({3: J, 2: J, 1: J}).batches() == [(1, 3, [3])]
    assert Acknowledgements().batches() == []


def test_epochs_start_at_zero_increment_and_wrap_to_one():
    assert [next_epoch(e) for e in (0, 1, 2**31 - 1, -1)] == [1, 2, 1, -1]
    session = ShareSession(1, "g", "m")
    session.set_wanted({P0, P1})
    sent = session.next_request(PARAMS, fetch=True)
    req = sent.request
    assert (req.share_session_epoch, req.group_id, req.member_id, req.max_records, req.max_wait_ms) == (0, "g", "m", 10, 100)
    assert named(req) == {0: [], 1: []} and forgotten(req) == []
    assert session.next_request(PARAMS, fetch=True) is None  # one in flight
    session.on_response(ErrorCode.NONE)
    assert session.epoch == 1 and session.partitions == {P0, P1}
    second = session.next_request(PARAMS, fetch=True).request
    assert second.share_session_epoch == 1 and named(second) == {}  # nothing changed: nothing named
    session.on_response(ErrorCode.NONE)
    assert session.epoch == 2


def test_partitions_added_and_forgotten_incrementally():
    session = opened(P0, P1)
    session.set_wanted({P1, P2})
    sent = session.next_request(PARAMS, fetch=True)
    assert named(sent.request) == {2: []} and forgotten(sent.request) == [0]
    session.on_response(ErrorCode.NONE)
    assert session.partitions == {P1, P2}
    session.set_wanted(set())
    sent = session.next_request(PARAMS, fetch=False)  # forgetting needs a request even without fetching
    assert sent.kind == "fetch" and sorted(forgotten(sent.request)) == [1, 2]
    session.on_response(ErrorCode.NONE)
    assert session.partitions == set() and session.next_request(PARAMS, fetch=False) is None


def test_acknowledgements_piggy_back_on_the_next_fetch():
    session = opened(P0, P1)
    session.acknowledge(P0, acks(o5=A, o6=R))
    session.acknowledge(P0, acks(o7=J))
    sent = session.next_request(PARAMS, fetch=True)
    assert named(sent.request) == {0: [(5, 7, [1, 2, 3])]}
    assert sent.acks == {P0: acks(o5=A, o6=R, o7=J)} and not session.has_pending


def test_acknowledgements_alone_go_as_share_acknowledge():
    session = opened(P0)
    session.acknowledge(P0, acks(o1=A))
    sent = session.next_request(PARAMS, fetch=False)
    assert sent.kind == "acknowledge" and sent.request.share_session_epoch == 1
    assert [(p.partition_index, [(b.first_offset, b.acknowledge_types) for b in p.acknowledgement_batches])
            for t in sent.request.topics for p in t.partitions] == [(0, [(1, [1])])]
    session.on_response(ErrorCode.NONE)
    assert session.epoch == 2  # ShareAcknowledge moves the epoch on as well


def test_acknowledgements_of_a_partition_being_forgotten_go_first_by_themselves():
    session = opened(P0, P1)
    session.acknowledge(P0, acks(o3=A))
    session.set_wanted({P1})
    first = session.next_request(PARAMS, fetch=True)
    assert first.kind == "acknowledge" and first.acks == {P0: acks(o3=A)}
    session.on_response(ErrorCode.NONE)
    second = session.next_request(PARAMS, fetch=True)
    assert second.kind == "fetch" and forgotten(second.request) == [0] and named(second.request) == {}


def test_no_acknowledgements_at_epoch_zero_they_fail_locally():
    session = ShareSession(1, "g", "m")
    session.set_wanted({P0})
    session.acknowledge(P0, acks(o1=A))
    sent = session.next_request(PARAMS, fetch=True)
    assert named(sent.request) == {0: []} and sent.failed_acks == {P0: acks(o1=A)} and not sent.acks
    session.on_response(ErrorCode.NONE)
    session.acknowledge(P0, acks(o2=A))
    session.on_failure()  # nothing in flight: still resets
    only = session.build_acknowledge()
    assert only.request is None and only.failed_acks == {P0: acks(o2=A)} and session.in_flight is None


def test_lost_session_or_no_answer_resets_to_epoch_zero_with_every_partition():
    for code in (ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                 ErrorCode.SHARE_SESSION_LIMIT_REACHED, None):
        session = opened(P0, P1)
        session.acknowledge(P0, acks(o1=A))
        sent = session.next_request(PARAMS, fetch=True)
        back = session.on_failure() if code is None else session.on_response(code)
        assert back is sent and back.acks == {P0: acks(o1=A)}
        assert session.epoch == 0 and session.partitions == set()
        again = session.next_request(PARAMS, fetch=True).request
        assert again.share_session_epoch == 0 and named(again) == {0: [], 1: []}


def test_other_top_level_errors_keep_the_session():
    session = opened(P0)
    session.next_request(PARAMS, fetch=True)
    session.on_response(ErrorCode.UNKNOWN_TOPIC_ID)
    assert session.epoch == 1 and session.partitions == {P0}


def test_close_sends_final_epoch_with_last_acknowledgements_then_starts_over():
    session = opened(P0)
    session.acknowledge(P0, acks(o4=A))
    sent = session.build_close()
    assert sent.kind == "close" and sent.request.share_session_epoch == -1 and sent.acks == {P0: acks(o4=A)}
    session.on_response(ErrorCode.NONE)
    assert session.epoch == 0 and session.partitions == set()
    fresh = ShareSession(1, "g", "m")
    fresh.acknowledge(P0, acks(o1=A))
    assert fresh.build_close() is None and fresh.take_pending() == {P0: acks(o1=A)}
