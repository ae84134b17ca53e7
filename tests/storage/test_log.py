import os
import random
import threading

import pytest

from odradek.records.batch import read_header
from odradek.storage.append_info import LogAppendInfo, TimestampOffset
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.errors import (
    InvalidAppendOffsetError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from odradek.storage.file_handle_cache import FileHandleCache
from tests.storage.helpers import (
    T0,
    append,
    make_batch,
    open_log,
    read_records,
    region_batches,
)


def test_append_assigns_nothing_and_reads_back(tmp_path):
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    infos = [append(log, 3) for _ in range(4)]
    assert [i.first_offset for i in infos] == [0, 3, 6, 9]
    assert log.log_end_offset == 12
    records = read_records(log)
    assert [r[0] for r in records] == list(range(12))
    assert records[5][1] == b"k5"


def test_read_starts_at_the_batch_holding_the_offset(tmp_path):
    log = open_log(tmp_path)
    for _ in range(5):
        append(log, 4)
    region = log.read(9, 10_000)
    batches = region_batches(region)
    assert batches[0].base_offset == 8 and batches[-1].last_offset == 19
    assert region.first_offset == 8


def test_read_returns_whole_batches_within_max_bytes(tmp_path):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=1))
    for _ in range(20):
        append(log, 2, value_size=100)
    size = len(make_batch(0, 2, value_size=100))
    region = log.read(0, size * 3 + size // 2)
    assert region.length == size * 3
    assert [b.base_offset for b in region_batches(region)] == [0, 2, 4]
    # The batch boundary search also works from an index entry in the middle.
    region = log.read(21, size * 2 + 5)
    assert [b.base_offset for b in region_batches(region)] == [20, 22]


def test_min_one_batch_larger_than_max_bytes(tmp_path):
    log = open_log(tmp_path)
    append(log, 10, value_size=1000)
    append(log, 1)
    region = log.read(3, 100)
    assert [b.base_offset for b in region_batches(region)] == [0]
    assert log.read(3, 100, min_one=False).length == 0


def test_max_offset_bounds_the_read(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=400))
    for _ in range(12):
        append(log, 2)
    assert len(log.segments) > 2
    region = log.read(0, 1 << 20, max_offset=10)
    batches = region_batches(region)
    assert batches[-1].last_offset < 10
    assert log.read(10, 1 << 20, max_offset=10).length == 0
    assert log.read(11, 1 << 20, max_offset=10).length == 0
    # A bound inside a batch excludes that batch.
    assert log.read(8, 1 << 20, max_offset=9).length == 0


def test_offsets_out_of_range(tmp_path):
    log = open_log(tmp_path)
    append(log, 5)
    assert log.read(5, 100).length == 0  # the log end offset: nothing yet
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(6, 100)
    assert (e.value.log_start_offset, e.value.log_end_offset) == (0, 5)
    log.delete_records(3)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    assert log.read(3, 1000).first_offset == 0  # the batch holding 3 starts at 0


def test_append_offset_rules(tmp_path):
    log = open_log(tmp_path)
    append(log, 3)
    data = make_batch(1, 1)
    with pytest.raises(InvalidAppendOffsetError):
        log.append(data, LogAppendInfo.from_batches(data))
    gap = make_batch(10, 2)  # a follower may see gaps left by compaction
    log.append(gap, LogAppendInfo.from_batches(gap))
    assert log.log_end_offset == 12
    assert [r[0] for r in read_records(log)] == [0, 1, 2, 10, 11]
    with pytest.raises(ValueError):
        log.append(b"", LogAppendInfo(12, 12))


def test_batch_larger_than_a_segment(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=200))
    data = make_batch(0, 5, value_size=100)
    with pytest.raises(RecordBatchTooLargeError):
        log.append(data, LogAppendInfo.from_batches(data))


def test_roll_on_segment_bytes_and_names(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=1000))
    for _ in range(30):
        append(log, 2, value_size=50)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3 and bases == sorted(bases)
    assert all(s.size <= 1000 for s in log.segments)
    names = sorted(n for n in os.listdir(log.directory) if n.endswith(".log"))
    assert names == [f"{b:020d}.log" for b in bases]
    assert [r[0] for r in read_records(log)] == list(range(60))


