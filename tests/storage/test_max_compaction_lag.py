"""``max.compaction.lag.ms`` (KIP-354): a compacted log whose earliest dirty record is older
than the lag must be cleaned whatever its dirty ratio (Kafka's
``LogCleanerManager.maxCompactionDelay``), and its active segment rolls by the lag so that the
record can leave it (Kafka's ``LogConfig.maxSegmentMs``)."""

from __future__ import annotations

from odradek.storage.cleaner import LogCleaner
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from tests.storage.helpers import T0, append, open_log, read_records

MINUTE = 60_000
# The dirty ratio of a log never cleaned is 1.0, and Kafka cleans by ratio only above the
# setting: with 1.0 only the lag can make a pass run.
NEVER_BY_RATIO = {"segment_bytes": 250, "cleanup_policy": ("compact",), "min_cleanable_dirty_ratio": 1.0}


def fill(log, timestamp, rounds=6, keys=3):
    """``rounds`` batches updating the same ``keys`` keys, all at ``timestamp``."""
    for r in range(rounds):
        ks = [b"key%d" % k for k in range(keys)]
        append(log, keys, timestamp, keys=ks, values=[b"round%d" % r] * keys,
               timestamps=[timestamp] * keys)


def test_a_log_past_its_max_compaction_lag_is_cleaned_below_the_ratio(tmp_path):
    config = LogConfig(max_compaction_lag_ms=10 * MINUTE, **NEVER_BY_RATIO)
    log = open_log(tmp_path, config)
    fill(log, T0)
    assert len(log.segments) > 2
    cleaner = LogCleaner()
    assert cleaner.dirty_ratio(log, T0, 0) == 1.0
    assert cleaner.compaction_delay(log, T0 + 10 * MINUTE, 0) == 0  # exactly at the lag: not yet
    assert cleaner.clean(log, T0 + 10 * MINUTE) is None
    assert cleaner.compaction_delay(log, T0 + 10 * MINUTE + 5, 0) == 5
    stats = cleaner.clean(log, T0 + 10 * MINUTE + 5)
    assert stats is not None and stats.records_removed > 0
    below = [key for offset, key, _ in read_records(log) if offset < stats.end_offset]
    assert len(below) == len(set(below))  # one record per key in the cleaned range
    # The cleaned part is no longer dirty: nothing is due until new dirty data ages.
    assert cleaner.compaction_delay(log, T0 + 100 * MINUTE, stats.end_offset) == 0
    assert cleaner.clean(log, T0 + 100 * MINUTE, stats.end_offset) is None


def test_without_the_lag_the_ratio_alone_decides(tmp_path):
    log = open_log(tmp_path, LogConfig(**NEVER_BY_RATIO))
    fill(log, T0)
    cleaner = LogCleaner()
    assert cleaner.compaction_delay(log, T0 + 10**9, 0) == 0
    assert cleaner.clean(log, T0 + 10**9) is None  # ratio 1.0 is not above 1.0, as in Kafka
    below = LogConfig(**{**NEVER_BY_RATIO, "min_cleanable_dirty_ratio": 0.99})
    log.update_config(below)
    assert cleaner.clean(log, T0 + 10**9) is not None


def test_the_earliest_first_batch_timestamp_of_the_dirty_segments_counts(tmp_path):
    config = LogConfig(max_compaction_lag_ms=MINUTE, **NEVER_BY_RATIO)
    log = open_log(tmp_path, config)
    fill(log, T0 + 5 * MINUTE, rounds=3)
    fill(log, T0, rounds=3)  # later segments, older timestamps: the smallest one wins
    fill(log, T0 + 9 * MINUTE, rounds=2)
    firsts = [s.first_batch_timestamp() for s in log.segments[:-1]]
    assert min(firsts) == T0
    assert LogCleaner().compaction_delay(log, T0 + 2 * MINUTE, 0) == MINUTE


def test_segments_without_timestamps_never_make_a_log_due(tmp_path):
    config = LogConfig(max_compaction_lag_ms=1, **NEVER_BY_RATIO)
    log = open_log(tmp_path, config)
    fill(log, -1)
    assert log.segments[0].first_batch_timestamp() == -1
    cleaner = LogCleaner()
    assert cleaner.compaction_delay(log, T0, 0) == 0
    assert cleaner.clean(log, T0) is None


def test_a_due_log_with_nothing_cleanable_is_not_cleaned(tmp_path):
    # The first batch is old enough to be due, but min.compaction.lag.ms keeps the segment
    # holding a young record out of the cleanable range: no cleanable bytes, no pass.
    lag = 10 * MINUTE
    config = LogConfig(max_compaction_lag_ms=lag, min_compaction_lag_ms=lag,
                       **{**NEVER_BY_RATIO, "segment_bytes": 1000})
    log = open_log(tmp_path, config)
    append(log, 3, T0, keys=[b"a", b"b", b"c"], timestamps=[T0] * 3)
    append(log, 3, T0, keys=[b"a", b"b", b"c"], timestamps=[T0 + 9 * MINUTE] * 3)
    log.roll()
    append(log, 1, T0 + 9 * MINUTE)
    assert len(log.segments) == 2
    cleaner = LogCleaner()
    now = T0 + lag + 1
    assert cleaner.compaction_delay(log, now, 0) == 1
    assert cleaner.clean(log, now) is None
    assert cleaner.clean(log, now + lag) is not None  # the young records came of age


def test_a_compacted_active_segment_rolls_by_the_lag(tmp_path):
    clock = FakeClock(T0)
    config = LogConfig(cleanup_policy=("compact",), segment_ms=7 * 24 * 60 * MINUTE, max_compaction_lag_ms=MINUTE)
    log = open_log(tmp_path, config, clock)
    append(log, 1, T0, keys=[b"k"])
    append(log, 1, T0 + MINUTE - 1, keys=[b"k"])
    assert len(log.segments) == 1
    append(log, 1, T0 + MINUTE, keys=[b"k"])  # the first record is a lag old: roll
    assert len(log.segments) == 2
    # A log that is not compacted waits for segment.ms.
    plain = open_log(tmp_path / "plain", LogConfig(max_compaction_lag_ms=MINUTE), clock)
    append(plain, 1, T0)
    append(plain, 1, T0 + 10 * MINUTE)
    assert len(plain.segments) == 1
    # Changing the config changes when the active segment rolls.
    plain.update_config(LogConfig(max_compaction_lag_ms=MINUTE, cleanup_policy=("compact", "delete")))
    append(plain, 1, T0 + 10 * MINUTE, keys=[b"k"])
    assert len(plain.segments) == 2
