"""An append that fails in the file system leaves the partition as it was: the same log end
offset and bytes, the same producer state (updated only after the bytes are written), so
the producer's retry of the same batch is appended once, as new, not answered as a duplicate
of something never stored."""

from __future__ import annotations

import errno
import os
import uuid

import pytest

from odradek.records.batch import read_header
from odradek.records.reader import iter_batches
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.partition import Partition
from odradek.replication.produce_validation import ProduceError
from odradek.storage.config import LogConfig
from tests.storage.helpers import T0, make_batch, open_log


class _FullDisk:
    """``os.pwrite`` failing with ENOSPC while ``full`` (as on a full file system)."""

    def __init__(self, monkeypatch) -> None:
        self.full = False
        self.failures = 0
        real = os.pwrite

        def pwrite(fd, data, position):
            if self.full:
                self.failures += 1
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, data, position)

        monkeypatch.setattr(os, "pwrite", pwrite)


def _produce(part: Partition, data: bytes):
    return part.append_records_as_leader(memoryview(bytearray(data)), T0)


def _stored(part: Partition) -> list[tuple[int, int, int]]:
    data = part.log.read(0, 1 << 24).read() if part.log_end_offset else b""
    return [(b.base_offset, b.last_offset, b.header.base_sequence) for b in iter_batches(data)]


def test_failed_append_leaves_log_and_producer_state_unchanged(tmp_path, monkeypatch):
    part = Partition("topic", 0, uuid.uuid4(), open_log(tmp_path, LogConfig()), leader_id=1, isr=(1,))
    disk = _FullDisk(monkeypatch)
    assert _produce(part, make_batch(0, 2, producer_id=7, base_sequence=0)).base_offset == 0
    before = (part.log_end_offset, part.high_watermark, _stored(part), part.producer_state.snapshot())
    retry = make_batch(0, 3, producer_id=7, base_sequence=2)
    disk.full = True
    with pytest.raises(ProduceError) as refused:
        _produce(part, retry)
    assert refused.value.error == ErrorCode.KAFKA_STORAGE_ERROR
    assert disk.failures == 1  # the append really reached the file and failed there
    assert (part.log_end_offset, part.high_watermark, _stored(part), part.producer_state.snapshot()) == before
    assert part.producer_state.check(read_header(retry)).ok  # still the next in sequence
    disk.full = False
    result = _produce(part, retry)
    assert (result.base_offset, result.last_offset) == (2, 4)
    assert _stored(part) == [(0, 1, 0), (2, 4, 2)]
    again = _produce(part, retry)  # now a duplicate, answered with the stored offsets
    assert (again.base_offset, again.last_offset) == (2, 4) and part.log_end_offset == 5