def test_roll_on_segment_ms(tmp_path):
    clock = FakeClock(T0)
    log = open_log(tmp_path, LogConfig(segment_ms=1000), clock)
    append(log, 1, T0)
    append(log, 1, T0 + 999)
    assert len(log.segments) == 1
    append(log, 1, T0 + 1000)  # the record clock says a second passed since the first
    assert len(log.segments) == 2
    # Without record timestamps, the wall clock since the segment was created decides.
    no_ts = make_batch(3, 1, -1)
    log.append(no_ts, LogAppendInfo.from_batches(no_ts))
    assert len(log.segments) == 2
    clock.advance(1000)
    no_ts = make_batch(4, 1, -1)
    log.append(no_ts, LogAppendInfo.from_batches(no_ts))
    assert len(log.segments) == 3


def test_roll_when_the_index_is_full(tmp_path):
    # 16 index bytes: two offset entries, one time entry; an entry after every append.
    log = open_log(tmp_path, LogConfig(segment_index_bytes=16, index_interval_bytes=0))
    for _ in range(10):
        append(log, 1)
    assert len(log.segments) >= 3
    assert [r[0] for r in read_records(log)] == list(range(10))


def test_explicit_roll_and_empty_active_segment(tmp_path):
    log = open_log(tmp_path)
    log.roll()
    assert len(log.segments) == 1  # an empty active segment is not rolled
    append(log, 2)
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 2]
    gap = make_batch(7, 1)
    log.append(gap, LogAppendInfo.from_batches(gap))
    # A gap needs no roll: the empty segment at 2 takes the batch at 7.
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert [r[0] for r in read_records(log)] == [0, 1, 7]
    assert read_records(log, 2) == read_records(log, 7)


def test_roll_when_relative_offsets_would_overflow(tmp_path):
    log = open_log(tmp_path)
    append(log, 2)
    far = make_batch(2**31 + 5, 2)
    log.append(far, LogAppendInfo.from_batches(far))
    assert [s.base_offset for s in log.segments] == [0, 2**31 + 5]
    log.truncate_fully(0)
    farther = make_batch(2**31 + 10, 1)
    log.append(farther, LogAppendInfo.from_batches(farther))
    # The empty active segment at 0 could not hold it: it was replaced, not kept.
    assert [s.base_offset for s in log.segments] == [2**31 + 10]
    assert [r[0] for r in read_records(log, 2**31 + 10)] == [2**31 + 10]


def test_offset_for_timestamp(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=600, index_interval_bytes=1))
    for i in range(20):
        append(log, 3, T0 + 100 * i)  # records at T0+100i, +1, +2
    assert len(log.segments) > 3
    assert log.offset_for_timestamp(T0 - 5) == TimestampOffset(T0, 0)
    assert log.offset_for_timestamp(T0 + 701) == TimestampOffset(T0 + 701, 22)
    assert log.offset_for_timestamp(T0 + 703) == TimestampOffset(T0 + 800, 24)
    assert log.offset_for_timestamp(T0 + 1902) == TimestampOffset(T0 + 1902, 59)
    assert log.offset_for_timestamp(T0 + 1903) is None
    assert log.max_timestamp() == TimestampOffset(T0 + 1902, 59)
    log.delete_records(40)
    assert log.offset_for_timestamp(T0).offset == 40


def test_offset_for_timestamp_with_out_of_order_timestamps(tmp_path):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=1))
    append(log, 3, timestamps=[T0 + 50, T0 + 10, T0 + 20])
    append(log, 3, timestamps=[T0 + 5, T0 + 60, T0 + 30])
    assert log.offset_for_timestamp(T0 + 15) == TimestampOffset(T0 + 50, 0)
    assert log.offset_for_timestamp(T0 + 55) == TimestampOffset(T0 + 60, 4)
    assert log.max_timestamp().timestamp == T0 + 60


def test_flush_policy_by_messages_time_and_roll(tmp_path):
    clock = FakeClock(T0)
    log = open_log(tmp_path, LogConfig(flush_messages=5, flush_ms=10_000), clock)
    append(log, 2)
    assert log.flush_due(clock.milliseconds()) is None
    append(log, 3)
    assert log.flush_due(clock.milliseconds()) == 5
    log.flush(5)
    assert log.recovery_point == 5 and log.flush_due(clock.milliseconds()) is None
    append(log, 1)
    clock.advance(10_000)
    assert log.flush_due(clock.milliseconds()) == 6
    log.flush()
    assert log.recovery_point == 6


