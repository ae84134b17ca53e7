"""read_errors: what a failed read of one partition's log answers, and its log line."""

from __future__ import annotations

import errno
import logging
from types import SimpleNamespace

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.errors import CorruptRecordError
from odradek.server.log_limiter import LogRateLimiter
from odradek.server.read_errors import answer_read_error, read_error_code
from odradek.storage.errors import CorruptSegmentError, LogClosedError


def test_each_kind_of_failure_has_its_kafka_error():
    assert read_error_code(CorruptSegmentError("x")) == ErrorCode.CORRUPT_MESSAGE
    assert read_error_code(CorruptRecordError("x")) == ErrorCode.CORRUPT_MESSAGE
    assert read_error_code(OSError(errno.EIO, "Input/output error")) == ErrorCode.KAFKA_STORAGE_ERROR
    assert read_error_code(LogClosedError("x")) == ErrorCode.KAFKA_STORAGE_ERROR
    assert read_error_code(KeyError("bug")) == ErrorCode.UNKNOWN_SERVER_ERROR


def test_repeated_errors_log_once_and_bugs_keep_their_traceback(caplog):
    caplog.set_level(logging.ERROR, logger="odradek.server.read")
    broker = SimpleNamespace(log_limiter=LogRateLimiter(interval=60),
                             log_manager=SimpleNamespace(report_read_error=lambda *a: False))
    for _ in range(20):
        assert answer_read_error(broker, "fetch", "t", 0, OSError(errno.EIO, "EIO")) == ErrorCode.KAFKA_STORAGE_ERROR
    answer_read_error(broker, "fetch", "t", 1, OSError(errno.EIO, "EIO"))  # another partition
    answer_read_error(broker, "fetch", "t", 0, KeyError("bug"))
    lines = [(r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert [m for m, _ in lines] == [
        "fetch of t-0 answered KAFKA_STORAGE_ERROR: [Errno 5] EIO",
        "fetch of t-1 answered KAFKA_STORAGE_ERROR: [Errno 5] EIO",
        "fetch of t-0 answered UNKNOWN_SERVER_ERROR: 'bug'",
    ]
    assert [tb for _, tb in lines] == [False, False, True]


def test_an_io_error_of_a_read_fails_the_log_directory(tmp_path):
    """Kafka's maybeHandleIOException: the partition's directory goes offline (so its
    partitions move while their followers are still in the ISR); corrupt bytes and bugs
    say nothing about the disk, and an unknown partition reports nothing."""
    from odradek.storage.clock import FakeClock
    from odradek.storage.config import LogConfig
    from odradek.storage.log_manager import LogManager

    a, b = tmp_path / "a", tmp_path / "b"
    manager = LogManager([str(a), str(b)], LogConfig(), FakeClock(0))
    manager.startup()
    manager.get_or_create_log("t", 0)
    failed: list[str] = []
    manager.failure_channel.set_listener(failed.append)
    broker = SimpleNamespace(log_limiter=LogRateLimiter(interval=60), log_manager=manager)
    answer_read_error(broker, "fetch", "t", 0, CorruptSegmentError("x"))
    answer_read_error(broker, "fetch", "t", 9, OSError(errno.EIO, "EIO"))
    assert failed == []
    answer_read_error(broker, "fetch", "t", 0, OSError(errno.EIO, "EIO"))
    assert len(failed) == 1 and failed[0] in (str(a), str(b))
    manager.shutdown()
