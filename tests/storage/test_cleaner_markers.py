"""Compaction removes transaction markers when safe (Kafka's rule): a marker stays while a
batch of its transaction remains before it, then gets a delete horizon (``delete.retention.ms``
on) and goes at a pass past it; a producer's last data batch and last marker stay; the
``.txnindex`` keeps an aborted transaction's entry only while its data does; a read_committed
reader sees the same committed records across passes, and the producer state rebuilt from the
cleaned log is the live one."""

from __future__ import annotations

import random

from odradek.coordinator.producer_state import ProducerStateManager
from odradek.records.batch import DELETE_HORIZON_BIT
from odradek.records.control import ABORT
from odradek.records.reader import RecordBatch
from odradek.replication.transactions import marker_reader, rebuild_producer_state
from odradek.storage.cleaner import LogCleaner
from odradek.storage.config import LogConfig
from odradek.storage.transaction_index import collect_aborted
from tests.storage.helpers import T0, open_log
from tests.storage.test_cleaner_transactions import TxnLog

RETENTION = 100
CONFIG = LogConfig(segment_bytes=400, cleanup_policy=("compact",), delete_retention_ms=RETENTION)


def markers(log) -> dict[int, bool]:
    """Offset of each control batch -> whether it carries a delete horizon."""
    return {h.base_offset: bool(h.attributes & DELETE_HORIZON_BIT)
            for s in log.segments for _, h in s.iter_batches() if h.is_control}


def index_entries(log) -> list[tuple[int, int, int]]:
    return [(e.producer_id, e.first_offset, e.last_offset) for s in log.segments for e in s.txn_index.entries()]


def batches(log):
    for segment in log.segments:
        for position, header in segment.iter_batches():
            yield header, RecordBatch(segment.handle().read_exact(position, header.size))


def read_committed(log) -> list[tuple[int, bytes, bytes]]:
    """What a read_committed consumer reading the whole log is given, as Java's fetcher
    does it: the aborted transactions of the range (``.txnindex``) make a producer's
    transactional data skipped from their first offset until that producer's ABORT marker."""
    pending = sorted(collect_aborted(log.segments, 0, log.log_end_offset), key=lambda t: t.first_offset)
    aborting: set[int] = set()
    out = []
    for header, batch in batches(log):
        while pending and pending[0].first_offset <= header.last_offset:
            aborting.add(pending.pop(0).producer_id)
        if header.is_control:
            if batch.records() and batch.end_txn_marker().type == ABORT:
                aborting.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborting:
            continue
        out += [(r.offset, r.key, r.value) for r in batch.records()]
    return out


def latest(records) -> dict[bytes, bytes]:
    return {k: v for _, k, v in records}


def fill_and_roll(t: TxnLog, n: int = 6) -> None:
    for i in range(n):  # other keys, so the transactions are not in the active segment
        t.write([(b"filler%d" % i, b"x")])
    t.log.roll()


def test_a_committed_marker_goes_once_its_data_went_and_delete_retention_passed(tmp_path):
    t = TxnLog(open_log(tmp_path, CONFIG))
    t.write([(b"k0", b"c1")], pid=1)  # 0
    t.end(1, commit=True)  # 1
    t.write([(b"k0", b"plain")])  # 2: shadows offset 0
    t.write([(b"k1", b"c2")], pid=1)  # 3: producer 1's last data batch
    t.end(1, commit=True)  # 4
    fill_and_roll(t)
    view = latest(read_committed(t.log))
    cleaner = LogCleaner()
    cleaner.clean(t.log, T0 + 10, force=True)  # offset 0 goes: its marker stays, as it was
    assert markers(t.log) == {1: False, 4: False}
    assert 0 not in [h.base_offset for h, _ in batches(t.log)]
    cleaner.clean(t.log, T0 + 20, force=True)  # no data before it now: a horizon
    assert markers(t.log) == {1: True, 4: False}
    cleaner.clean(t.log, T0 + 20 + RETENTION - 1, force=True)
    assert markers(t.log) == {1: True, 4: False}
    assert latest(read_committed(t.log)) == view
    cleaner.clean(t.log, T0 + 20 + RETENTION, force=True)
    assert markers(t.log) == {4: False}
    assert latest(read_committed(t.log)) == view == {**view, b"k0": b"plain", b"k1": b"c2"}


def test_an_abort_marker_and_its_index_entry_go_after_its_data(tmp_path):
    t = TxnLog(open_log(tmp_path, CONFIG))
    t.write([(b"k2", b"aborted")], pid=2)  # 0
    t.end(2, commit=False)  # 1
    t.write([(b"k3", b"ok")], pid=2)  # 2
    t.end(2, commit=True)  # 3
    fill_and_roll(t)
    assert index_entries(t.log) == [(2, 0, 1)]
    cleaner = LogCleaner()
    cleaner.clean(t.log, T0 + 10, force=True)  # the aborted data goes; marker and entry stay
    assert markers(t.log) == {1: False, 3: False} and index_entries(t.log) == [(2, 0, 1)]
    cleaner.clean(t.log, T0 + 20, force=True)  # nothing of it is left: entry gone, horizon set
    assert markers(t.log) == {1: True, 3: False} and index_entries(t.log) == []
    assert latest(read_committed(t.log))[b"k3"] == b"ok"
    cleaner.clean(t.log, T0 + 20 + RETENTION, force=True)
    assert markers(t.log) == {3: False} and index_entries(t.log) == []
    assert b"aborted" not in [v for _, _, v in read_committed(t.log)]