def test_default_policy_leaves_flushing_to_the_os_but_flushes_rolled_segments(tmp_path):
    clock = FakeClock(T0)
    log = open_log(tmp_path, LogConfig(segment_bytes=300), clock)
    append(log, 2)
    assert log.flush_due(clock.milliseconds()) is None
    for _ in range(5):
        append(log, 2)
    active = log.active_segment.base_offset
    assert active > 0 and log.flush_due(clock.milliseconds()) == active
    log.flush(active)
    assert log.recovery_point == active and log.flush_due(clock.milliseconds()) is None


def test_appends_continue_while_a_flush_is_in_fsync(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    append(log, 3)
    entered, release = threading.Event(), threading.Event()
    real_sync = os.fdatasync  # a segment's data is synced with fdatasync

    def slow_sync(fd):
        entered.set()
        assert release.wait(10)
        real_sync(fd)

    monkeypatch.setattr(os, "fdatasync", slow_sync)
    flusher = threading.Thread(target=log.flush, args=(3,))
    flusher.start()
    assert entered.wait(10)
    for _ in range(5):
        append(log, 2)  # the flush holds no lock appends need
    assert log.log_end_offset == 13 and log.recovery_point == 0
    release.set()
    flusher.join(10)
    assert log.recovery_point == 3


def test_retention_by_time(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300, retention_ms=1000))
    for i in range(12):
        append(log, 2, T0 + 100 * i)
    segments = log.segments
    assert len(segments) > 3
    # The largest timestamp of a segment decides; the active segment always stays.
    now = segments[1].max_timestamp[0] + 1001
    deleted = log.delete_old_segments(now)
    assert deleted == 2
    assert log.log_start_offset == segments[2].base_offset
    assert log.delete_old_segments(T0 + 10**9) == len(segments) - 3
    assert log.segments == (segments[-1],)
    assert [r[0] for r in read_records(log)][-1] == 23


def test_retention_by_time_deletes_only_past_the_limit(tmp_path):
    # Kafka deletes a segment once now - largestTimestamp > retention.ms: a segment exactly
    # retention.ms old stays, one millisecond later it goes.
    log = open_log(tmp_path, LogConfig(segment_bytes=300, retention_ms=1000))
    for i in range(6):
        append(log, 2, T0 + 100 * i)
    first = log.segments[0]
    limit = first.max_timestamp[0] + 1000
    assert log.delete_old_segments(limit) == 0 and log.segments[0] is first
    assert log.delete_old_segments(limit + 1) == 1 and log.segments[0] is not first


def _kafka_size_retention(sizes: list[int], retention_bytes: int) -> int:
    """How many leading segments ``UnifiedLog.deleteRetentionSizeBreachedSegments`` deletes:
    with ``diff = size - retention.bytes``, each oldest segment goes while ``diff - its size
    >= 0`` (and Kafka never empties the log below an empty active segment; odradek keeps the
    active segment always, which the retention.bytes > 0 cases here never reach)."""
    diff = sum(sizes) - retention_bytes
    count = 0
    while count < len(sizes) - 1 and diff - sizes[count] >= 0:
        diff -= sizes[count]
        count += 1
    return count


def _filled_log(path, retention_bytes: int):
    log = open_log(path, LogConfig(segment_bytes=300, retention_bytes=retention_bytes, retention_ms=-1))
    for _ in range(12):
        append(log, 2)
    return log


def test_retention_by_bytes_deletes_exactly_what_kafka_deletes(tmp_path):
    probe = _filled_log(tmp_path / "probe", -1)
    sizes = [s.size for s in probe.segments]
    bases = [s.base_offset for s in probe.segments]
    total = sum(sizes)
    assert len(sizes) > 4
    two_oldest = total - sizes[0] - sizes[1]
    # At the boundary (the log exceeds retention.bytes by exactly the two oldest segments)
    # both go; one byte more retention keeps the second; one less still deletes just two.
    cases = {700: None, two_oldest: 2, two_oldest + 1: 1, two_oldest - 1: 2, total: 0, total - 1: 0}
    for i, (retention, expected) in enumerate(cases.items()):
        log = _filled_log(tmp_path / str(i), retention)
        deleted = _kafka_size_retention(sizes, retention)
        if expected is not None:
            assert deleted == expected  # the model itself, at the boundary
        assert log.delete_old_segments(T0) == deleted, retention
        assert [s.base_offset for s in log.segments] == bases[deleted:], retention
        assert log.log_start_offset == bases[deleted]
        assert log.size == sum(sizes[deleted:])


