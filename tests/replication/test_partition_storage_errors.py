"""A produce the disk refuses is KAFKA_STORAGE_ERROR for its partition, and changes nothing
the next produce depends on: log end offset, high watermark, idempotent producers' sequence
state; the same batch sent again (a producer's retry) is then appended once, in order."""

import errno
import os
import uuid

import pytest

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication import partition as partition_module
from odradek.replication.partition import Partition
from odradek.replication.produce_validation import ProduceError
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.config import LogConfig
from tests.storage.helpers import T0, make_batch, open_log, read_records


def partition(tmp_path) -> Partition:
    log = open_log(tmp_path, LogConfig())
    log.assign_leader_epoch(5)  # as becoming leader does
    return Partition("topic", 0, uuid.uuid4(), log, leader_id=1, isr=(1,), leader_epoch=5)


def refuse_writes(monkeypatch):
    def enospc(*_args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", enospc)


def snapshot(part):
    state = part.producer_state
    return (part.log_end_offset, part.high_watermark, state.map_end_offset,
            {pid: repr(entry) for pid, entry in state.entries().items()})


def test_idempotent_retry_after_a_refused_write_is_appended_once(tmp_path, monkeypatch):
    part = partition(tmp_path)
    part.append_records_as_leader(memoryview(bytearray(make_batch(0, 2, producer_id=7, base_sequence=0))), T0)
    before = snapshot(part)
    retry = make_batch(0, 3, producer_id=7, base_sequence=2)
    refuse_writes(monkeypatch)
    with pytest.raises(ProduceError) as caught:
        part.append_records_as_leader(memoryview(bytearray(retry)), T0)
    assert caught.value.error == ErrorCode.KAFKA_STORAGE_ERROR
    assert snapshot(part) == before
    monkeypatch.undo()
    result = part.append_records_as_leader(memoryview(bytearray(retry)), T0)
    assert (result.base_offset, result.last_offset) == (2, 4)
    assert part.high_watermark == 5
    assert [r[0] for r in read_records(part.log)] == [0, 1, 2, 3, 4]


def test_fast_path_append_refused_by_the_disk(tmp_path, monkeypatch):
    part = partition(tmp_path)
    data = bytearray(make_batch(0, 2))
    info = part.prepare_plain_append(data, None)
    assert info is not None
    monkeypatch.setattr(partition_module, "append_to_active_segment",
                        lambda *a: (_ for _ in ()).throw(OSError(errno.EIO, os.strerror(errno.EIO))))
    with pytest.raises(ProduceError) as caught:
        part.append_plain(data, info)
    assert caught.value.error == ErrorCode.KAFKA_STORAGE_ERROR
    assert (part.log_end_offset, part.high_watermark) == (0, 0)
    monkeypatch.undo()
    part.append_plain(data, info)
    assert (part.log_end_offset, part.high_watermark) == (2, 2)


def test_coordinator_append_refused_by_the_disk(tmp_path, monkeypatch):
    part = partition(tmp_path)
    refuse_writes(monkeypatch)
    with pytest.raises(ProduceError) as caught:
        part.append_as_coordinator(make_batch(0, 1), T0)
    assert caught.value.error == ErrorCode.KAFKA_STORAGE_ERROR
    assert part.log_end_offset == 0
    monkeypatch.undo()
    part.log.append(make_batch(0, 1), LogAppendInfo.from_batches(make_batch(0, 1)))
    assert part.log_end_offset == 1
