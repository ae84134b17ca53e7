import gc
import os

import pytest

from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.errors import StorageError
from odradek.storage.file_handle_cache import SegmentFile
from odradek.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LogManager,
    parse_partition_dir,
)
from tests.storage.helpers import T0, append, read_records


def manager(dirs, config=None, clock=None, **kw):
    m = LogManager([str(d) for d in dirs], config or LogConfig(), clock or FakeClock(T0), **kw)
    m.startup()
    return m


def test_partitions_spread_over_dirs_and_survive_restart(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    m = manager(dirs)
    for p in range(6):
        append(m.get_or_create_log("orders", p), p + 1)
    counts = [len([n for n in os.listdir(d) if n.startswith("orders-")]) for d in dirs]
    assert counts == [2, 2, 2]
    m.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
        text = (d / "recovery-point-offset-checkpoint").read_text().splitlines()
        assert text[:2] == ["0", "2"]
    again = manager(dirs)
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    for p in range(6):
        log = again.get_log("orders", p)
        assert log.log_end_offset == p + 1 and log.recovery_point == p + 1
    again.shutdown()


def test_unclean_restart_recovers_from_the_checkpointed_point(tmp_path):
    m = manager([tmp_path], LogConfig(segment_bytes=300))
    log = m.get_or_create_log("t", 0)
    for _ in range(10):
        append(log, 2)
    log.flush(10)
    m.checkpoint()
    append(log, 2)
    log.abandon()  # crash: no shutdown, no marker
    again = manager([tmp_path], LogConfig(segment_bytes=300))
    log = again.get_log("t", 0)
    assert log.recovery_point == 10 and log.log_end_offset == 22
    assert [r[0] for r in read_records(log)] == list(range(22))


def test_log_start_offset_is_checkpointed(tmp_path):
    m = manager([tmp_path], LogConfig(segment_bytes=300))
    log = m.get_or_create_log("t", 0)
    for _ in range(10):
        append(log, 2)
    log.delete_records(7)
    m.shutdown()
    again = manager([tmp_path], LogConfig(segment_bytes=300))
    assert again.get_log("t", 0).log_start_offset == 7


def test_delete_partition(tmp_path):
    clock = FakeClock(T0)
    m = manager([tmp_path], LogConfig(file_delete_delay_ms=1000), clock)
    append(m.get_or_create_log("gone", 0), 3)
    append(m.get_or_create_log("kept", 0), 3)
    assert m.delete_log("gone", 0)
    assert not m.delete_log("gone", 0)
    assert m.get_log("gone", 0) is None
    renamed = [n for n in os.listdir(tmp_path) if n.endswith("-delete")]
    assert len(renamed) == 1 and renamed[0].startswith("gone-0.")
    assert ("gone", 0) not in OffsetCheckpointFile(
        str(tmp_path / "recovery-point-offset-checkpoint")).read()
    assert m.remove_deleted(clock.milliseconds()) == 0
    assert m.remove_deleted(clock.milliseconds() + 1000) == 1
    assert not any(n.endswith("-delete") for n in os.listdir(tmp_path))
    assert m.get_or_create_log("gone", 0).log_end_offset == 0  # a fresh log


def test_passes_retention_flush_and_removal(tmp_path):
    clock = FakeClock(T0)
    config = LogConfig(segment_bytes=300, retention_ms=1000, flush_messages=4,
                       file_delete_delay_ms=0)
    m = manager([tmp_path], config, clock)
    logs = [m.get_or_create_log("t", p) for p in range(3)]
    for log in logs:
        for i in range(6):
            append(log, 2, T0 + i)
    tasks = m.flush_due(clock.milliseconds())
    assert {t.log.partition for t in tasks} == {0, 1, 2}
    assert m.run_flush(clock.milliseconds()) == 3
    assert all(log.recovery_point == 12 for log in logs)
    assert m.flush_due(clock.milliseconds()) == []
    deleted = m.run_retention(T0 + 10_000)
    assert deleted == sum(1 for _ in range(3)) * (deleted // 3) and deleted > 0
    assert all(len(log.segments) == 1 for log in logs)
    assert m.remove_deleted(T0 + 10_000) == deleted


def test_retention_is_bounded_by_each_partitions_high_watermark(tmp_path):
    config = LogConfig(segment_bytes=300, retention_ms=1000, file_delete_delay_ms=0)
    m = manager([tmp_path], config)
    logs = [m.get_or_create_log("t", p) for p in range(3)]
    for log in logs:
        for i in range(6):
            append(log, 2, T0 + i)
    assert all(len(log.segments) > 2 for log in logs)
    bases = [log.segments[1].base_offset for log in logs]
    inactive = len(logs[1].segments) - 1
    # Partition 2 is not hosted (no known high watermark): only its log start offset bounds it.
    deleted = m.run_retention(T0 + 10_000, {("t", 0): bases[0], ("t", 1): logs[1].log_end_offset})
    assert deleted == 1 + inactive
    assert logs[0].log_start_offset == bases[0] and len(logs[1].segments) == 1
    assert logs[2].log_start_offset == 0


def test_truncate_checkpoints_the_lowered_recovery_point(tmp_path):
    m = manager([tmp_path])
    log = m.get_or_create_log("t", 0)
    for _ in range(5):
        append(log, 2)
    log.flush()
    m.checkpoint()
    assert m.truncate_to("t", 0, 4)
    cp = OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint")).read()
    assert cp[("t", 0)] == 4
    m.truncate_fully("t", 0, 50)
    cp = OffsetCheckpointFile(str(tmp_path / "log-start-offset-checkpoint")).read()
    assert cp[("t", 0)] == 50


def test_malformed_checkpoints_fall_back_to_safe_values(tmp_path):
    m = manager([tmp_path])
    log = m.get_or_create_log("t", 0)
    for _ in range(4):
        append(log, 2)
    m.shutdown()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("garbage")
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n5\n")
    os.unlink(tmp_path / CLEAN_SHUTDOWN_FILE)
    again = manager([tmp_path])
    log = again.get_log("t", 0)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (0, 8, 0)


def test_illegal_names_and_duplicates(tmp_path):
    m = manager([tmp_path / "a", tmp_path / "b"])
    for bad in ("../etc", "a/b", "", "..", "x" * 250):
        with pytest.raises(ValueError):
            m.get_or_create_log(bad, 0)
    with pytest.raises(ValueError):
        m.get_or_create_log("ok", -1)
    m.shutdown()
    os.makedirs(tmp_path / "a" / "dup-0")
    os.makedirs(tmp_path / "b" / "dup-0")
    with pytest.raises(StorageError):
        manager([tmp_path / "a", tmp_path / "b"])
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("my-topic-12.abc-delete") is None
    assert parse_partition_dir("notapartition") is None


def test_open_files_stay_bounded_with_many_partitions(tmp_path):
    gc.collect()
    before = SegmentFile.open_count()
    m = manager([tmp_path], LogConfig(segment_bytes=200), max_open_files=16)
    for p in range(120):
        log = m.get_or_create_log("many", p)
        for _ in range(3):
            append(log, 1)
    gc.collect()
    assert SegmentFile.open_count() - before <= 16
    for p in range(0, 120, 7):
        assert [r[0] for r in read_records(m.get_log("many", p))] == [0, 1, 2]
    gc.collect()
    assert SegmentFile.open_count() - before <= 16
    m.shutdown()
    again = manager([tmp_path], LogConfig(segment_bytes=200), max_open_files=16)
    gc.collect()
    assert len(again.all_logs()) == 120
    assert SegmentFile.open_count() - before <= 16
    again.shutdown()


def test_cleaner_pass_and_its_checkpoint(tmp_path):
    config = LogConfig(segment_bytes=400, cleanup_policy=("compact",))
    m = manager([tmp_path], config)
    log = m.get_or_create_log("compacted", 0)
    for r in range(10):
        append(log, 3, keys=[b"a", b"b", b"c"])
    append(m.get_or_create_log("plain", 0, LogConfig()), 1)
    done = m.run_cleaner(T0)
    assert list(done) == [("compacted", 0)]
    assert m.cleaner_offset("compacted", 0) == done[("compacted", 0)].end_offset
    assert m.run_cleaner(T0) == {}  # nothing dirty since
    m.shutdown()
    cp = OffsetCheckpointFile(str(tmp_path / "cleaner-offset-checkpoint")).read()
    assert cp == {("compacted", 0): done[("compacted", 0)].end_offset}
