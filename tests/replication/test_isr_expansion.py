"""The boundaries of ISR expansion (``replication/isr.can_join_isr``, Kafka's
``Partition.isFollowerInSync``): a follower outside the ISR joins once its log end offset is
at least the high watermark *and* at least the start offset of the leader's current epoch;
one offset short of either keeps it out. Pure rules first, then through ``Partition`` on a
fake clock (``tests/replication/test_isr.py`` has the rest of the ISR's life)."""

from __future__ import annotations

import uuid

import pytest

from odradek.replication.follower_state import FollowerState
from odradek.replication.isr import IsrChange, can_join_isr, expand_isr
from odradek.replication.partition import Partition
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from tests.storage.helpers import T0, make_batch, open_log

ME, B, C = 1, 2, 3
LAG = 10_000


def _at(end: int) -> FollowerState:
    return FollowerState(log_end_offset=end)


@pytest.mark.parametrize("end, high_watermark, epoch_start, joins", [
    (9, 10, 5, False),    # one below the high watermark
    (10, 10, 5, True),    # at the high watermark
    (11, 10, 5, True),
    (9, 3, 10, False),    # past the high watermark, one below the epoch's start
    (10, 3, 10, True),    # at the epoch's start
    (10, 10, 10, True),   # at both
    (9, 10, 10, False),
    (10, 10, -1, False),  # no epoch start: not this partition's leader
    (-1, 0, 0, False),    # offset not known yet
])
def test_can_join_isr_boundaries(end, high_watermark, epoch_start, joins):
    assert can_join_isr(_at(end), high_watermark, epoch_start) is joins


def test_expand_isr_one_below_the_high_watermark_proposes_nothing():
    assert expand_isr(3, (ME, B), None, C, _at(9), 10, 0) is None
    assert expand_isr(3, (ME, B), None, C, _at(10), 10, 0) == IsrChange(3, (ME, B, C), added=(C,))


@pytest.fixture
def clock():
    return FakeClock(T0)


def _produce(part: Partition, count: int) -> None:
    part.append_records_as_leader(memoryview(bytearray(make_batch(0, count))), T0)


def _fetch(part: Partition, clock, replica: int, offset: int):
    return part.update_follower_fetch_state(replica, offset, 0, clock.milliseconds())


def _leader(tmp_path, clock, isr) -> Partition:
    log = open_log(tmp_path, LogConfig(), clock)
    part = Partition("topic", 0, uuid.uuid4(), log, replica_lag_time_max_ms=LAG, clock=clock)
    part.become_leader(ME, 3, (ME, B, C), isr, clock.milliseconds())
    return part


def test_a_follower_one_below_the_high_watermark_stays_out(tmp_path, clock):
    part = _leader(tmp_path, clock, (ME, B))
    _produce(part, 10)
    _fetch(part, clock, B, 10)
    assert part.high_watermark == 10
    assert _fetch(part, clock, C, 9).isr_change is None
    assert part.pending_isr is None and part.isr == (ME, B)
    update = _fetch(part, clock, C, 10)
    assert update.isr_change == IsrChange(3, (ME, B, C), added=(C,))


def test_a_follower_one_below_the_epoch_start_stays_out_though_past_the_high_watermark(tmp_path, clock):
    # Epoch 3 writes 10 records that B has not fetched yet (HW 0); re-elected at epoch 4,
    # the new epoch starts at 10. B's fetch at 4 moves the HW to 4.
    part = _leader(tmp_path, clock, (ME, B))
    _produce(part, 10)
    part.become_leader(ME, 4, (ME, B, C), (ME, B), clock.milliseconds())
    assert part.leader_epoch_start_offset == 10
    _fetch(part, clock, B, 4)
    assert part.high_watermark == 4
    assert _fetch(part, clock, C, 9).isr_change is None  # past the HW, short of the epoch
    assert part.pending_isr is None
    update = _fetch(part, clock, C, 10)
    assert update.isr_change == IsrChange(4, (ME, B, C), added=(C,))
