"""``replication-offset-checkpoint``: high watermarks written per log directory at shutdown
(and on demand), read back when the partitions are hosted again."""

import uuid

from odradek.replication.high_watermark_checkpoint import (
    HIGH_WATERMARK_CHECKPOINT,
    initial_high_watermark,
    read_high_watermarks,
    write_high_watermarks,
)
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0, make_batch


def _start(dirs, broker_id: int = 1):
    clock = FakeClock(T0)
    manager = LogManager([str(d) for d in dirs], LogConfig(), clock)
    manager.startup()
    return ReplicaManager(broker_id, manager, clock)


def test_format_is_kafkas_and_each_directory_has_its_file(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    write_high_watermarks([str(a), str(b)], [(("t", 0), str(a), 12), (("t", 1), str(a), 3)])
    assert (a / HIGH_WATERMARK_CHECKPOINT).read_text() == "0\n2\nt 0 12\nt 1 3\n"
    assert (b / HIGH_WATERMARK_CHECKPOINT).read_text() == "0\n0\n"
    assert read_high_watermarks([str(a), str(b)]) == {("t", 0): 12, ("t", 1): 3}


def test_a_directory_whose_checkpoint_cannot_be_written_fails_and_the_others_are_written(tmp_path):
    """Kafka's OffsetCheckpointFile: the failing directory goes offline, the others' files
    are still written, and an offline directory is not written again."""
    import errno

    import pytest

    a, gone = tmp_path / "a", tmp_path / "gone"
    replicas = _start([a, gone])
    failed: list[str] = []
    replicas.log_manager.failure_channel.set_listener(failed.append)
    gone.rename(tmp_path / "elsewhere")  # writes into it now fail with ENOENT
    with pytest.raises(OSError) as raised:
        replicas.checkpoint_high_watermarks([(("t", 0), str(a), 12), (("t", 1), str(gone), 3)])
    assert raised.value.errno == errno.ENOENT
    assert failed == [str(gone)]
    assert read_high_watermarks([str(a)]) == {("t", 0): 12}
    replicas.checkpoint_high_watermarks([(("t", 0), str(a), 13), (("t", 1), str(gone), 4)])  # skips it
    assert read_high_watermarks([str(a)]) == {("t", 0): 13}


def test_a_malformed_file_counts_as_empty(tmp_path):
    (tmp_path / HIGH_WATERMARK_CHECKPOINT).write_text("0\n3\nt 0 1\n")
    assert read_high_watermarks([str(tmp_path)]) == {}


def test_initial_high_watermark_stays_within_the_log():
    assert initial_high_watermark(None, 0, 10) == 0
    assert initial_high_watermark(7, 0, 10) == 7
    assert initial_high_watermark(15, 0, 10) == 10
    assert initial_high_watermark(2, 5, 10) == 5


def test_a_restarted_leader_starts_from_its_checkpointed_high_watermark(tmp_path):
    """Two replicas, one follower caught up to 4 of the leader's 6: the high watermark, 4,
    survives a restart, not 0 and not the log end offset 6."""
    rm = _start([tmp_path])
    part = rm.make_leader("t", 0, uuid.uuid4(), (1, 2), (1, 2), 0, LogConfig())
    rm.append(part, memoryview(bytearray(make_batch(0, 4))))
    part.update_follower_fetch_state(2, 4, 0, T0)
    rm.append(part, memoryview(bytearray(make_batch(0, 2))))
    assert (part.high_watermark, part.log_end_offset) == (4, 6)
    rm.shutdown()
    rm.log_manager.shutdown()
    assert OffsetCheckpointFile(str(tmp_path / HIGH_WATERMARK_CHECKPOINT)).read() == {("t", 0): 4}

    again = _start([tmp_path])
    assert again.checkpointed_high_watermarks == {("t", 0): 4}
    follower = again.hosted_partition("t", 0, part.topic_id, LogConfig())
    assert follower.high_watermark == 4 and follower.log_end_offset == 6
    again.log_manager.shutdown()


def test_checkpoint_high_watermarks_writes_the_partitions_directory(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    rm = _start([a, b])
    first = rm.make_leader("t", 0, uuid.uuid4(), (1,), (1,), 0, LogConfig())
    second = rm.make_leader("t", 1, first.topic_id, (1,), (1,), 0, LogConfig())
    rm.append(first, memoryview(bytearray(make_batch(0, 3))))
    rm.checkpoint_high_watermarks()
    found = {**OffsetCheckpointFile(str(a / HIGH_WATERMARK_CHECKPOINT)).read(),
             **OffsetCheckpointFile(str(b / HIGH_WATERMARK_CHECKPOINT)).read()}
    assert found == {("t", 0): 3, ("t", 1): 0}
    assert second.high_watermark == 0
    rm.log_manager.shutdown()


def test_an_unchanged_checkpoint_is_not_rewritten(tmp_path, monkeypatch):
    """An idle broker rewrites (and fsyncs) nothing every replica.high.watermark.checkpoint.interval.ms:
    the same entries as the last checkpoint written are skipped, a moved high watermark is
    written."""
    import odradek.replication.replica_manager as rm_module
    rm = _start([tmp_path])
    part = rm.make_leader("t", 0, uuid.uuid4(), (1,), (1,), 0, LogConfig())
    writes = []
    real = rm_module.write_high_watermarks

    def counting(dirs, entries):
        writes.append(list(entries))
        return real(dirs, entries)
    monkeypatch.setattr(rm_module, "write_high_watermarks", counting)
    rm.checkpoint_high_watermarks()
    rm.checkpoint_high_watermarks()
    assert len(writes) == 1
    rm.append(part, memoryview(bytearray(make_batch(0, 2))))
    rm.checkpoint_high_watermarks()
    assert len(writes) == 2 and writes[1][0][2] == 2
    assert read_high_watermarks([str(tmp_path)]) == {("t", 0): 2}
    rm.log_manager.shutdown()


def test_the_periodic_checkpoint_reads_nothing_while_nothing_changed(tmp_path):
    """``high_watermarks_if_changed``: the entries after a partition was hosted, notified
    (an append moved its high watermark) or removed; None in between."""
    rm = _start([tmp_path])
    part = rm.make_leader("t", 0, uuid.uuid4(), (1,), (1,), 0, LogConfig())
    assert [e[2] for e in rm.high_watermarks_if_changed()] == [0]
    assert rm.high_watermarks_if_changed() is None
    rm.append(part, memoryview(bytearray(make_batch(0, 3))))
    assert [e[2] for e in rm.high_watermarks_if_changed()] == [3]
    assert rm.high_watermarks_if_changed() is None
    rm.remove("t", 0, delete=False)
    assert rm.high_watermarks_if_changed() == []
    rm.log_manager.shutdown()
