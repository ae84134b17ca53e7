"""kill -9 a process that appends with a flush after every message, then restart."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.storage.clock import SystemClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import append, read_records

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
def test_every_flushed_batch_survives_kill_9(tmp_path, seed):
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
