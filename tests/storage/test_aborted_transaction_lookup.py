"""The aborted-transaction lookup a read_committed fetch makes (``transaction_index.collect``
and ``collect_aborted``; Kafka's ``TransactionIndex.collectAbortedTxns`` and
``collectAbortedTransactions``), at its boundaries: a transaction is listed for the range
``[fetch_offset, upper_bound)`` when its marker is at or after ``fetch_offset`` and its data
begins before ``upper_bound``; the search starts at the segment holding ``fetch_offset``
and stops at the first entry whose LSO reached ``upper_bound``.
(``tests/storage/test_transaction_index.py`` has the file's own life.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from odradek.storage.config import LogConfig
from odradek.storage.transaction_index import AbortedTxn, TransactionIndex, collect_aborted
from tests.storage.helpers import append, open_log


def _index(tmp_path, name: str, *entries: AbortedTxn) -> TransactionIndex:
    path = str(tmp_path / name)
    idx = TransactionIndex(lambda: path)
    for e in entries:
        idx.append(e)
    return idx


A = AbortedTxn(1, 0, 4, 5)     # data from 0, marker at 4, nothing else open then
B = AbortedTxn(2, 10, 14, 15)  # data from 10, marker at 14


@pytest.mark.parametrize("fetch_offset, upper_bound, expected", [
    (0, 100, [A, B]),
    (4, 100, [A, B]),   # fetch offset at A's marker: A still overlaps
    (5, 100, [B]),      # fetch offset just past A's marker: A ended before
    (14, 100, [B]),
    (15, 100, []),
    (0, 10, [A]),       # upper bound at B's first offset: exclusive
    (0, 11, [A, B]),    # B's first offset just below it
    (0, 1, [A]),        # A's first offset just below it
    (0, 0, []),
    (5, 10, []),        # between the two transactions
])
def test_collect_lists_transactions_overlapping_the_range(tmp_path, fetch_offset, upper_bound, expected):
    idx = _index(tmp_path, "0.txnindex", A, B)
    assert idx.collect(fetch_offset, upper_bound).aborted == expected


@pytest.mark.parametrize("upper_bound, expected, complete", [
    (4, [A], True),
    (5, [A], True),       # A's LSO reaches the bound: the search may stop at A
    (6, [A], True),       # B's LSO (15) reaches it; B's data begins past it
    (11, [A, B], True),
    (15, [A, B], True),   # B's LSO at the bound
    (16, [A, B], False),  # no entry reaches it: a later segment may hold more
])
def test_collect_is_complete_once_an_entrys_lso_reaches_the_upper_bound(tmp_path, upper_bound, expected, complete):
    result = _index(tmp_path, "0.txnindex", A, B).collect(0, upper_bound)
    assert (result.aborted, result.complete) == (expected, complete)


class CountingIndex(TransactionIndex):
    """A ``TransactionIndex`` that counts the searches made in it."""

    def __init__(self, path: str) -> None:
        super().__init__(lambda: path)
        self.searches = 0

    def collect(self, fetch_offset, upper_bound):
        self.searches += 1
        return super().collect(fetch_offset, upper_bound)


def test_the_search_stops_at_the_segment_whose_entry_reaches_the_upper_bound(tmp_path):
    """The cost of a fetch near the log's start must not grow with the log: once an entry's
    LSO reaches the upper bound no later transaction can overlap, so later segments' indexes
    are not read."""
    bases = (0, 10, 20, 30)
    indexes = [CountingIndex(str(tmp_path / f"{b}.txnindex")) for b in bases]
    indexes[0].append(AbortedTxn(1, 2, 5, 6))
    indexes[1].append(AbortedTxn(2, 7, 12, 13))  # open from 7, marker at 12; LSO 13
    indexes[2].append(AbortedTxn(3, 21, 22, 23))
    indexes[3].append(AbortedTxn(4, 31, 32, 33))
    segments = [SimpleNamespace(base_offset=b, txn_index=i) for b, i in zip(bases, indexes)]
    assert collect_aborted(segments, 3, 12) == [AbortedTxn(1, 2, 5, 6), AbortedTxn(2, 7, 12, 13)]
    assert [i.searches for i in indexes] == [1, 1, 0, 0]
    # A range the whole log overlaps reads every index.
    assert [t.producer_id for t in collect_aborted(segments, 0, 40)] == [1, 2, 3, 4]
    assert [i.searches for i in indexes] == [2, 2, 1, 1]
    # From the segment holding the fetch offset on: earlier ones are not read.
    assert [t.producer_id for t in collect_aborted(segments, 20, 40)] == [3, 4]
    assert [i.searches for i in indexes] == [2, 2, 2, 2]


@pytest.fixture
def log(tmp_path):
    """A log of several segments (two 2-record batches each) whose indexes hold three aborted
    transactions: ``first`` within segment 0; ``spanning`` from segment 0 to a marker at the
    base of segment 2; ``late`` within segment 3."""
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    for _ in range(10):
        append(log, 2)
    segs = log.segments
    assert len(segs) >= 5
    b0, b2, b3 = segs[0].base_offset, segs[2].base_offset, segs[3].base_offset
    assert b0 + 2 < segs[1].base_offset and b3 + 2 < segs[4].base_offset
    log.first = AbortedTxn(1, b0, b0 + 1, b0 + 2)
    log.spanning = AbortedTxn(2, b0 + 2, b2, b2 + 1)
    log.late = AbortedTxn(3, b3, b3 + 1, b3 + 2)
    segs[0].txn_index.append(log.first)
    segs[2].txn_index.append(log.spanning)
    segs[3].txn_index.append(log.late)
    yield log
    log.close()


def _pids(log, fetch_offset: int, upper_bound: int) -> list[int]:
    return [t.producer_id for t in collect_aborted(log.segments, fetch_offset, upper_bound)]


def test_collect_aborted_across_segments(log):
    segs, end = log.segments, log.log_end_offset
    b0, b1, b2, b3 = (s.base_offset for s in segs[:4])
    assert _pids(log, b0, end) == [1, 2, 3]
    assert _pids(log, b0 + 1, end) == [1, 2, 3]  # at the first's marker
    assert _pids(log, b0 + 2, end) == [2, 3]     # past it
    # From a segment between the spanning transaction's start and its marker: its entry,
    # in a later segment, is found.
    assert _pids(log, b1, end) == [2, 3]
    assert _pids(log, b1 + 1, end) == [2, 3]
    assert _pids(log, b2, end) == [2, 3]         # at the spanning marker, the base of segment 2
    assert _pids(log, b2 + 1, end) == [3]
    # From within segment 3 (its base, and past it): the entry held there is found.
    assert _pids(log, b3, end) == [3]
    assert _pids(log, b3 + 1, end) == [3]
    assert _pids(log, b3 + 2, end) == []
    assert _pids(log, segs[4].base_offset, end) == []


def test_collect_aborted_upper_bound_is_exclusive(log):
    b0, b3 = log.segments[0].base_offset, log.segments[3].base_offset
    assert _pids(log, b0, b0 + 1) == [1]
    assert _pids(log, b0, b0 + 2) == [1]      # the spanning transaction begins at the bound
    assert _pids(log, b0, b0 + 3) == [1, 2]
    assert _pids(log, b0 + 2, b3) == [2]      # the late one begins at the bound
    assert _pids(log, b0 + 2, b3 + 1) == [2, 3]