def test_retention_by_bytes_never_deletes_the_active_segment(tmp_path):
    log = _filled_log(tmp_path / "a", 0)
    active = log.active_segment
    assert log.delete_old_segments(T0) > 0 and log.segments == (active,)
    tiny = open_log(tmp_path / "b", LogConfig(retention_bytes=0))
    append(tiny, 2)
    assert tiny.delete_old_segments(T0) == 0 and tiny.log_end_offset == 2


def test_retention_by_time_stops_at_the_high_watermark(tmp_path):
    # Kafka's deletableSegments: only a segment whose successor starts at or below the high
    # watermark goes; the records above it are not yet replicated and stay.
    log = open_log(tmp_path, LogConfig(segment_bytes=300, retention_ms=1000))
    for i in range(12):
        append(log, 2, T0 + i)
    segments = log.segments
    bases = [s.base_offset for s in segments]
    assert len(segments) > 4
    hw = bases[3] + 1  # inside the fourth segment
    assert log.delete_old_segments(T0 + 10**9, high_watermark=hw) == 3
    assert log.segments == segments[3:] and log.log_start_offset == bases[3]
    assert log.delete_old_segments(T0 + 10**9, high_watermark=hw) == 0
    # A high watermark exactly at a segment's base lets the one before it go.
    assert log.delete_old_segments(T0 + 10**9, high_watermark=bases[5]) == 2
    # At the log end offset every inactive segment goes; the active one always stays.
    assert log.delete_old_segments(T0 + 10**9, high_watermark=log.log_end_offset) == len(bases) - 6
    assert log.segments == (segments[-1],)


def test_retention_by_bytes_stops_at_the_high_watermark_but_counts_the_whole_log(tmp_path):
    log = _filled_log(tmp_path, 0)
    segments = log.segments
    assert log.delete_old_segments(T0, high_watermark=segments[2].base_offset) == 2
    assert log.segments == segments[2:]
    # retention.bytes counts the records above the high watermark too (Kafka's log size).
    sizes = [s.size for s in segments]
    bounded = _filled_log(tmp_path / "b", sum(sizes[2:]))
    assert bounded.delete_old_segments(T0, high_watermark=bounded.log_end_offset) == 2
    below = _filled_log(tmp_path / "c", sum(sizes[1:]))
    assert below.delete_old_segments(T0, high_watermark=0) == 0


def test_the_high_watermark_does_not_hold_back_the_log_start_offset_rule(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300, retention_ms=-1))
    for _ in range(8):
        append(log, 2)
    start = log.segments[2].base_offset
    log._log_start = start  # as a follower's start offset taken from its leader
    assert log.delete_old_segments(T0, high_watermark=0) == 2


def test_compact_policy_does_not_delete_by_retention(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300, retention_ms=0, cleanup_policy=("compact",)))
    for _ in range(8):
        append(log, 2)
    assert log.delete_old_segments(T0 + 10**9) == 0
    log.delete_records(9)  # but segments below the log start offset go
    assert log.delete_old_segments(T0) == 0 and log.segments[0].base_offset <= 9
    assert all(s.base_offset <= 9 for s in log.segments[:1])


