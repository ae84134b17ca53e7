"""Producer state after a log truncation: rebuilt from the latest snapshot at or below the new
log end plus a replay of the log from there (``ProducerStateManager.reloaded`` + ``rebuild``,
Kafka's ``truncateAndReload``), never patched. The rebuilt state is the one a replay of the
whole remaining log gives, so an open transaction stays open, a producer whose cached batches
were all cut keeps its epoch and last sequence, and a transaction whose marker was cut is open
again."""

from __future__ import annotations

from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator import producer_state
from odradek.coordinator.producer_snapshot import MAX_SNAPSHOTS
from odradek.coordinator.producer_state import ProducerStateManager
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.batch import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader
from odradek.records.control import ABORT, COMMIT, EndTransactionMarker

T0 = 1_700_000_000_000


def header(pid, epoch, seq, count=1, transactional=False, control=False):
    attributes = (TRANSACTIONAL_BIT if transactional or control else 0) | (CONTROL_BIT if control else 0)
    return BatchHeader(0, 100, 0, 2, 0, attributes, count - 1, T0, T0, pid, epoch, seq, count)


class Log:
    """A partition log stand-in: batches at consecutive offsets with the producer state beside
    it; ``truncate`` cuts it as ``Log.truncate_to`` does and rebuilds the state as
    ``replication/producer_state_reload.py`` does, counting the headers it replays."""

    def __init__(self, log_start_offset: int = 0) -> None:
        self.state = ProducerStateManager(log_start_offset)
        self.log_start_offset = log_start_offset
        self.end = log_start_offset
        self.batches: list[tuple[BatchHeader, EndTransactionMarker | None]] = []
        self.replayed = 0

    def _append(self, h: BatchHeader, marker=None) -> None:
        h = h._replace(base_offset=self.end)
        self.batches.append((h, marker))
        self.state.update(h, marker=marker)
        self.end = h.next_offset

    def produce(self, pid, epoch, seq, count=1, transactional=False):
        """A client batch, appended if the state accepts it; the verdict."""
        h = header(pid, epoch, seq, count, transactional)
        verdict = self.state.check(h)
        if verdict.ok:
            self._append(h)
        return verdict

    def plain(self, count=1) -> None:
        self._append(header(-1, -1, -1, count))

    def end_txn(self, pid, epoch, kind=COMMIT, coordinator_epoch=0):
        verdict = self.state.check_marker(pid, epoch, coordinator_epoch)
        if verdict.ok:
            self._append(header(pid, epoch, -1, control=True), EndTransactionMarker(kind, coordinator_epoch))
        return verdict

    def _marker_of(self, h):
        return next(m for b, m in self.batches if b.base_offset == h.base_offset)

    def truncate(self, offset: int) -> None:
        self.batches = [(h, m) for h, m in self.batches if h.last_offset < offset]
        self.end = self.batches[-1][0].next_offset if self.batches else self.log_start_offset
        self.state, start = self.state.reloaded(self.end, self.log_start_offset)
        replay = [h for h, _ in self.batches if h.last_offset >= start]
        self.replayed = len(replay)
        self.state.rebuild(replay, marker_of=self._marker_of)
        if self.state.map_end_offset < self.end:
            self.state.advance(self.end)

    def replayed_from_scratch(self) -> ProducerStateManager:
        """The state a replay of the whole log gives (a restart without a snapshot)."""
        state = ProducerStateManager(self.log_start_offset)
        state.rebuild([h for h, _ in self.batches], marker_of=self._marker_of)
        state.advance(self.end)
        return state


def snapshot_interval(batches: int):
    return mock.patch.object(producer_state, "SNAPSHOT_INTERVAL_BATCHES", batches)


