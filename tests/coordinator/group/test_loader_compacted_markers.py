"""A compacted ``__consumer_offsets`` partition, whose cleaner removes transaction markers once
their transactions' data went and ``delete.retention.ms`` passed, replays to the same
committed and pending offsets as before, pass after pass."""

from __future__ import annotations

from odradek.storage.cleaner import LogCleaner
from odradek.storage.config import LogConfig
from tests.coordinator.group.log_harness import LoggingHarness, loaded
from tests.coordinator.group.test_loader_transactions import commit, stable, txn_commit
from tests.storage.helpers import T0, open_log

RETENTION = 50
WANTED = (("t", [0, 1, 2, 3, 4, 5]),)


def control_offsets(plog) -> list[int]:
    return [h.base_offset for s in plog.segments for _, h in s.iter_batches() if h.is_control]


def test_compacted_offsets_partition_replays_to_the_same_offsets(tmp_path):
    plog = open_log(tmp_path, LogConfig(cleanup_policy=("compact",), segment_bytes=400,
                                        delete_retention_ms=RETENTION))
    h = LoggingHarness(plog)
    for rnd in range(3):  # producers 7 and 8 commit, 9 aborts, plain commits overwrite them
        txn_commit(h, 7, [("t", 0, 10 + rnd), ("t", 1, 20 + rnd)])
        txn_commit(h, 8, [("t", 2, 30 + rnd)])
        txn_commit(h, 9, [("t", 3, 40 + rnd)])
        commit(h, [("t", 1, 100 + rnd)])
        h.marker(7, committed=True)
        h.marker(9, committed=False)
        commit(h, [("t", 2, 200 + rnd)])
        h.marker(8, committed=True)
        commit(h, [("t", 0, 300 + rnd), ("t", 3, 400 + rnd)])
    txn_commit(h, 11, [("t", 4, 70)])  # stays (newest for its key) after its marker went
    h.marker(11, committed=True)
    txn_commit(h, 11, [("t", 5, 71)])  # then aborted: replayed without the marker above,
    h.marker(11, committed=False)  # offset 70 would be taken for pending and be aborted too
    for i in range(8):
        commit(h, [("other", i, i)])
    txn_commit(h, 7, [("t", 0, 50)])  # producer 7's last transaction: committed
    h.marker(7, committed=True)
    plog.roll()
    undecided = plog.log_end_offset
    txn_commit(h, 10, [("t", 3, 60)])  # still open: at the LSO, never cleaned
    plog.cleanable_limit = lambda: undecided
    expected = stable(h.shard, wanted=WANTED)
    assert expected[("t", 4)] == 70 and stable(loaded(plog)[0], wanted=WANTED) == expected
    before = control_offsets(plog)
    cleaner = LogCleaner()
    for now in (T0 + 10, T0 + 20, T0 + 20 + RETENTION // 2, T0 + 20 + RETENTION, T0 + 40 + 2 * RETENTION):
        cleaner.clean(plog, now, force=True)
        shard, stats = loaded(plog)
        assert stats.skipped == 0 and stable(shard, wanted=WANTED) == expected
        shard.replay_end_transaction(10, True)
        assert stable(shard)[("t", 3)] == 60
    after = control_offsets(plog)
    assert len(after) < len(before) and set(after) <= set(before)
