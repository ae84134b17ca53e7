"""SharePartition flows: acquire, acknowledge, release, reject, lock expiry, limits, trimming."""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.share.record_state import RecordState
from odradek.server.share.share_types import AcquiredRecords
from tests.server.share.harness import LOCK_MS, Batch, Harness, ack, log

A, R, ACK, ARC = (RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED,
                  RecordState.ARCHIVED)
ACCEPT, RELEASE, REJECT, RENEW, GAP = 1, 2, 3, 4, 0


def test_acquire_new_records_then_accept_moves_the_start_offset():
    h = Harness()
    assert h.sp.acquire("m1", log(0, 9, size=5), 100) == [AcquiredRecords(0, 9, 1)]
    h.sp.check()
    assert h.sp.start_offset == 0 and h.sp.end_offset == 9
    assert h.sp.next_fetch_offset() == 10
    assert h.acknowledge("m1", ack(0, 9, ACCEPT)) is ErrorCode.NONE
    h.sp.check()
    assert h.sp.start_offset == 10 and h.sp.in_flight() == []
    # The write carried the start offset of before the acknowledgement; a later one moves it.
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in h.stored_batches] == \
        [(0, 9, 2)]
    assert h.stored_start == 0


def test_partial_acknowledgement_splits_the_batch_per_offset():
    h = Harness()
    h.sp.acquire("m1", log(0, 9, size=10), 100)
    assert h.acknowledge("m1", ack(0, 3, ACCEPT), ack(5, 5, REJECT)) is ErrorCode.NONE
    h.sp.check()
    assert h.sp.start_offset == 4
    assert h.states(4, 6) == [(R, 1), (ARC, 1), (R, 1)]
    # 5 is archived: a range over it is refused whole.
    assert h.acknowledge("m1", ack(4, 9, RELEASE, RELEASE, ACCEPT, ACCEPT, ACCEPT, ACCEPT)) \
        is ErrorCode.INVALID_RECORD_STATE
    assert h.acknowledge("m1", ack(4, 4, RELEASE), ack(6, 9, RELEASE, ACCEPT, ACCEPT, ACCEPT)) \
        is ErrorCode.NONE
    assert h.sp.start_offset == 4 and h.sp.next_fetch_offset() == 4
    # Redelivered with delivery count 2; the rest are done.
    assert h.sp.acquire("m2", log(4, 9), 100) == [AcquiredRecords(4, 4, 2), AcquiredRecords(6, 6, 2)]
    assert h.acknowledge("m2", ack(4, 4, ACCEPT), ack(6, 6, ACCEPT)) is ErrorCode.NONE
    assert h.sp.start_offset == 10


def test_records_acquired_by_one_member_are_not_given_to_another():
    h = Harness()
    h.sp.acquire("m1", log(0, 4), 100)
    assert h.sp.acquire("m2", log(0, 4), 100) == []
    assert h.sp.acquire("m2", log(0, 7), 100) == [AcquiredRecords(5, 7, 1)]
    assert h.acknowledge("m2", ack(0, 0, ACCEPT)) is ErrorCode.INVALID_RECORD_STATE
    # All or nothing: the valid part of a refused request changed nothing.
    assert h.acknowledge("m2", ack(5, 5, ACCEPT), ack(8, 8, ACCEPT)) is ErrorCode.INVALID_RECORD_STATE
    assert h.states(5, 5) == [(R, 1)]
    h.sp.check()


def test_acknowledging_outside_the_window_or_malformed():
    h = Harness()
    h.sp.acquire("m1", log(0, 4), 100)
    assert h.acknowledge("m1", ack(3, 6, ACCEPT)) is ErrorCode.INVALID_RECORD_STATE
    assert h.acknowledge("m1", ack(3, 2, ACCEPT)) is ErrorCode.INVALID_REQUEST
    assert h.acknowledge("m1", ack(0, 2, ACCEPT, ACCEPT)) is ErrorCode.INVALID_REQUEST
    assert h.acknowledge("m1", ack(0, 0, 9)) is ErrorCode.INVALID_REQUEST
    assert h.acknowledge("m1", ack(0, 2, ACCEPT), ack(2, 3, ACCEPT)) is ErrorCode.INVALID_REQUEST
    assert h.states(0, 4) == [(R, 1)] * 5


def test_lock_expiry_redelivers_with_delivery_count_two():
    h = Harness()
    h.sp.acquire("m1", log(0, 2), 100)
    assert h.advance(LOCK_MS - 1) == []
    assert h.states(0, 2) == [(R, 1)] * 3
    [update] = h.advance(1)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in update.batches] == [(0, 2, 0, 1)]
    assert h.states(0, 2) == [(A, 1)] * 3
    assert h.sp.acquire("m2", log(0, 2), 100) == [AcquiredRecords(0, 2, 2)]
    # The old member can no longer acknowledge them.
    assert h.acknowledge("m1", ack(0, 2, ACCEPT)) is ErrorCode.INVALID_RECORD_STATE
    assert h.acknowledge("m2", ack(0, 2, ACCEPT)) is ErrorCode.NONE


