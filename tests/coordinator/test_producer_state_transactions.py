"""Producer state for transactions: open transactions, the first unstable offset, markers
(fencing by producer and coordinator epoch), INVALID_TXN_STATE, coordinator-origin batches,
and snapshots (version 2 round trip, version 1 still read)."""

from __future__ import annotations

import struct

import crc32c

from odradek.coordinator.producer_state import CompletedTxn, ProducerStateManager
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.batch import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader
from odradek.records.control import ABORT, COMMIT, EndTransactionMarker

T0 = 1_700_000_000_000


def batch(pid, epoch, seq, count=1, offset=0, transactional=True):
    return BatchHeader(offset, 100, 0, 2, 0, TRANSACTIONAL_BIT if transactional else 0, count - 1, T0, T0,
                       pid, epoch, seq, count)


def marker_header(pid, epoch, offset):
    return BatchHeader(offset, 100, 0, 2, 0, TRANSACTIONAL_BIT | CONTROL_BIT, 0, T0, T0, pid, epoch, -1, 1)


def marker(kind, coordinator_epoch=0):
    return EndTransactionMarker(kind, coordinator_epoch)


def test_a_transaction_opens_continues_and_completes():
    s = ProducerStateManager()
    assert s.first_unstable_offset() is None
    s.update(batch(1, 0, 0, count=2, offset=0))
    s.update(batch(-1, -1, -1, count=3, offset=2, transactional=False))
    s.update(batch(1, 0, 2, offset=5))
    assert dict(s.ongoing_transactions()) == {1: 0}
    assert s.first_unstable_offset(6) == 0
    done = s.update(marker_header(1, 0, 6), marker=marker(ABORT, 4))
    assert done == CompletedTxn(1, 0, 6, True, 7)
    assert s.entry(1).coordinator_epoch == 4 and s.entry(1).current_txn_first_offset is None
    # Until the high watermark passes the marker, the transaction still holds the LSO.
    assert s.first_unstable_offset(6) == 0
    assert s.first_unstable_offset(7) is None and s.cached_first_unstable_offset is None


def test_the_lso_recorded_for_an_abort_is_the_first_other_open_transaction():
    s = ProducerStateManager()
    s.update(batch(1, 0, 0, offset=0))
    s.update(batch(2, 0, 0, offset=1))
    s.update(batch(3, 0, 0, offset=2))
    assert s.update(marker_header(2, 0, 3), marker=marker(ABORT)).last_stable_offset == 0
    assert s.update(marker_header(1, 0, 4), marker=marker(COMMIT)).is_aborted is False
    assert s.first_unstable_offset(5) == 2


def test_a_marker_without_a_transaction_completes_nothing_but_takes_its_epochs():
    s = ProducerStateManager()
    s.update(batch(1, 0, 0, offset=0, transactional=False))
    assert s.update(marker_header(1, 2, 1), marker=marker(ABORT, 9)) is None
    assert (s.entry(1).epoch, s.entry(1).coordinator_epoch, s.entry(1).batches) == (2, 9, ())


def test_plain_batch_during_an_open_transaction_is_invalid_txn_state():
    s = ProducerStateManager()
    s.update(batch(1, 0, 0, offset=0))
    assert s.check(batch(1, 0, 1, transactional=False)).error == ErrorCode.INVALID_TXN_STATE
    assert s.check(batch(1, 0, 1)).ok
    # Sequence errors come first, as in Kafka.
    assert s.check(batch(1, 0, 5, transactional=False)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    s.update(marker_header(1, 0, 1), marker=marker(COMMIT))
    assert s.check(batch(1, 0, 1, transactional=False)).ok


def test_markers_are_fenced_by_producer_and_coordinator_epoch():
    s = ProducerStateManager()
    assert s.check_marker(1, 0, 0).ok  # unknown producer
    s.update(batch(1, 3, 0, offset=0))
    s.update(marker_header(1, 3, 1), marker=marker(COMMIT, 5))
    assert s.check_marker(1, 2, 5).error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert s.check_marker(1, 3, 4).error == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert s.check_marker(1, 4, 5).ok and s.check_marker(1, 3, 6).ok
    assert s.check(marker_header(1, 2, 2)).error == ErrorCode.INVALID_PRODUCER_EPOCH


def test_coordinator_batches_skip_sequence_checks_but_not_fencing():
    s = ProducerStateManager()
    s.update(batch(1, 2, 0, offset=0))
    offsets_batch = batch(1, 2, -1, offset=1)
    assert s.check(offsets_batch).error == ErrorCode.INVALID_RECORD  # a client may not
    assert s.check(offsets_batch, coordinator=True).ok
    assert s.check(batch(1, 1, -1), coordinator=True).error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert s.check(batch(1, 2, -1, transactional=False), coordinator=True).error == ErrorCode.INVALID_TXN_STATE
    s.update(offsets_batch)
    assert s.entry(1).last_seq == 0  # no sequence cached for it


def test_expire_keeps_producers_with_open_transactions():
    s = ProducerStateManager()
    s.update(batch(1, 0, 0, offset=0))
    s.update(batch(2, 0, 0, offset=1, transactional=False))
    assert s.expire(T0 + 10**9, 1000) == [2]


def test_snapshot_v2_round_trip_keeps_open_transactions_and_coordinator_epochs():
    s = ProducerStateManager()
    s.update(batch(1, 0, 0, offset=0))
    s.update(marker_header(1, 0, 1), marker=marker(COMMIT, 3))
    s.update(batch(1, 0, 1, offset=2))
    s.update(batch(2, 1, 0, offset=3, transactional=False))
    data = s.snapshot()
    assert struct.unpack_from(">h", data)[0] == 2
    loaded = ProducerStateManager.load(data)
    assert dict(loaded.entries()) == dict(s.entries())
    assert dict(loaded.ongoing_transactions()) == {1: 2} and loaded.first_unstable_offset() == 2
    assert loaded.entry(1).coordinator_epoch == 3
    assert loaded.snapshot() == data


def test_version_1_snapshots_still_load():
    entry = struct.pack(">qhqqqB", 7, 1, 4, T0, 3, 1) + struct.pack(">iiqqq", 0, 1, 3, 4, T0)
    body = struct.pack(">qi", 5, 1) + entry
    loaded = ProducerStateManager.load(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)
    e = loaded.entry(7)
    assert (e.epoch, e.current_txn_first_offset, e.coordinator_epoch, e.last_seq) == (1, 3, -1, 1)
    assert loaded.first_unstable_offset() == 3


def test_rebuild_decodes_markers_and_reports_completions():
    s = ProducerStateManager()
    headers = [batch(1, 0, 0, offset=0), marker_header(1, 0, 1), batch(1, 0, 1, offset=2), marker_header(1, 0, 3)]
    kinds = {1: ABORT, 3: COMMIT}
    completed = []
    s.rebuild(headers, marker_of=lambda h: marker(kinds[h.base_offset], 2), on_complete=completed.append)
    assert [(c.first_offset, c.last_offset, c.is_aborted) for c in completed] == [(0, 1, True), (2, 3, False)]
    assert s.entry(1).coordinator_epoch == 2 and not s.ongoing_transactions()