def test_a_producers_last_data_batch_keeps_its_marker_and_entry(tmp_path):
    t = TxnLog(open_log(tmp_path, CONFIG))
    t.write([(b"k", b"committed")], pid=3)  # 0
    t.write([(b"k", b"plain")])  # 1: shadows it
    t.end(3, commit=True)  # 2
    t.write([(b"j", b"aborted")], pid=4)  # 3: producer 4's last data batch
    t.end(4, commit=False)  # 4
    fill_and_roll(t)
    cleaner = LogCleaner()
    for now in (T0 + 10, T0 + 20, T0 + 10 * RETENTION, T0 + 20 * RETENTION):
        cleaner.clean(t.log, now, force=True)
        assert markers(t.log) == {2: False, 4: False}
        assert index_entries(t.log) == [(4, 3, 4)]
        kept = {h.base_offset: h.records_count for h, _ in batches(t.log) if h.producer_id in (3, 4)}
        assert kept == {0: 0, 2: 1, 3: 0, 4: 1}  # emptied, kept for the producers' sequences
    assert latest(read_committed(t.log))[b"k"] == b"plain"


def test_a_producers_last_marker_stays_until_a_later_one(tmp_path):
    t = TxnLog(open_log(tmp_path, CONFIG))
    t.end(5, commit=False)  # 0: a marker without data here (its epoch is the producer's newest)
    fill_and_roll(t)
    cleaner = LogCleaner()
    for now in (T0 + 10, T0 + 20, T0 + 10 * RETENTION):
        cleaner.clean(t.log, now, force=True)
        assert markers(t.log) == {0: False}
    t.end(5, commit=True)  # 7
    fill_and_roll(t)
    cleaner.clean(t.log, T0 + 20 * RETENTION, force=True)
    assert markers(t.log) == {0: True, 7: False}
    cleaner.clean(t.log, T0 + 21 * RETENTION, force=True)
    assert markers(t.log) == {7: False}


def _random_transactions(t: TxnLog, rng: random.Random) -> None:
    """Interleaved transactions of 4 producers, committed or aborted, and plain writes."""
    keys = [b"key%d" % i for i in range(6)]
    open_txns: set[int] = set()
    for step in range(120):
        pid = rng.randrange(-1, 4)
        if pid >= 0 and pid in open_txns and rng.random() < 0.3:
            t.end(pid, commit=rng.random() < 0.6)
            open_txns.discard(pid)
            continue
        value = b"v%d" % step
        t.write([(rng.choice(keys), value) for _ in range(rng.randrange(1, 3))], pid=pid)
        if pid >= 0:
            open_txns.add(pid)
        if rng.random() < 0.05:
            t.end(rng.randrange(10, 12), commit=True)  # a marker without data
    for pid in sorted(open_txns):
        t.end(pid, commit=rng.random() < 0.5)


def completed_transactions(log) -> tuple[ProducerStateManager, dict[tuple[int, int], tuple[int, bool]]]:
    """The producer state rebuilt from ``log`` and the transactions its markers complete:
    (producer id, marker offset) -> (first offset, aborted)."""
    state, done = ProducerStateManager(), []
    state.rebuild(log.batch_headers(0), marker_of=marker_reader(log), on_complete=done.append)
    return state, {(c.producer_id, c.last_offset): (c.first_offset, c.is_aborted) for c in done}


def test_read_committed_sees_the_same_records_and_producer_state_survives(tmp_path):
    for seed in range(4):
        t = TxnLog(open_log(tmp_path / str(seed), CONFIG))
        _random_transactions(t, random.Random(seed))
        fill_and_roll(t)
        records = read_committed(t.log)
        view, before_markers = latest(records), markers(t.log)
        _, txns = completed_transactions(t.log)
        cleaner = LogCleaner()
        for now in range(T0 + 10, T0 + 4 * RETENTION, RETENTION // 3):
            cleaner.clean(t.log, now, force=True)
            after = read_committed(t.log)
            assert latest(after) == view and set(after) <= set(records)
            state, done = completed_transactions(t.log)
            for key, (first, aborted) in done.items():  # each one a transaction of the log, or its end
                assert key in txns and txns[key][1] == aborted and first >= txns[key][0]
            assert not state.ongoing_transactions()
            assert {p: (e.epoch, e.last_seq, e.coordinator_epoch) for p, e in state.entries().items()} == {
                p: (e.epoch, e.last_seq, e.coordinator_epoch) for p, e in t.state.entries().items()}
            entries = index_entries(t.log)
            rebuild_producer_state(ProducerStateManager(), t.log, 0)  # re-indexes the aborted txns
            assert index_entries(t.log) == entries
        assert len(markers(t.log)) < len(before_markers)
        assert not any(markers(t.log).values())  # every horizon passed: what is left stays