def test_an_open_transaction_whose_cached_batches_were_all_cut_stays_open():
    log = Log()
    for seq in range(6):  # offsets 0-5; the entry caches the last 5 (offsets 1-5)
        assert log.produce(1, 0, seq, transactional=True).ok
    log.truncate(1)
    entry = log.state.entry(1)
    assert entry is not None and entry.current_txn_first_offset == 0
    assert dict(log.state.ongoing_transactions()) == {1: 0}
    assert log.state.first_unstable_offset(1) == 0  # the LSO stays at 0
    assert log.state.cached_first_unstable_offset == 0
    assert log.state.check(header(1, 0, 0, transactional=True)).is_duplicate
    assert log.state.check(header(1, 0, 1, transactional=True)).ok
    assert log.state.check(header(1, 0, 1)).error == ErrorCode.INVALID_TXN_STATE


def test_a_producer_whose_cached_batches_were_all_cut_keeps_its_epoch_and_last_sequence():
    log = Log()
    assert log.produce(1, 0, 0).ok
    assert log.produce(1, 3, 0).ok  # epoch 3 from offset 1
    for seq in range(1, 10):  # offsets 2-10: the entry caches seq 5-9 (offsets 6-10)
        assert log.produce(1, 3, seq).ok
        log.plain()
    cut = 2 * 5  # offset 10: seq 5 and later are cut, seq 4 (offset 8) is the last one kept
    log.truncate(cut)
    entry = log.state.entry(1)
    assert (entry.epoch, entry.last_seq, entry.last_offset) == (3, 4, 8)
    assert log.state.check(header(1, 3, 4)).is_duplicate
    assert log.state.check(header(1, 3, 6)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.state.check(header(1, 2, 5)).error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.state.check(header(1, 0, 0)).error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.produce(1, 3, 5).ok  # the producer's retry of the first cut batch


def test_a_committed_transaction_whose_marker_was_cut_is_open_again():
    log = Log()
    assert log.produce(1, 0, 0, count=2, transactional=True).ok  # offsets 0-1
    assert log.end_txn(1, 0, COMMIT, coordinator_epoch=5).ok  # offset 2
    log.state.on_high_watermark(3)  # the commit replicated: the LSO passed it
    for seq in range(2, 8):  # six more batches outside a transaction: offsets 3-8
        assert log.produce(1, 0, seq).ok
    assert log.state.first_unstable_offset(9) is None
    log.truncate(2)  # an unclean leader election cut the marker
    assert dict(log.state.ongoing_transactions()) == {1: 0}
    assert log.state.first_unstable_offset(2) == 0
    entry = log.state.entry(1)
    assert entry.coordinator_epoch == -1 and entry.last_seq == 1
    assert log.state.check_marker(1, 0, 0).ok  # the marker's coordinator epoch 5 went with it


def test_a_transaction_begun_after_the_offset_goes_and_one_aborted_before_stays_done():
    log = Log()
    assert log.produce(1, 0, 0, transactional=True).ok  # 0
    assert log.end_txn(1, 0, ABORT).ok  # 1
    assert log.produce(2, 0, 0, transactional=True).ok  # 2
    log.truncate(2)
    assert dict(log.state.ongoing_transactions()) == {}
    assert log.state.entry(2) is None
    assert log.state.first_unstable_offset() == 0  # the abort at 1 is not replicated yet
    assert log.state.first_unstable_offset(2) is None


def test_snapshots_above_the_offset_are_deleted_and_the_replay_starts_at_the_latest_below():
    log = Log()
    with snapshot_interval(3):
        for seq in range(10):
            assert log.produce(1, 0, seq).ok
        assert log.state.snapshot_offsets() == [2, 5, 8]  # taken before the 3rd, 6th, 9th update
        log.truncate(7)
    assert log.state.snapshot_offsets() == [2, 5]
    assert log.replayed == 2  # offsets 5 and 6: not the whole log
    assert log.state.snapshot() == log.replayed_from_scratch().snapshot()
    log.truncate(1)
    assert log.state.snapshot_offsets() == []
    assert log.replayed == 1 and log.state.entry(1).last_seq == 0


def test_a_state_without_producers_is_not_replayed():
    log = Log()
    for _ in range(5):
        log.plain(2)
    log.truncate(4)
    assert log.replayed == 0 and len(log.state) == 0 and log.state.map_end_offset == 4


def test_a_log_cut_to_its_start_offset_starts_empty_without_snapshots():
    log = Log(log_start_offset=10)
    assert log.produce(1, 0, 0).ok
    log.state.take_snapshot()
    assert log.produce(1, 0, 1).ok
    log.truncate(10)
    assert len(log.state) == 0 and log.state.snapshot_offsets() == []
    assert log.state.map_end_offset == 10


def test_a_snapshot_below_the_log_start_offset_is_not_used():
    log = Log()
    assert log.produce(1, 0, 0).ok  # offset 0
    assert log.produce(1, 0, 1).ok  # offset 1
    log.state.take_snapshot()  # at 2
    for seq in range(2, 5):  # offsets 2-4
        assert log.produce(1, 0, seq).ok
    log.log_start_offset = 3  # DeleteRecords: offsets 0-2 are gone, the batch at 2 with them
    log.batches = log.batches[3:]
    log.truncate(4)
    assert log.replayed == 1  # from the log start offset: the snapshot at 2 would need offset 2
    assert log.state.snapshot() == log.replayed_from_scratch().snapshot()
    assert log.state.entry(1).batches[0].first_seq == 3


def test_snapshots_are_pruned_by_the_high_watermark_and_bounded():
    state = ProducerStateManager()
    with snapshot_interval(2):
        for offset in range(2 * (MAX_SNAPSHOTS + 4)):
            state.update(header(1, 0, offset)._replace(base_offset=offset))
    offsets = state.snapshot_offsets()
    assert len(offsets) == MAX_SNAPSHOTS and offsets[0] == 1  # the oldest and the newest kept
    assert offsets[1:] == list(range(offsets[-1] - 2 * (MAX_SNAPSHOTS - 2), offsets[-1] + 1, 2))
    state.on_high_watermark(offsets[3] + 1)
    assert state.snapshot_offsets() == offsets[3:]


def test_a_loaded_snapshot_is_a_base_for_truncation():
    log = Log()
    for seq in range(3):
        assert log.produce(1, 0, seq).ok
    log.state = ProducerStateManager.load(log.state.snapshot())  # a restart
    for seq in range(3, 9):
        assert log.produce(1, 0, seq).ok
    log.truncate(4)
    assert log.replayed == 1 and log.state.entry(1).last_seq == 3


# -- any history, any truncation: the state of a replay of what is left -------------------------

_OPS = st.lists(
    st.tuples(st.sampled_from(["produce"] * 4 + ["txn"] * 3 + ["commit", "abort", "bump", "plain", "hw", "truncate"]),
              st.integers(1, 3), st.integers(0, 40)),
    min_size=10, max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(ops=_OPS, interval=st.integers(2, 8))
def test_truncation_gives_the_state_of_a_replay_of_the_remaining_log(ops, interval):
    log = Log()
    epochs, seqs = {}, {}
    hw = 0
    with snapshot_interval(interval):
        for op, pid, n in ops:
            epoch = epochs.setdefault(pid, 0)
            if op in ("produce", "txn"):
                entry = log.state.entry(pid)
                seq = 0 if entry is None or entry.epoch != epoch else (entry.last_seq + 1)
                log.produce(pid, epoch, seq, count=1 + n % 3, transactional=op == "txn")
            elif op in ("commit", "abort"):
                log.end_txn(pid, epoch, COMMIT if op == "commit" else ABORT, coordinator_epoch=n % 3)
            elif op == "bump" and not log.state.in_transaction(pid):
                epochs[pid] = epoch + 1
            elif op == "plain":
                log.plain(1 + n % 3)
            elif op == "hw":
                hw = max(hw, min(n, log.end))
                log.state.on_high_watermark(hw)
            elif op == "truncate":
                log.truncate(n % (log.end + 1))
                hw = min(hw, log.end)
                expected = log.replayed_from_scratch()
                assert log.state.snapshot() == expected.snapshot()
                assert dict(log.state.ongoing_transactions()) == dict(expected.ongoing_transactions())
                assert log.state.first_unstable_offset(hw) == expected.first_unstable_offset(hw)
                assert all(offset <= log.end for offset in log.state.snapshot_offsets())