def test_delete_records(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    for _ in range(12):
        append(log, 2)
    first_segments = len(log.segments)
    assert log.delete_records(9) == 9
    assert log.log_start_offset == 9
    assert len(log.segments) < first_segments
    assert log.segments[0].base_offset <= 9
    assert log.delete_records(5) == 9  # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(25)
    assert log.delete_records(24) == 24
    assert log.read(24, 100).length == 0


def test_deleted_segments_are_renamed_then_removed_and_reads_survive(tmp_path):
    clock = FakeClock(T0)
    log = open_log(tmp_path, LogConfig(segment_bytes=300, file_delete_delay_ms=500), clock)
    for _ in range(10):
        append(log, 2)
    region = log.read(0, 10_000)  # a read in progress on the first segment
    expected = region.read()
    log.delete_records(log.segments[2].base_offset)
    names = os.listdir(log.directory)
    assert any(n.endswith(".log.deleted") for n in names)
    assert log.remove_deleted_files(clock.milliseconds()) == 0
    assert log.remove_deleted_files(clock.milliseconds() + 500) == 2
    assert not any(n.endswith(".deleted") for n in os.listdir(log.directory))
    assert region.read() == expected  # the descriptor outlives the file's name


def test_truncate_to(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    for _ in range(10):
        append(log, 3)
    assert log.truncate_to(30) is False
    assert log.truncate_to(19)  # inside the batch 18..20: the whole batch goes
    assert log.log_end_offset == 18
    assert [r[0] for r in read_records(log)] == list(range(18))
    assert log.truncate_to(9)  # a batch boundary
    assert log.log_end_offset == 9
    assert all(s.base_offset < 9 for s in log.segments)
    append(log, 2)
    assert [r[0] for r in read_records(log)] == list(range(11))
    assert log.recovery_point <= 9


def test_truncate_fully(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    for _ in range(10):
        append(log, 3)
    log.truncate_fully(100)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (100, 100, 100)
    assert [s.base_offset for s in log.segments] == [100]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(50, 100)
    append(log, 2)
    assert [r[0] for r in read_records(log)] == [100, 101]
    log.truncate_to(0)  # below the start: a full truncation to 0
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)


def test_many_segments_with_a_tiny_handle_cache(tmp_path):
    cache = FileHandleCache(max_open=2)
    log = open_log(tmp_path, LogConfig(segment_bytes=200), cache=cache)
    for _ in range(40):
        append(log, 1)
    assert len(log.segments) >= 20
    assert len(cache) <= 2
    for offset in range(0, 40, 3):
        batch = region_batches(log.read(offset, 10_000))[0]
        assert batch.base_offset <= offset <= batch.last_offset
    assert len(cache) <= 2


def test_closed_log_refuses_appends(tmp_path):
    log = open_log(tmp_path)
    append(log, 1)
    log.close()
    with pytest.raises(LogClosedError):
        append(log, 1)


def test_region_holds_only_whole_valid_batches(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=2000, index_interval_bytes=64))
    for i in range(50):
        append(log, 1 + i % 4, value_size=10 + 7 * i)
    for offset in range(0, log.log_end_offset, 5):
        for limit in (1, 100, 333, 1500):
            region = log.read(offset, limit)
            data = region.read()
            batches = region_batches(region)
            assert sum(b.header.size for b in batches) == len(data)
            assert batches[0].base_offset <= offset <= batches[0].last_offset
            assert len(data) <= limit or len(batches) == 1
            assert read_header(data).base_offset == region.first_offset


def test_reads_stay_correct_while_appends_and_retention_run(tmp_path):
    """A reader thread races an appender, retention and immediate file removal: every read
    returns valid whole batches holding the offset asked for, or OffsetOutOfRange once
    retention moved the log start past it; nothing else."""
    cache = FileHandleCache(max_open=3)
    config = LogConfig(segment_bytes=500, retention_bytes=1500, retention_ms=-1,
                       file_delete_delay_ms=0)
    log = open_log(tmp_path, config, cache=cache)
    append(log, 2)
    done = threading.Event()
    failures = []
    reads = [0]

    def reader():
        rng = random.Random(5)
        while not done.is_set() or reads[0] < 200:
            start, end = log.log_start_offset, log.log_end_offset
            offset = rng.randrange(start, end)
            try:
                batches = region_batches(log.read(offset, rng.choice([1, 300, 5000])))
            except OffsetOutOfRangeError:
                continue
            except Exception as exc:  # noqa: BLE001 - any other error fails the test
                failures.append(repr(exc))
                return
            reads[0] += 1
            first = batches[0]
            values_ok = all(
                r.value.startswith(b"v%d-" % r.offset) for b in batches for r in b.records()
            )
            if not first.base_offset <= offset <= first.last_offset or not values_ok:
                failures.append(f"offset {offset} got {batches}")
                return

    thread = threading.Thread(target=reader)
    thread.start()
    for _ in range(300):
        append(log, 2)
        log.delete_old_segments(T0)
        log.remove_deleted_files(T0)
    done.set()
    thread.join(30)
    assert not thread.is_alive()
    assert failures == []
    assert reads[0] >= 200


def test_an_append_finishes_a_short_write(tmp_path, monkeypatch):
    """One pwrite nearly always takes a whole append; when it takes less, the append writes
    the rest where it belongs."""
    log = open_log(tmp_path)
    append(log, 3)
    real = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, data, pos: real(fd, memoryview(data)[:7], pos))
    append(log, 5, value_size=200)
    monkeypatch.undo()
    append(log, 2)
    records = read_records(log)
    assert [r[0] for r in records] == list(range(10))
    assert records[3][1] == b"k3" and len(records[4][2]) == 200
