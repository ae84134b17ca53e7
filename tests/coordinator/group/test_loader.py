"""Loading a shard from a real partition log, before and after compaction."""

from __future__ import annotations

from odradek.coordinator.group import loader
from odradek.coordinator.group.group_requests import (
    CommitPartition,
    CommitRequest,
    LeavingMember,
)
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.cleaner import LogCleaner
from odradek.storage.config import LogConfig
from tests.coordinator.group.log_harness import LoggingHarness, loaded
from tests.storage.helpers import T0, open_log


def commit(h, group, topic, partition, offset):
    req = CommitRequest(group, partitions=(CommitPartition(topic, partition, offset),))
    h.apply(h.shard.commit_offsets(req))


def state(shard):
    groups = {g: (grp.state.value, grp.generation_id, sorted(grp.members)) for g, grp in shard.groups.groups.items()}
    return groups, {g: dict(o) for g, o in shard.offsets.offsets.items()}


def test_load_rebuilds_groups_and_offsets(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "READ_BYTES", 150)  # several reads
    plog = open_log(tmp_path, LogConfig(cleanup_policy=("compact",)))
    h = LoggingHarness(plog)
    members = h.joined_group("live", n=2, session_ms=60_000)
    for i in range(20):
        commit(h, "standalone", "t", i % 3, i)
    commit(h, "gone", "t", 0, 1)
    h.apply(h.shard.delete_groups(["gone"]))
    shard, stats = loaded(plog)
    assert stats.end_offset == plog.log_end_offset and stats.skipped == 0
    assert state(shard) == state(h.shard)
    assert state(shard)[0]["live"] == ("Stable", 1, sorted(members))
    assert "gone" not in shard.groups.groups


def test_load_after_compaction_gives_the_same_state(tmp_path):
    plog = open_log(tmp_path, LogConfig(cleanup_policy=("compact",), segment_bytes=400, delete_retention_ms=0))
    h = LoggingHarness(plog)
    [a] = h.joined_group("g", session_ms=60_000)
    for i in range(60):
        commit(h, "s", "t", i % 4, i)
    h.apply(h.shard.leave_group("g", [LeavingMember(a)]))
    h.tick()
    commit(h, "x", "t", 0, 1)
    h.apply(h.shard.delete_groups(["x"]))
    commit(h, "s", "t", 0, 1000)  # the active segment holds the newest commit
    before = plog.size
    cleaner = LogCleaner()
    assert cleaner.clean(plog, T0 + 10, force=True) is not None
    cleaner.clean(plog, T0 + 20, force=True)  # tombstones past their horizon go too
    assert plog.size < before
    shard, _ = loaded(plog)
    assert state(shard) == state(h.shard)


def test_bad_records_are_skipped(tmp_path):
    plog = open_log(tmp_path)
    builder = BatchBuilder(BatchSpec(base_offset=0))
    builder.append(T0, b"\x00\x01garbage", b"")
    builder.append(T0, b"\x00\x07future-record-type", b"")
    data = builder.build()
    plog.append(data, LogAppendInfo.from_batches(data))
    h = LoggingHarness(plog)
    commit(h, "g", "t", 0, 5)
    shard, stats = loaded(plog)
    assert stats.records == 1 and stats.skipped == 2
    assert shard.offsets.offsets["g"][("t", 0)].offset == 5