def test_acknowledged_records_are_not_released_by_their_old_lock():
    h = Harness()
    h.sp.acquire("m1", log(0, 3), 100)
    h.acknowledge("m1", ack(0, 1, ACCEPT))
    h.advance(LOCK_MS)
    assert h.sp.start_offset == 2 and h.states(2, 3) == [(A, 1)] * 2


def test_delivery_count_limit_archives_a_record_released_too_often():
    h = Harness(delivery_count_limit=3)
    for delivery in (1, 2):
        assert h.sp.acquire("m1", log(0, 0), 10) == [AcquiredRecords(0, 0, delivery)]
        h.acknowledge("m1", ack(0, 0, RELEASE))
        assert h.states(0, 0) == [(A, delivery)]
    assert h.sp.acquire("m1", log(0, 1), 10) == [AcquiredRecords(0, 0, 3), AcquiredRecords(1, 1, 1)]
    h.acknowledge("m1", ack(0, 0, RELEASE))
    assert h.sp.start_offset == 1  # archived, then trimmed
    assert h.sp.acquire("m1", log(0, 1), 10) == []


def test_delivery_count_limit_on_lock_expiry():
    h = Harness(delivery_count_limit=2)
    h.sp.acquire("m1", log(0, 0), 10)
    h.advance(LOCK_MS)
    h.sp.acquire("m1", log(0, 0), 10)
    [update] = h.advance(LOCK_MS)
    assert [(b.delivery_state, b.delivery_count) for b in update.batches] == [(4, 2)]
    assert h.sp.start_offset == 1


def test_reject_archives_forever():
    h = Harness()
    h.sp.acquire("m1", log(0, 3), 10)
    h.acknowledge("m1", ack(1, 1, REJECT), ack(3, 3, GAP))
    h.acknowledge("m1", ack(0, 0, RELEASE), ack(2, 2, RELEASE))
    assert h.sp.acquire("m2", log(0, 3), 10) == [AcquiredRecords(0, 0, 2), AcquiredRecords(2, 2, 2)]
    h.advance(LOCK_MS)
    for delivery in (3, 4, 5):
        assert h.sp.acquire("m2", log(0, 3), 10) == \
            [AcquiredRecords(0, 0, delivery), AcquiredRecords(2, 2, delivery)]
        assert h.states(1, 1) == [(ARC, 1)] and h.states(3, 3) == [(ARC, 1)]
        h.advance(LOCK_MS)
    assert h.sp.start_offset == 4  # 0 and 2 reached the limit of 5 deliveries


def test_release_acquired_records_of_a_member_that_left():
    h = Harness()
    h.sp.acquire("m1", log(0, 4), 100)
    h.sp.acquire("m2", log(0, 9), 100)
    h.acknowledge("m1", ack(0, 0, ACCEPT))
    assert h.write(h.sp.release_acquired_records("m1")) is ErrorCode.NONE
    assert h.states(1, 9) == [(A, 1)] * 4 + [(R, 1)] * 5
    assert h.sp.next_fetch_offset() == 1
    assert h.sp.acquire("m3", log(1, 9), 100) == [AcquiredRecords(1, 4, 2)]
    h.sp.check()


def test_renew_extends_the_lock():
    h = Harness()
    h.sp.acquire("m1", log(0, 3), 100)
    h.advance(LOCK_MS - 10)
    update = h.sp.acknowledge("m1", [ack(0, 1, RENEW)])
    assert not update.needs_write
    assert h.write(update) is ErrorCode.NONE
    h.advance(10)  # the first lock expires: only 2-3 go back
    assert h.states(0, 3) == [(R, 1), (R, 1), (A, 1), (A, 1)]
    h.advance(LOCK_MS)
    assert h.states(0, 1) == [(A, 1)] * 2


def test_max_record_locks_bounds_the_window():
    h = Harness(max_record_locks=10)
    assert h.sp.acquire("m1", log(0, 99, size=4), 100) == [AcquiredRecords(0, 9, 1)]
    assert not h.sp.can_acquire_records()
    assert h.sp.acquire("m2", log(10, 99, size=4), 100) == []
    h.acknowledge("m1", ack(0, 4, ACCEPT))
    assert h.sp.can_acquire_records()
    assert h.sp.acquire("m2", log(10, 99, size=4), 100) == [AcquiredRecords(10, 14, 1)]
    h.acknowledge("m1", ack(5, 9, RELEASE))
    assert h.sp.acquire("m2", log(5, 99, size=4), 100) == [AcquiredRecords(5, 9, 2)]


