"""The partition log: segments, indexes, recovery, retention, compaction, the log manager.

Works on files and values only (no asyncio, no sockets); time comes from a ``Clock``.
"""

from odradek.storage.append_info import AppendResult, LogAppendInfo, TimestampOffset
from odradek.storage.cleaner import CleanerStats, LogCleaner
from odradek.storage.clock import Clock, FakeClock, SystemClock
from odradek.storage.config import LogConfig
from odradek.storage.errors import (
    CorruptIndexError,
    CorruptSegmentError,
    InvalidAppendOffsetError,
    InvalidConfigError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StorageError,
)
from odradek.storage.file_handle_cache import FileHandleCache, SegmentFile
from odradek.storage.file_region import EMPTY_REGION, FileRegion
from odradek.storage.log import Log
from odradek.storage.log_manager import FlushTask, LogManager

__all__ = [
    "EMPTY_REGION",
    "AppendResult",
    "CleanerStats",
    "Clock",
    "CorruptIndexError",
    "CorruptSegmentError",
    "FakeClock",
    "FileHandleCache",
    "FileRegion",
    "FlushTask",
    "InvalidAppendOffsetError",
    "InvalidConfigError",
    "Log",
    "LogAppendInfo",
    "LogCleaner",
    "LogClosedError",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRangeError",
    "RecordBatchTooLargeError",
    "SegmentFile",
    "StorageError",
    "SystemClock",
    "TimestampOffset",
]
