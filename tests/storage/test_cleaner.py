import os
import random
import shutil
import threading

import pytest

from odradek.records.batch import DELETE_HORIZON_BIT, iter_batch_positions, read_header
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.reader import RecordBatch
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.cleaner import LogCleaner
from odradek.storage.config import LogConfig
from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.log import Log
from tests.storage.helpers import (
    T0,
    append,
    make_batch,
    open_log,
    read_records,
    region_batches,
)

COMPACT = LogConfig(segment_bytes=600, cleanup_policy=("compact",), delete_retention_ms=1000)


def batches(log):
    """Headers of every batch in every segment, in order."""
    out = []
    for seg in log.segments:
        out += [h for _, h in seg.iter_batches()]
    return out


def fill(log, rounds=8, keys=5, codec=0):
    """``rounds`` updates of ``keys`` keys, each round one batch; return the latest offsets."""
    latest = {}
    for r in range(rounds):
        ks = [b"key%d" % k for k in range(keys)]
        info = append(log, keys, T0 + r, keys=ks, values=[b"round%d" % r] * keys, compression=codec)
        for i, k in enumerate(ks):
            latest[k] = info.first_offset + i
    return latest


def expected_after_clean(before, end_offset):
    """The model: below ``end_offset`` only the latest record of each key survives."""
    last = {}
    for off, key, _ in before:
        if off < end_offset:
            last[key] = off
    return [r for r in before if r[0] >= end_offset or last.get(r[1]) == r[0]]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_keeps_the_latest_record_per_key_and_offsets(tmp_path, codec):
    log = open_log(tmp_path, COMPACT)
    fill(log, codec=codec)
    append(log, 2, keys=[b"key0", b"key1"], values=[b"final0", b"final1"])
    before = read_records(log)
    headers_before = {h.base_offset: h for h in batches(log)}
    stats = LogCleaner().clean(log, T0 + 10, force=True)
    assert stats is not None and stats.records_removed > 0
    after = read_records(log)
    assert after == expected_after_clean(before, stats.end_offset)
    assert log.log_end_offset == before[-1][0] + 1
    for h in batches(log):
        original = headers_before[h.base_offset]  # batch boundaries are kept
        assert h.last_offset == original.last_offset
        assert h.compression == (original.compression if h.records_count else 0)
        assert h.records_count <= original.records_count
    # A second pass merges the small cleaned segments and changes no record.
    LogCleaner().clean(log, T0 + 10, force=True)
    assert read_records(log) == after


def test_active_segment_and_young_segments_are_not_cleaned(tmp_path):
    config = LogConfig(segment_bytes=600, cleanup_policy=("compact",), min_compaction_lag_ms=50)
    log = open_log(tmp_path, config)
    for r in range(10):
        append(log, 3, T0 + 10 * r, keys=[b"a", b"b", b"c"])
    before = read_records(log)
    segments, end = LogCleaner().cleanable_segments(log, T0 + 100)
    assert segments and all(s.max_timestamp[0] <= T0 + 50 for s in segments)
    stats = LogCleaner().clean(log, T0 + 100, force=True)
    assert read_records(log) == expected_after_clean(before, stats.end_offset)
    assert stats.end_offset == end and end < log.active_segment.base_offset


def test_tombstones_get_a_delete_horizon_then_go(tmp_path):
    log = open_log(tmp_path, COMPACT)
    append(log, 2, T0, keys=[b"a", b"b"], values=[b"1", b"2"])
    append(log, 1, T0 + 5, keys=[b"a"], values=[None])  # tombstone for a
    for _ in range(6):
        append(log, 2, T0 + 6, keys=[b"c", b"d"])
    cleaner = LogCleaner()
    cleaner.clean(log, T0 + 100, force=True)
    tomb = next(h for h in batches(log) if h.base_offset == 2)
    assert tomb.attributes & DELETE_HORIZON_BIT
    assert tomb.base_timestamp == T0 + 100 + 1000
    seg = next(s for s in reversed(log.segments) if s.base_offset <= 2)
    pos = next(p for p, h in seg.iter_batches() if h.base_offset == 2)
    record = RecordBatch(seg.handle().read_exact(pos, tomb.size)).records()[0]
    assert (record.key, record.value, record.timestamp) == (b"a", None, T0 + 5)
    assert (2, b"a", None) in read_records(log)
    cleaner.clean(log, T0 + 1099, force=True)
    assert (2, b"a", None) in read_records(log)  # before the horizon
    cleaner.clean(log, T0 + 1100, force=True)
    keys = [r[1] for r in read_records(log)]
    assert b"a" not in keys and b"b" in keys


