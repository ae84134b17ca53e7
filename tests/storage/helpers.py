"""Shared helpers for the storage tests: building batches, opening logs, reading back."""

from __future__ import annotations

import os

from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.reader import iter_batches
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.file_handle_cache import FileHandleCache
from odradek.storage.log import Log

T0 = 1_700_000_000_000


def make_batch(
    base_offset: int,
    count: int = 1,
    timestamp: int = T0,
    *,
    keys=None,
    values=None,
    value_size: int = 20,
    compression: int = 0,
    producer_id: int = -1,
    base_sequence: int = -1,
    timestamps=None,
) -> bytes:
    """A valid v2 batch of ``count`` records at consecutive offsets from ``base_offset``."""
    spec = BatchSpec(
        base_offset=base_offset,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
    )
    builder = BatchBuilder(spec)
    for i in range(count):
        key = keys[i] if keys is not None else b"k%d" % (base_offset + i)
        if values is not None:
            value = values[i]
        else:
            value = (b"v%d-" % (base_offset + i)).ljust(value_size, b"x")
        ts = timestamps[i] if timestamps is not None else timestamp + i
        builder.append(ts, key, value)
    return builder.build()


def append(log: Log, count: int = 1, timestamp: int = T0, **kw) -> LogAppendInfo:
    """Append one batch of ``count`` records at the log end offset; return its summary."""
    data = make_batch(log.log_end_offset, count, timestamp, **kw)
    info = LogAppendInfo.from_batches(data)
    log.append(data, info)
    return info


def open_log(
    path,
    config: LogConfig | None = None,
    clock: FakeClock | None = None,
    cache: FileHandleCache | None = None,
    **kw,
) -> Log:
    return Log.open(
        os.path.join(str(path), "topic-0"),
        "topic",
        0,
        config or LogConfig(),
        clock or FakeClock(T0),
        # (not ``cache or``: a FileHandleCache holding nothing yet is falsy, and the tests
        # that pass a tiny one would silently get this one instead)
        cache if cache is not None else FileHandleCache(64),
        **kw,
    )


def region_batches(region):
    """The batches of a FileRegion's bytes (validated, CRC checked)."""
    return list(iter_batches(region.read()))


def read_records(log: Log, start: int | None = None, max_bytes: int = 1 << 20):
    """Every record from ``start`` (default: log start) to the end, as (offset, key, value)."""
    offset = log.log_start_offset if start is None else start
    out = []
    while offset < log.log_end_offset:
        region = log.read(offset, max_bytes)
        if region.length == 0:
            break
        for batch in region_batches(region):
            for r in batch.records():
                if r.offset >= offset:
                    out.append((r.offset, r.key, r.value))
            offset = max(offset, batch.next_offset)
    return out
