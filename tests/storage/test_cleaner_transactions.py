"""Compaction and transactions: aborted data goes, committed data stays (by key, as any data),
markers stay, an aborted record never shadows a committed one of its key, and nothing at or
past the LSO (an undecided transaction) is cleaned."""

from __future__ import annotations

from odradek.coordinator.producer_state import ProducerStateManager
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from odradek.replication.transactions import index_completed
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.cleaner import LogCleaner
from odradek.storage.config import LogConfig
from odradek.storage.cleaner_transactions import AbortedBatches
from odradek.storage.transaction_index import AbortedTxn
from tests.storage.helpers import T0, open_log, read_records

COMPACT = LogConfig(segment_bytes=400, cleanup_policy=("compact",))


class TxnLog:
    """A log with the producer-state bookkeeping a partition does."""

    def __init__(self, log) -> None:
        self.log = log
        self.state = ProducerStateManager()
        self.seq: dict[int, int] = {}
        log.cleanable_limit = lambda: self.lso

    @property
    def lso(self) -> int:
        first = self.state.first_unstable_offset(self.log.log_end_offset)
        return self.log.log_end_offset if first is None else first

    def _append(self, data: bytes, marker=None) -> None:
        info = LogAppendInfo.from_batches(data)
        self.log.append(data, info)
        from odradek.records.batch import read_header
        completed = self.state.update(read_header(data), marker=marker)
        if completed is not None:
            index_completed(self.log, completed)

    def write(self, kvs, pid: int = -1) -> None:
        seq = self.seq.get(pid, 0)
        spec = BatchSpec(base_offset=self.log.log_end_offset, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                         base_sequence=seq if pid >= 0 else -1, is_transactional=pid >= 0)
        builder = BatchBuilder(spec)
        for k, v in kvs:
            builder.append(T0, k, v)
        self.seq[pid] = seq + len(kvs)
        self._append(builder.build())

    def end(self, pid: int, commit: bool) -> None:
        kind = COMMIT if commit else ABORT
        self._append(build_end_txn_marker_batch(kind, 0, producer_id=pid, producer_epoch=0, timestamp=T0,
                                                base_offset=self.log.log_end_offset),
                     EndTransactionMarker(kind, 0))


def values(log) -> dict[bytes, bytes]:
    out = {}
    for _, k, v in read_records(log):
        out[k] = v
    return out


def test_aborted_data_is_removed_committed_kept_and_markers_stay(tmp_path):
    t = TxnLog(open_log(tmp_path, COMPACT))
    t.write([(b"k%d" % i, b"plain") for i in range(4)])
    t.write([(b"k0", b"committed"), (b"k1", b"committed")], pid=1)
    t.write([(b"k2", b"aborted"), (b"k3", b"aborted")], pid=2)
    t.end(1, commit=True)
    t.end(2, commit=False)
    for r in range(6):  # other keys, so the transactional segments are not the active one
        t.write([(b"z%d" % r, b"filler")])
    t.log.roll()
    assert LogCleaner().clean(t.log, T0 + 10, force=True) is not None
    got = values(t.log)
    assert (got[b"k0"], got[b"k1"], got[b"k2"], got[b"k3"]) == (b"committed", b"committed", b"plain", b"plain")
    assert b"aborted" not in [v for _, _, v in read_records(t.log)]
    controls = [h for s in t.log.segments for _, h in s.iter_batches() if h.is_control]
    assert len(controls) == 2
    # The producer's last batch is kept empty (its sequence survives a reload).
    emptied = [h for s in t.log.segments for _, h in s.iter_batches() if h.producer_id == 2 and not h.is_control]
    assert [h.records_count for h in emptied] == [0]


def test_an_undecided_transaction_is_never_cleaned(tmp_path):
    t = TxnLog(open_log(tmp_path, COMPACT))
    t.write([(b"a", b"old")])
    t.write([(b"a", b"open-txn")], pid=5)  # never decided here
    for r in range(10):
        t.write([(b"a", b"later%d" % r)])
    t.log.roll()
    lso = t.lso
    assert lso == 1
    LogCleaner().clean(t.log, T0 + 10, force=True)
    offsets = [o for o, _, _ in read_records(t.log)]
    assert 0 in offsets and 1 in offsets  # the range below the LSO holds only offset 0's segment
    # Once committed, the same data is cleaned like any other.
    t.end(5, commit=True)
    t.write([(b"a", b"last")])
    t.log.roll()
    LogCleaner().clean(t.log, T0 + 10, force=True)
    assert values(t.log)[b"a"] == b"last"
    assert 1 not in [o for o, _, _ in read_records(t.log)]


def test_aborted_batches_follow_each_producer_until_its_marker():
    from odradek.records.batch import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader

    def h(offset, pid, control=False, transactional=True):
        attrs = (TRANSACTIONAL_BIT if transactional else 0) | (CONTROL_BIT if control else 0)
        return BatchHeader(offset, 100, 0, 2, 0, attrs, 0, T0, T0, pid, 0, 0, 1)

    walk = AbortedBatches([AbortedTxn(2, 3, 6, 7), AbortedTxn(1, 1, 4, 5)])
    assert [walk.is_aborted(x) for x in (h(0, 1), h(1, 1), h(2, 9, transactional=False), h(3, 2), h(4, 1, True),
                                         h(5, 1), h(6, 2, True), h(7, 2))] == [
        False, True, False, True, False, False, False, False]
