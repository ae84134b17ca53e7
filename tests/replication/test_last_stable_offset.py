"""The last stable offset of a leader, directly (``replication/transactions.last_stable_offset``
over ``ProducerStateManager.first_unstable_offset``; Kafka's ``UnifiedLog.lastStableOffset``):
min(first offset of the oldest undecided transaction, high watermark), where a transaction
stays undecided until the high watermark passes its marker; never above the high watermark,
never below the log start offset. The high watermark is moved by a follower's fetches
(replicas ME and B, both in the ISR), on a fake clock."""

from __future__ import annotations

import uuid

import pytest

from odradek.replication.partition import Partition
from odradek.replication.transactions import cleanable_limit, write_marker
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from tests.replication.transactional_batches import append_transactional
from tests.storage.helpers import T0, make_batch, open_log

ME, B = 1, 2


@pytest.fixture
def clock():
    return FakeClock(T0)


@pytest.fixture
def part(tmp_path, clock):
    log = open_log(tmp_path, LogConfig(), clock)
    p = Partition("topic", 0, uuid.uuid4(), log, replica_lag_time_max_ms=10_000, clock=clock)
    p.become_leader(ME, 0, (ME, B), (ME, B), clock.milliseconds())
    yield p
    log.close()


class Producers:
    """Transactional producers (by id) writing to ``part``; sequences kept per producer."""

    def __init__(self, part: Partition, clock) -> None:
        self.part = part
        self.clock = clock
        self.sequences: dict[int, int] = {}

    def write(self, pid: int, count: int = 2) -> tuple[int, int]:
        """A transactional batch of ``count`` records; its (first, last) offsets."""
        result = append_transactional(self.part, self.sequences, pid, count)
        return result.base_offset, result.last_offset

    def plain(self, count: int = 1) -> None:
        self.part.append_records_as_leader(memoryview(bytearray(make_batch(0, count))), T0)

    def end(self, pid: int, commit: bool) -> int:
        """The COMMIT or ABORT marker of ``pid``'s transaction; its offset."""
        return write_marker(self.part, pid, 0, 0, commit, T0).base_offset

    def replicate_to(self, offset: int) -> None:
        """B fetches from ``offset``: the high watermark rises to it."""
        self.part.update_follower_fetch_state(B, offset, 0, self.clock.milliseconds())
        assert self.part.high_watermark == offset


@pytest.fixture
def producers(part, clock):
    return Producers(part, clock)


def lso(part) -> int:
    return part.last_stable_offset()


def test_no_transaction_the_lso_is_the_high_watermark(part, producers):
    producers.plain(3)
    assert lso(part) == 0  # nothing replicated yet
    producers.replicate_to(2)
    assert lso(part) == 2
    producers.replicate_to(3)
    assert lso(part) == 3


def test_an_open_transaction_holds_the_lso_at_its_first_offset(part, producers):
    producers.plain(3)
    assert producers.write(7) == (3, 4)
    producers.write(7)  # the same transaction goes on: its first offset stays 3
    producers.replicate_to(7)
    assert lso(part) == 3
    producers.plain(2)
    producers.replicate_to(9)
    assert lso(part) == 3


def test_the_lso_never_exceeds_the_high_watermark(part, producers):
    producers.plain(3)
    producers.write(7)  # 3-4, open
    producers.replicate_to(1)
    assert lso(part) == 1
    producers.replicate_to(2)
    assert lso(part) == 2
    producers.replicate_to(3)
    assert lso(part) == 3
    producers.replicate_to(4)
    assert lso(part) == 3  # now the transaction holds it
    producers.replicate_to(5)
    assert lso(part) == 3


@pytest.mark.parametrize("commit", [True, False])
def test_a_marker_releases_the_lso_once_the_high_watermark_passes_it(part, producers, commit):
    producers.plain(1)
    producers.write(7)  # 1-2
    marker = producers.end(7, commit)
    assert marker == 3
    producers.plain(2)  # 4-5
    producers.replicate_to(3)  # the marker is not below the HW yet
    assert lso(part) == 1
    producers.replicate_to(4)  # the marker is below the HW: decided
    assert lso(part) == 4
    producers.replicate_to(6)
    assert lso(part) == 6


def test_a_marker_appended_after_the_high_watermark_passed_the_data(part, producers):
    # The data is replicated before the marker is written: the LSO waits at the first
    # offset until the marker itself is below the high watermark.
    producers.write(7)  # 0-1
    producers.replicate_to(2)
    assert lso(part) == 0
    marker = producers.end(7, True)  # 2
    assert lso(part) == 0
    producers.replicate_to(marker)
    assert lso(part) == 0
    producers.replicate_to(marker + 1)
    assert lso(part) == marker + 1


def test_each_marker_is_decided_only_once_the_high_watermark_passes_it(part, producers):
    # Two transactions end back to back; the HW lands on each marker in turn.
    assert producers.write(1) == (0, 1)
    assert producers.write(2) == (2, 3)
    assert producers.end(1, True) == 4
    assert producers.end(2, False) == 5
    producers.plain(1)  # 6
    producers.replicate_to(4)
    assert lso(part) == 0
    producers.replicate_to(5)  # pid 1 decided; pid 2's marker is at the HW, not below it
    assert lso(part) == 2
    producers.replicate_to(6)
    assert lso(part) == 6
    producers.replicate_to(7)
    assert lso(part) == 7


def test_interleaved_producers_the_lso_is_the_earliest_open_transaction(part, producers):
    assert producers.write(1) == (0, 1)
    assert producers.write(2) == (2, 3)
    assert producers.write(1) == (4, 5)  # pid 1's transaction still begins at 0
    assert producers.write(3) == (6, 7)
    producers.replicate_to(8)
    assert lso(part) == 0
    assert producers.end(1, True) == 8
    producers.replicate_to(9)
    assert lso(part) == 2  # pid 2's transaction is now the earliest open one
    assert cleanable_limit(part) == 2
    assert producers.end(3, False) == 9  # a later transaction ends first: pid 2 still holds it
    producers.replicate_to(10)
    assert lso(part) == 2
    assert producers.end(2, False) == 10
    producers.replicate_to(10)
    assert lso(part) == 2  # pid 2's marker at 10 not below the HW yet
    producers.replicate_to(11)
    assert lso(part) == 11 and cleanable_limit(part) == 11
    assert producers.write(1) == (11, 12)  # pid 1 begins another
    producers.replicate_to(13)
    assert lso(part) == 11


def test_the_lso_is_never_below_the_log_start_offset(part, producers):
    producers.write(7)  # 0-1, open
    producers.plain(3)  # 2-4
    producers.replicate_to(5)
    assert lso(part) == 0
    part.log.delete_records(3)  # DeleteRecords past the transaction's start
    assert part.log_start_offset == 3
    assert lso(part) == 3
