"""``transactions.aborted_transactions`` over a log its own markers wrote: producers whose
transactions interleave, commit, abort and span segments, on a log of small segments. For
every range ``[fetch_offset, upper_bound)`` of the log the answer must be exactly the
aborted transactions whose marker is at or after ``fetch_offset`` and whose data begins
before ``upper_bound`` (Kafka's ``collectAbortedTransactions``), in marker order: this checks
together the segment each entry goes to (``index_completed``), the LSO recorded with it
(where the search may stop) and the search."""

from __future__ import annotations

import uuid

import pytest

from odradek.replication.partition import Partition
from odradek.replication.transactions import aborted_transactions, write_marker
from odradek.storage.config import LogConfig
from odradek.storage.transaction_index import segment_holding
from tests.replication.transactional_batches import append_transactional
from tests.storage.helpers import T0, make_batch, open_log

ME = 1


class Story:
    """Writes to a one-replica partition and keeps, per aborted transaction, (producer id,
    first offset, marker offset)."""

    def __init__(self, part: Partition) -> None:
        self.part = part
        self.sequences: dict[int, int] = {}
        self.first: dict[int, int] = {}
        self.aborted: list[tuple[int, int, int]] = []

    def write(self, pid: int, count: int = 2) -> None:
        result = append_transactional(self.part, self.sequences, pid, count)
        self.first.setdefault(pid, result.base_offset)

    def plain(self, count: int = 2) -> None:
        self.part.append_records_as_leader(memoryview(bytearray(make_batch(0, count))), T0)

    def end(self, pid: int, commit: bool) -> None:
        marker = write_marker(self.part, pid, 0, 0, commit, T0).base_offset
        first = self.first.pop(pid)
        if not commit:
            self.aborted.append((pid, first, marker))


@pytest.fixture
def story(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    s = Story(Partition("topic", 0, uuid.uuid4(), log, leader_id=ME, isr=(ME,)))
    s.plain()
    s.write(1)
    s.write(2)          # pid 2 opens while pid 1 is open
    s.write(1)
    s.end(1, False)     # aborted while pid 2 is open: its LSO is pid 2's first offset
    s.plain()
    s.write(3)
    s.end(3, True)      # committed: not indexed
    s.plain()
    s.plain()
    s.write(2)
    s.end(2, False)     # aborted several segments after it began
    s.write(4)
    s.end(4, False)     # aborted right after another abort
    s.plain()
    s.write(5)
    s.plain()
    s.write(6)
    s.end(6, False)     # aborted while pid 5 is still open
    s.write(5)          # pid 5 stays open to the end
    yield s
    log.close()


def test_the_story_spans_segments(story):
    segments = story.part.log.segments
    assert len(segments) >= 4
    assert [pid for pid, _, _ in story.aborted] == [1, 2, 4, 6]
    _, first, last = story.aborted[1]
    assert segment_holding(segments, last) - segment_holding(segments, first) >= 2  # pid 2


def test_every_range_gets_exactly_the_overlapping_aborted_transactions(story):
    log = story.part.log
    end = log.log_end_offset
    wrong = []
    for fetch_offset in range(end):
        for upper_bound in range(fetch_offset + 1, end + 1):
            expected = [(pid, first) for pid, first, last in story.aborted
                        if last >= fetch_offset and first < upper_bound]
            found = [(t.producer_id, t.first_offset) for t in aborted_transactions(log, fetch_offset, upper_bound)]
            if found != expected:
                wrong.append((fetch_offset, upper_bound, found, expected))
    assert wrong == []


def test_the_lso_recorded_with_each_abort(story):
    entries = [e for s in story.part.log.segments for e in s.txn_index.entries()]
    first = {pid: f for pid, f, _ in story.aborted}
    marker = {pid: m for pid, _, m in story.aborted}
    assert [(e.producer_id, e.last_stable_offset) for e in entries] == [
        (1, first[2]),        # pid 2 was open
        (2, marker[2] + 1),   # nothing else open
        (4, marker[4] + 1),
        (6, story.first[5]),  # pid 5 was open (and still is)
    ]