def test_max_records_is_a_soft_limit_at_log_batch_boundaries():
    h = Harness()
    assert h.sp.acquire("m1", log(0, 99, size=4), 5) == [AcquiredRecords(0, 7, 1)]
    h.sp.acquire("m1", log(8, 99, size=4), 1)
    assert h.sp.end_offset == 11
    h.acknowledge("m1", ack(0, 11, RELEASE))
    # Cached: offsets one by one beyond the limit of a partially read batch.
    assert h.sp.acquire("m2", log(0, 11, size=12), 3) == [AcquiredRecords(0, 7, 2)]


def test_fetched_records_beyond_a_hole_archive_the_hole():
    h = Harness()
    h.sp.acquire("m1", [Batch(5, 9)], 100)
    h.sp.check()
    assert h.sp.start_offset == 5 and h.sp.in_flight()[0][:3] == (5, 9, R)


def test_log_start_offset_moving_past_the_window():
    h = Harness()
    h.sp.acquire("m1", log(0, 9), 100)
    h.sp.update_log_start_offset(6)
    h.sp.check()
    assert h.sp.start_offset == 6 and h.states(6, 6) == [(R, 1)]


def test_read_committed_archives_aborted_transactions():
    h = Harness()
    batches = [Batch(0, 1, producer_id=7, is_transactional=True),
               Batch(2, 3, producer_id=8, is_transactional=True),
               Batch(4, 5, producer_id=7, is_transactional=True),
               Batch(6, 6, producer_id=7, is_transactional=True, is_control=True),  # abort
               Batch(7, 7, producer_id=8, is_transactional=True, is_control=True),  # commit
               Batch(8, 9, producer_id=7, is_transactional=True)]
    got = h.sp.acquire("m1", batches, 100, aborted_transactions=[(7, 0)])
    assert got == [AcquiredRecords(2, 3, 1), AcquiredRecords(6, 9, 1)]
    assert h.sp.start_offset == 2  # 0-1 archived, then trimmed
    assert h.states(4, 5) == [(ARC, 1)] * 2
    h.sp.check()


def test_read_committed_on_redelivery_of_a_cached_batch():
    h = Harness()
    h.sp.acquire("m1", log(0, 5, size=6), 100)
    h.acknowledge("m1", ack(0, 5, RELEASE))
    batches = [Batch(0, 2, producer_id=7, is_transactional=True),
               Batch(3, 3, producer_id=7, is_transactional=True, is_control=True),
               Batch(4, 5)]
    assert h.sp.acquire("m1", batches, 100, aborted_transactions=[(7, 0)]) == \
        [AcquiredRecords(3, 5, 2)]
    assert h.sp.start_offset == 3


def test_failed_write_rolls_back_and_nothing_is_answered_before_it():
    h = Harness()
    h.sp.acquire("m1", log(0, 3), 100)
    update = h.sp.acknowledge("m1", [ack(0, 3, ACCEPT)])
    # Pending: shown acknowledged, but the start offset waits for the write.
    assert h.sp.start_offset == 0 and h.sp.acquire("m2", log(0, 3), 100) == []
    assert h.write(update, ErrorCode.COORDINATOR_NOT_AVAILABLE) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.states(0, 3) == [(R, 1)] * 4
    assert h.acknowledge("m1", ack(0, 3, ACCEPT)) is ErrorCode.NONE
    assert h.sp.start_offset == 4


def test_rollback_after_the_lock_expired_releases_at_once():
    h = Harness()
    h.sp.acquire("m1", log(0, 3), 100)
    update = h.sp.acknowledge("m1", [ack(0, 3, ACCEPT)])
    assert h.advance(LOCK_MS) == []  # pending records are not released by the lock
    h.write(update, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert h.states(0, 0) == [(R, 1)]
    h.advance(0)
    assert h.states(0, 3) == [(A, 1)] * 4
    h.sp.check()


def test_fencing_on_write():
    h = Harness()
    h.sp.acquire("m1", log(0, 3), 100)
    assert h.acknowledge("m1", ack(0, 0, ACCEPT), error=ErrorCode.FENCED_STATE_EPOCH) \
        is ErrorCode.FENCED_STATE_EPOCH
    assert h.sp.error_code() is ErrorCode.FENCED_STATE_EPOCH
    assert h.sp.acquire("m1", log(0, 9), 100) == []
    assert h.acknowledge("m1", ack(1, 1, ACCEPT)) is ErrorCode.FENCED_STATE_EPOCH
    assert len(h.timers) == 0  # its locks are gone with it