def producer_batch(base, pid, seq, keys):
    builder = BatchBuilder(BatchSpec(base_offset=base, producer_id=pid, producer_epoch=3,
                                     base_sequence=seq))
    for k in keys:
        builder.append(T0, k, b"v")
    return builder.build()


def test_emptied_batch_kept_only_when_it_holds_producer_state(tmp_path):
    log = open_log(tmp_path, COMPACT)
    for base, seq in ((0, 0), (2, 2)):
        data = producer_batch(base, 77, seq, [b"x", b"y"])
        log.append(data, LogAppendInfo.from_batches(data))
    for _ in range(8):
        append(log, 2, keys=[b"x", b"y"])  # supersedes both producer batches
    LogCleaner().clean(log, T0 + 10, force=True)
    hs = {h.base_offset: h for h in batches(log)}
    assert 0 not in hs  # not the producer's last batch: dropped
    empty = hs[2]  # the producer's last batch: kept, empty, same offsets and sequence
    assert empty.records_count == 0
    assert (empty.last_offset, empty.producer_id, empty.producer_epoch, empty.base_sequence) == (
        3, 77, 3, 2)
    assert 2 not in [r[0] for r in read_records(log)]
    # Once the producer has a later batch, the empty one has nothing left to keep.
    data = producer_batch(log.log_end_offset, 77, 4, [b"z"])
    log.append(data, LogAppendInfo.from_batches(data))
    log.roll()
    LogCleaner().clean(log, T0 + 10, force=True)
    assert 2 not in {h.base_offset for h in batches(log)}


def test_keyless_records_are_dropped(tmp_path):
    log = open_log(tmp_path, COMPACT)
    append(log, 2, keys=[None, b"k"])
    for _ in range(8):
        append(log, 1, keys=[b"other"])
    LogCleaner().clean(log, T0, force=True)
    assert 0 not in [r[0] for r in read_records(log)]
    assert 1 in [r[0] for r in read_records(log)]


def test_dirty_ratio_gates_cleaning(tmp_path):
    config = LogConfig(segment_bytes=600, cleanup_policy=("compact", "delete"),
                       min_cleanable_dirty_ratio=0.5, retention_ms=-1)
    log = open_log(tmp_path, config)
    fill(log, rounds=10)
    cleaner = LogCleaner()
    assert cleaner.dirty_ratio(log, T0, 0) == 1.0
    stats = cleaner.clean(log, T0)
    assert stats is not None
    assert cleaner.clean(log, T0, first_dirty_offset=stats.end_offset) is None
    off = LogConfig(segment_bytes=600)
    log2 = open_log(tmp_path / "d", off)
    fill(log2)
    assert cleaner.clean(log2, T0, force=True) is None  # delete policy only


class Gate:
    """Blocks the cleaner inside its rewrite until released."""

    def __init__(self, monkeypatch):
        self.entered, self.release = threading.Event(), threading.Event()
        real = LogCleaner._clean_batch

        def blocking(cleaner, *args):
            self.entered.set()
            assert self.release.wait(10)
            return real(cleaner, *args)

        monkeypatch.setattr(LogCleaner, "_clean_batch", blocking)


def test_cleaning_never_blocks_appends_or_reads(tmp_path, monkeypatch):
    log = open_log(tmp_path, COMPACT)
    fill(log)
    gate = Gate(monkeypatch)
    result = {}
    worker = threading.Thread(
        target=lambda: result.setdefault("s", LogCleaner().clean(log, T0 + 10, force=True)))
    worker.start()
    assert gate.entered.wait(10)
    for _ in range(5):
        append(log, 1, keys=[b"new"])
    assert read_records(log)[0][0] == 0
    gate.release.set()
    worker.join(10)
    assert result["s"].segments_cleaned > 0
    assert [r[1] for r in read_records(log)][-5:] == [b"new"] * 5


def test_swap_is_abandoned_when_the_log_changed(tmp_path, monkeypatch):
    log = open_log(tmp_path, COMPACT)
    fill(log)
    gate = Gate(monkeypatch)
    result = {}
    worker = threading.Thread(
        target=lambda: result.setdefault("s", LogCleaner().clean(log, T0 + 10, force=True)))
    worker.start()
    assert gate.entered.wait(10)
    log.truncate_to(5)  # the segments being cleaned are gone
    gate.release.set()
    worker.join(10)
    assert result["s"].segments_cleaned == 0
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(log.directory))
    assert [r[0] for r in read_records(log)] == [0, 1, 2, 3, 4]


