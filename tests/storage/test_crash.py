"""Crashes of a process that appends through a LogManager, then restart.

- kill -9 (the page cache survives): every batch written is recovered, the log is whole;
- a power cut (``power_loss``: only fsynced bytes survive): with ``flush.messages=1`` every
  batch appended and flushed as the policy asks survives; with flushing left to the OS the
  unflushed tail is lost (which shows the simulated cut really drops unsynced bytes).
"""

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.storage.clock import SystemClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from odradek.storage.append_info import LogAppendInfo
from tests.storage.helpers import append, make_batch, read_records
from tests.storage.power_loss import PowerLoss

ROOT = Path(__file__).resolve().parents[2]


def run_and_kill(directory, acks_wanted, seed):
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.storage.crash_writer", str(directory), str(seed)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    acked = -1
    try:
        for _ in range(acks_wanted):
            line = child.stdout.readline()
            if not line:
                raise AssertionError(child.stderr.read().decode())
            acked = int(line)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        child.stdout.close()
        child.stderr.close()
    return acked


@pytest.mark.parametrize("seed", [1, 2])
def test_every_acknowledged_batch_survives_kill_9(tmp_path, seed):
    acked = run_and_kill(tmp_path, 150 + 40 * seed, seed)
    assert acked > 0
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    manager = LogManager([str(tmp_path)], LogConfig(segment_bytes=16 * 1024), SystemClock())
    manager.startup()
    log = manager.get_log("crash", 0)
    assert log is not None
    assert log.log_end_offset > acked
    offsets = [r[0] for r in read_records(log)]
    assert offsets == list(range(log.log_end_offset))
    end = log.log_end_offset
    append(log, 3)
    assert [r[0] for r in read_records(log, end)] == [end, end + 1, end + 2]
    manager.shutdown()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    again = LogManager([str(tmp_path)], LogConfig(segment_bytes=16 * 1024), SystemClock())
    again.startup()
    assert again.get_log("crash", 0).log_end_offset == end + 3
    again.shutdown()


def _append_through_manager(directory, config: LogConfig, rng) -> int:
    """Append batches as the broker does (append, then the flushes the policy asks for);
    return the log end offset reached. The power is cut right after."""
    manager = LogManager([str(directory)], config, SystemClock())
    manager.startup()
    log = manager.get_or_create_log("cut", 0)
    for i in range(120):
        data = make_batch(log.log_end_offset, rng.randint(1, 5), value_size=rng.randint(1, 400))
        log.append(data, LogAppendInfo.from_batches(data))
        for task in manager.flush_due(SystemClock().milliseconds()):
            task.run()
        if i % 7 == 0:
            manager.checkpoint()
    return log.log_end_offset


@pytest.mark.parametrize("flush_messages", [1, None])
def test_power_cut_keeps_what_flush_messages_flushed(tmp_path, flush_messages):
    config = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=256)
    if flush_messages is not None:
        config = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=256, flush_messages=flush_messages)
    with PowerLoss() as power:
        acked = _append_through_manager(tmp_path / "live", config, random.Random(7))
        power.image(tmp_path / "live", tmp_path / "after")
    manager = LogManager([str(tmp_path / "after")], config, SystemClock())
    manager.startup()
    log = manager.get_log("cut", 0)
    offsets = [r[0] for r in read_records(log)]
    assert offsets == list(range(log.log_end_offset))  # a whole prefix in every case
    if flush_messages == 1:
        assert log.log_end_offset == acked
    else:
        assert log.log_end_offset < acked  # the unsynced tail is gone
    manager.shutdown()
