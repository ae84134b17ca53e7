"""``segment.jitter.ms``: each segment draws a roll jitter when it is created or loaded, and
rolls by time once its roll clock reaches ``segment.ms`` less that jitter (Kafka's
``LogSegment.rollJitterMs`` and ``shouldRoll``)."""

from __future__ import annotations

import random

from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from tests.storage.helpers import T0, append, open_log


class Draws:
    """A random source answering ``values`` in turn; records each bound it was given."""

    def __init__(self, *values):
        self.values, self.asked = list(values), []

    def randrange(self, stop):
        self.asked.append(stop)
        return self.values.pop(0)


JITTERED = LogConfig(segment_ms=1000, segment_jitter_ms=500)


def test_the_roll_comes_jitter_ms_before_segment_ms(tmp_path):
    log = open_log(tmp_path, JITTERED, rng=Draws(300, 0))
    assert log.active_segment.roll_jitter_ms == 300
    append(log, 1, T0)
    append(log, 1, T0 + 699)
    assert len(log.segments) == 1
    append(log, 1, T0 + 700)  # 1000 - 300: the roll clock reached segment.ms less the jitter
    assert len(log.segments) == 2
    assert log.active_segment.roll_jitter_ms == 0  # the new segment drew its own


def test_each_segment_draws_from_min_of_jitter_and_segment_ms(tmp_path):
    rng = Draws(10, 20, 30)
    log = open_log(tmp_path, LogConfig(segment_ms=100, segment_jitter_ms=5000), rng=rng)
    append(log, 1, T0)
    append(log, 1, T0 + 100)
    append(log, 1, T0 + 200)
    assert [s.roll_jitter_ms for s in log.segments] == [10, 20, 30]
    assert rng.asked == [100, 100, 100]


def test_without_jitter_nothing_is_drawn_and_rolls_wait_the_full_segment_ms(tmp_path):
    rng = Draws()
    log = open_log(tmp_path, LogConfig(segment_ms=1000), rng=rng)
    append(log, 1, T0)
    append(log, 1, T0 + 999)
    append(log, 1, T0 + 1000)
    assert len(log.segments) == 2 and rng.asked == []


def test_a_seeded_source_gives_the_same_jitters(tmp_path):
    config = LogConfig(segment_ms=10_000, segment_jitter_ms=10_000)

    def jitters(path):
        log = open_log(path, config, rng=random.Random(42))
        for i in range(5):
            append(log, 1, T0 + i * 10_000)
        return [s.roll_jitter_ms for s in log.segments]

    first = jitters(tmp_path / "a")
    assert first == jitters(tmp_path / "b")
    assert len(first) >= 2 and all(0 <= j < 10_000 for j in first) and len(set(first)) > 1


def test_loaded_segments_draw_a_jitter(tmp_path):
    log = open_log(tmp_path, JITTERED, rng=Draws(0, 0))
    append(log, 1, T0)
    append(log, 1, T0 + 1000)
    assert len(log.segments) == 2
    log.close()
    reopened = open_log(tmp_path, JITTERED, rng=Draws(111, 222, 0))
    assert [s.roll_jitter_ms for s in reopened.segments] == [111, 222]
    append(reopened, 1, T0 + 1000 + 777)
    assert len(reopened.segments) == 2
    append(reopened, 1, T0 + 1000 + 778)  # the reloaded active segment rolls at 1000 - 222
    assert len(reopened.segments) == 3


def test_a_new_jitter_setting_applies_to_segments_created_after_it(tmp_path):
    clock = FakeClock(T0)
    log = open_log(tmp_path, LogConfig(segment_ms=1000), clock, rng=Draws(400))
    append(log, 1, T0)
    log.update_config(JITTERED)
    append(log, 1, T0 + 600)  # the active segment kept its jitter of 0
    assert len(log.segments) == 1
    append(log, 1, T0 + 1000)
    assert len(log.segments) == 2 and log.active_segment.roll_jitter_ms == 400


def test_a_jitter_above_max_compaction_lag_does_not_roll_every_append(tmp_path):
    config = LogConfig(cleanup_policy=("compact",), segment_jitter_ms=3_600_000, max_compaction_lag_ms=60_000)
    log = open_log(tmp_path, config, rng=random.Random(1))
    for i in range(20):
        append(log, 1, T0, keys=[b"k%d" % i])
    assert len(log.segments) == 1 and log.active_segment.roll_jitter_ms < 60_000
    append(log, 1, T0 + 60_000, keys=[b"later"])
    assert len(log.segments) == 2