class Crash(Exception):
    pass


def test_crash_in_the_middle_of_a_swap_is_completed_on_load(tmp_path, monkeypatch):
    log = open_log(tmp_path, COMPACT)
    fill(log)
    log.flush()
    reference_dir = tmp_path / "reference"
    shutil.copytree(log.directory, reference_dir / "topic-0")
    reference = open_log(reference_dir, COMPACT, clean_shutdown=False)
    LogCleaner().clean(reference, T0 + 10, force=True)
    expected = read_records(reference)

    def crash_after_commit(self, segment, now_ms):
        raise Crash()  # the .swap rename happened; the old segments were not retired

    monkeypatch.setattr(Log, "_retire", crash_after_commit)
    with pytest.raises(Crash):
        LogCleaner().clean(log, T0 + 10, force=True)
    names = os.listdir(log.directory)
    assert any(n.endswith(".log.swap") for n in names)
    monkeypatch.undo()
    log.abandon()
    again = open_log(tmp_path, COMPACT, clean_shutdown=False)
    got = read_records(again)
    # The first group was swapped in by recovery; the rest is still uncleaned.
    assert got[: len(expected)] != [] and set(expected) <= set(got)
    assert not any(n.endswith((".swap", ".cleaned")) for n in os.listdir(again.directory))
    LogCleaner().clean(again, T0 + 10, force=True)
    assert read_records(again) == expected


def test_crash_before_the_commit_point_keeps_the_old_segments(tmp_path, monkeypatch):
    log = open_log(tmp_path, COMPACT)
    fill(log)
    before = read_records(log)
    monkeypatch.setattr(Log, "replace_segments", lambda *a: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        LogCleaner().clean(log, T0 + 10, force=True)
    assert any(n.endswith(".cleaned") for n in os.listdir(log.directory))
    log.abandon()
    again = open_log(tmp_path, COMPACT, clean_shutdown=False)
    assert read_records(again) == before
    assert not any(n.endswith(".cleaned") for n in os.listdir(again.directory))


def test_compacted_batches_are_valid_and_verbatim_when_untouched(tmp_path):
    log = open_log(tmp_path, COMPACT)
    unique = make_batch(0, 3, keys=[b"u1", b"u2", b"u3"])
    log.append(unique, LogAppendInfo.from_batches(unique))
    fill(log)
    LogCleaner().clean(log, T0 + 10, force=True)
    seg = log.segments[0]
    data = seg.handle().read_exact(0, seg.size)
    positions = list(iter_batch_positions(data))
    assert data[: len(unique)] == unique  # every record survived: copied verbatim
    for pos, size in positions:
        RecordBatch(data, pos, size)  # CRC and layout valid
        assert read_header(data, pos).base_offset >= 0


def test_reads_race_compaction_swaps(tmp_path):
    """A reader thread runs while the cleaner swaps segments and retired files are erased:
    every read gets valid batches at or after the offset asked for, nothing else."""
    config = LogConfig(segment_bytes=600, cleanup_policy=("compact",), file_delete_delay_ms=0)
    log = open_log(tmp_path, config)
    fill(log, rounds=4)
    done = threading.Event()
    failures, reads = [], [0]

    def reader():
        rng = random.Random(9)
        while not done.is_set() or reads[0] < 100:
            offset = rng.randrange(log.log_start_offset, log.log_end_offset)
            try:
                batches = region_batches(log.read(offset, rng.choice([1, 500, 4000])))
            except OffsetOutOfRangeError:
                continue
            except Exception as exc:  # noqa: BLE001 - any other error fails the test
                failures.append(repr(exc))
                return
            reads[0] += 1
            if batches and batches[0].last_offset < offset:
                failures.append(f"offset {offset} got {batches[0]}")
                return

    thread = threading.Thread(target=reader)
    thread.start()
    cleaner = LogCleaner()
    for r in range(30):
        fill(log, rounds=1)
        cleaner.clean(log, T0 + r, force=True)
        log.remove_deleted_files(T0 + r)
    done.set()
    thread.join(30)
    assert failures == [] and reads[0] >= 100
