import struct

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    BatchMetadata,
    CorruptSnapshotError,
    ProducerStateManager,
    increment_sequence,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.batch import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader

MAX_SEQ = 2**31 - 1
T0 = 1_700_000_000_000


def batch(pid, epoch, seq, count=1, offset=0, ts=T0, attributes=0):
    """A header as a producer would send it (``offset`` is the base offset in the log)."""
    return BatchHeader(
        base_offset=offset,
        batch_length=100,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=attributes,
        last_offset_delta=count - 1,
        base_timestamp=ts,
        max_timestamp=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        records_count=count,
    )


def marker(pid, epoch, offset, ts=T0):
    return batch(pid, epoch, -1, 1, offset, ts, CONTROL_BIT | TRANSACTIONAL_BIT)


class Partition:
    """A stand-in for the log: check, append at the log end, update."""

    def __init__(self, state=None):
        self.state = ProducerStateManager() if state is None else state
        self.log = []
        self.end = self.state.map_end_offset

    def produce(self, header):
        result = self.state.check(header)
        if result.ok:
            header = batch(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.records_count,
                self.end,
                header.max_timestamp,
                header.attributes,
            )
            self.log.append(header)
            self.state.update(header, self.end)
            self.end = header.next_offset
        return result

    def truncate(self, offset):
        """Cut the log as ``Log.truncate_to`` does (a batch holding ``offset`` goes whole)
        and rebuild the state as ``replication/producer_state_reload.py`` does."""
        self.log = [h for h in self.log if h.last_offset < offset]
        self.end = min(self.end, self.log[-1].next_offset if self.log else 0)
        self.state, start = self.state.reloaded(self.end)
        self.state.rebuild(h for h in self.log if h.last_offset >= start)
        if self.state.map_end_offset < self.end:
            self.state.advance(self.end)


def test_batches_without_producer_id_are_accepted_and_only_move_the_map_end():
    state = ProducerStateManager()
    header = batch(-1, -1, -1, count=3, offset=10)
    assert state.check(header).ok
    state.update(header)
    assert len(state) == 0
    assert state.map_end_offset == 13


@pytest.mark.parametrize("seq", [0, 42, MAX_SEQ])
def test_unknown_producer_is_accepted_with_any_sequence_and_then_tracked(seq):
    p = Partition()
    assert p.produce(batch(7, 0, seq, count=2)).ok
    entry = p.state.entry(7)
    assert entry.epoch == 0
    assert entry.batches == (BatchMetadata(seq, increment_sequence(seq, 1), 0, 1, T0),)
    assert p.produce(batch(7, 0, increment_sequence(seq, 2))).ok


def test_sequences_must_follow_each_other():
    p = Partition()
    assert p.produce(batch(1, 0, 0, count=3)).ok
    gap = p.produce(batch(1, 0, 4))
    assert gap.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "expected sequence 3" in gap.message
    overlap = p.produce(batch(1, 0, 1, count=3))
    assert overlap.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.produce(batch(1, 0, 3)).ok
    assert p.state.entry(1).last_seq == 3


def test_check_never_changes_state():
    p = Partition()
    p.produce(batch(1, 3, 0, count=2))
    before = p.state.snapshot()
    for header in [
        batch(1, 3, 2),
        batch(1, 3, 0, count=2),
        batch(1, 3, 9),
        batch(1, 2, 2),
        batch(1, 4, 0),
        batch(2, 0, 5),
        batch(1, 3, -1),
        marker(1, 4, 0),
    ]:
        p.state.check(header)
    assert p.state.snapshot() == before


def test_duplicates_among_the_last_five_return_the_original_offsets():
    p = Partition()
    for i in range(6):
        assert p.produce(batch(1, 0, 2 * i, count=2, ts=T0 + i)).ok
    assert len(p.log) == 6
    for i in range(1, 6):
        result = p.state.check(batch(1, 0, 2 * i, count=2))
        assert result.is_duplicate and not result.ok
        assert result.error == ErrorCode.NONE
        assert result.duplicate == BatchMetadata(2 * i, 2 * i + 1, 2 * i, 2 * i + 1, T0 + i)
    # The sixth batch back has left the cache: its retry is out of order, not a duplicate.
    oldest = p.state.check(batch(1, 0, 0, count=2))
    assert oldest.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert not oldest.is_duplicate


def test_a_duplicate_must_match_first_and_last_sequence():
    p = Partition()
    p.produce(batch(1, 0, 0, count=5))
    assert p.state.check(batch(1, 0, 0, count=5)).is_duplicate
    assert p.state.check(batch(1, 0, 0, count=4)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.state.check(batch(1, 0, 1, count=4)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_older_epoch_is_fenced():
    p = Partition()
    p.produce(batch(1, 5, 0))
    result = p.produce(batch(1, 4, 1))
    assert result.error == ErrorCode.INVALID_PRODUCER_EPOCH
    # Even a retry of a batch that is cached under the newer epoch's numbers.
    assert p.produce(batch(1, 4, 0)).error == ErrorCode.INVALID_PRODUCER_EPOCH


def test_newer_epoch_must_start_at_zero_and_resets_the_cache():
    p = Partition()
    p.produce(batch(1, 0, 0, count=3))
    p.produce(batch(1, 0, 3, count=3))
    bad = p.produce(batch(1, 1, 6))
    assert bad.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.produce(batch(1, 1, 0, count=3)).ok
    entry = p.state.entry(1)
    assert entry.epoch == 1
    assert [(b.first_seq, b.last_seq) for b in entry.batches] == [(0, 2)]
    # The old epoch's second batch is neither a duplicate nor next any more.
    assert p.state.check(batch(1, 1, 3, count=3)).ok
    assert p.state.check(batch(1, 0, 3, count=3)).error == ErrorCode.INVALID_PRODUCER_EPOCH


def test_sequence_wraps_from_int32_max_to_zero():
    p = Partition()
    assert p.produce(batch(1, 0, MAX_SEQ - 1, count=2)).ok  # MAX-1, MAX
    assert p.state.check(batch(1, 0, MAX_SEQ + 1)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.produce(batch(1, 0, 0, count=3)).ok  # 0..2
    assert p.produce(batch(1, 0, 3)).ok


def test_a_batch_spanning_the_wrap_has_a_wrapped_last_sequence():
    p = Partition()
    assert p.produce(batch(1, 0, MAX_SEQ - 2, count=5)).ok  # MAX-2 .. 1
    assert p.state.entry(1).last_seq == 1
    dup = p.state.check(batch(1, 0, MAX_SEQ - 2, count=5))
    assert dup.is_duplicate and dup.duplicate.last_seq == 1
    assert p.produce(batch(1, 0, 2)).ok


def test_negative_epoch_or_sequence_with_a_producer_id_is_an_invalid_record():
    state = ProducerStateManager()
    assert state.check(batch(1, 0, -1)).error == ErrorCode.INVALID_RECORD
    assert state.check(batch(1, -1, 0)).error == ErrorCode.INVALID_RECORD
    assert state.check(batch(1, 0, -5)).message


def test_transactional_batches_and_markers_do_not_crash_and_track_the_open_transaction():
    p = Partition()
    assert p.produce(batch(1, 0, 0, count=2, attributes=TRANSACTIONAL_BIT)).ok
    assert p.produce(batch(1, 0, 2, attributes=TRANSACTIONAL_BIT)).ok
    assert p.state.entry(1).current_txn_first_offset == 0
    assert p.state.check(marker(1, 0, 0)).ok
    assert p.state.check(marker(1, -1, 0)).error == ErrorCode.INVALID_PRODUCER_EPOCH
    p.state.update(marker(1, 0, 3))
    entry = p.state.entry(1)
    assert entry.current_txn_first_offset is None
    assert entry.last_seq == 2 and entry.last_offset == 3
    # A marker with a bumped epoch (an aborted transaction) drops the cached batches.
    p.state.update(marker(1, 1, 4))
    assert p.state.entry(1).batches == ()
    assert p.state.check(batch(1, 1, 0)).ok
    assert p.state.check(batch(1, 1, 3)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_update_uses_the_given_first_offset_and_timestamp():
    state = ProducerStateManager()
    state.update(batch(1, 0, 0, count=4, offset=0, ts=5), 100, timestamp=T0)
    assert state.entry(1).batches == (BatchMetadata(0, 3, 100, 103, T0),)
    assert state.entry(1).last_timestamp == T0
    assert state.map_end_offset == 104


def test_expire_forgets_silent_producers_but_keeps_open_transactions():
    state = ProducerStateManager()
    state.update(batch(1, 0, 0, offset=0, ts=T0))
    state.update(batch(2, 0, 0, offset=1, ts=T0 + 10))
    state.update(batch(3, 0, 0, offset=2, ts=T0, attributes=TRANSACTIONAL_BIT))
    assert state.expire(T0 + 1000, 1001) == []
    assert state.expire(T0 + 1000, 1000) == [1]
    assert sorted(state.entries()) == [2, 3]
    assert state.expire(T0 + DEFAULT_PRODUCER_ID_EXPIRATION_MS + 10) == [2]
    assert state.entry(3) is not None
    # An expired producer is unknown again: any sequence is accepted.
    assert state.check(batch(1, 0, 77)).ok


def test_snapshot_round_trip():
    p = Partition(ProducerStateManager(map_end_offset=50))
    for pid in (9, 3, 5):
        for i in range(7):
            p.produce(batch(pid, 2, 3 * i, count=3, ts=T0 + i))
    p.produce(batch(11, 0, 0, attributes=TRANSACTIONAL_BIT))
    data = p.state.snapshot()
    loaded = ProducerStateManager.load(data)
    assert dict(loaded.entries()) == dict(p.state.entries())
    assert loaded.map_end_offset == p.state.map_end_offset == p.end
    assert loaded.snapshot() == data
    assert loaded.check(batch(3, 2, 15, count=3)).duplicate.first_offset == 50 + 21 + 15
    assert loaded.entry(11).current_txn_first_offset == 50 + 63


def test_empty_snapshot_round_trip():
    data = ProducerStateManager().snapshot()
    assert len(data) == 18
    loaded = ProducerStateManager.load(data)
    assert len(loaded) == 0 and loaded.map_end_offset == 0


def _sample_snapshot():
    state = ProducerStateManager()
    state.update(batch(1, 0, 0, count=2, offset=0))
    state.update(batch(2, 1, 5, count=1, offset=2))
    return state.snapshot()


def test_every_bit_flip_and_truncation_of_a_snapshot_is_detected():
    data = _sample_snapshot()
    for i in range(len(data)):
        for bit in (0, 7):
            flipped = bytearray(data)
            flipped[i] ^= 1 << bit
            with pytest.raises(CorruptSnapshotError):
                ProducerStateManager.load(bytes(flipped))
    for size in range(len(data)):
        with pytest.raises(CorruptSnapshotError):
            ProducerStateManager.load(data[:size])
    with pytest.raises(CorruptSnapshotError):
        ProducerStateManager.load(data + b"\0")


def _with_crc(body, version=1):
    return struct.pack(">hI", version, crc32c.crc32c(body)) + body


@pytest.mark.parametrize(
    "body, reason",
    [
        (struct.pack(">qi", 0, 1_000_000_000), "impossible producer count"),
        (struct.pack(">qi", 0, -1), "impossible producer count"),
        (struct.pack(">qi", 0, 1) + struct.pack(">qhqqqB", 1, 0, 0, 0, -1, 6), "batch count"),
        (struct.pack(">qi", 0, 1) + struct.pack(">qhqqqB", -4, 0, 0, 0, -1, 0), "invalid"),
        (
            struct.pack(">qi", 0, 1)
            + struct.pack(">qhqqqB", 1, 0, 0, 0, -1, 1)
            + struct.pack(">iiqqq", 0, 0, 5, 4, 0),
            "invalid batch",
        ),
        (
            struct.pack(">qi", 0, 2)
            + struct.pack(">qhqqqB", 1, 0, 0, 0, -1, 0) * 2,
            "out of order",
        ),
    ],
)
def test_snapshots_with_a_valid_crc_but_bad_content_are_refused(body, reason):
    with pytest.raises(CorruptSnapshotError, match=reason):
        ProducerStateManager.load(_with_crc(body))


def test_unknown_snapshot_version_is_refused():
    with pytest.raises(CorruptSnapshotError, match="version"):
        ProducerStateManager.load(_with_crc(struct.pack(">qi", 0, 0), version=3))


@given(st.binary(max_size=200))
def test_random_bytes_never_load_as_anything_but_a_clear_error(data):
    try:
        ProducerStateManager.load(data)
    except CorruptSnapshotError:
        pass


def _busy_partition():
    p = Partition()
    for i in range(12):
        for pid in (1, 2):
            p.produce(batch(pid, i // 8, 2 * (i % 8), count=2, ts=T0 + i))
    p.produce(batch(3, 0, 0, attributes=TRANSACTIONAL_BIT))
    p.produce(batch(-1, -1, -1, count=4))
    p.produce(batch(4, 0, 0))
    p.state.update(marker(3, 0, p.end))
    p.log.append(marker(3, 0, p.end))
    p.end += 1
    return p


def test_rebuild_from_the_whole_log_equals_the_live_state():
    p = _busy_partition()
    rebuilt = ProducerStateManager()
    rebuilt.rebuild(p.log)
    assert rebuilt.snapshot() == p.state.snapshot()


def test_snapshot_then_rebuild_of_the_rest_equals_the_live_state():
    p = Partition()
    for i in range(6):
        p.produce(batch(1, 0, i))
    data = p.state.snapshot()
    for i in range(6, 9):
        p.produce(batch(1, 0, i))
        p.produce(batch(2, 0, i))
    restored = ProducerStateManager.load(data)
    # The scan may start before map_end_offset (at its segment's base): those are skipped.
    restored.rebuild(p.log)
    assert restored.snapshot() == p.state.snapshot()
    restored.rebuild(p.log)
    assert restored.snapshot() == p.state.snapshot()


def test_truncation_keeps_the_batches_below_the_new_log_end():
    p = Partition()
    for i in range(3):
        p.produce(batch(1, 0, 10 * i, count=10, ts=T0 + i))  # offsets 0-9, 10-19, 20-29
    p.produce(batch(2, 0, 0))  # offset 30
    p.truncate(15)  # inside the batch 10-19: it goes whole, the log ends at 10
    entry = p.state.entry(1)
    assert entry.batches == (BatchMetadata(0, 9, 0, 9, T0),)
    assert entry.last_offset == 9 and entry.last_timestamp == T0
    assert p.state.entry(2) is None
    assert p.state.map_end_offset == 10
    assert p.state.check(batch(1, 0, 10, count=10)).ok
    assert p.state.check(batch(1, 0, 0, count=10)).is_duplicate


def test_truncation_undoes_an_epoch_bump():
    p = Partition()
    p.produce(batch(1, 0, 0))
    p.produce(batch(1, 1, 0))
    p.truncate(1)
    assert p.state.entry(1).epoch == 0 and p.state.entry(1).last_seq == 0
    assert p.state.check(batch(1, 0, 1)).ok


def test_truncation_keeps_producers_entirely_below_and_transactions_begun_before():
    p = Partition()
    p.produce(batch(1, 0, 0, attributes=TRANSACTIONAL_BIT))  # offset 0
    p.produce(batch(1, 0, 1, attributes=TRANSACTIONAL_BIT))  # offset 1
    p.produce(batch(2, 0, 0, attributes=TRANSACTIONAL_BIT))  # offset 2
    p.produce(batch(3, 0, 0))  # offset 3
    p.truncate(1)
    assert p.state.entry(1).current_txn_first_offset == 0
    assert p.state.entry(2) is None
    assert p.state.entry(3) is None
    p = Partition()
    p.produce(batch(3, 0, 0))
    before3 = p.state.entry(3)
    p.truncate(5)
    assert p.state.entry(3) == before3
    assert p.state.map_end_offset == 1


# -- random producers against a simple model ----------------------------------------------------


class Model:
    """Kafka's rules restated over the full history of each producer's current epoch."""

    def __init__(self):
        self.epoch = {}
        self.history = {}  # pid -> [(first_seq, last_seq, first_offset, last_offset)]

    def next_seq(self, pid):
        hist = self.history.get(pid)
        return (hist[-1][1] + 1) % 2**31 if hist else 0

    def verdict(self, pid, epoch, first, count):
        """("ok", None) | ("dup", record) | ("error", code)."""
        if pid not in self.epoch:
            return "ok", None
        if epoch < self.epoch[pid]:
            return "error", ErrorCode.INVALID_PRODUCER_EPOCH
        if epoch > self.epoch[pid]:
            return ("ok", None) if first == 0 else ("error", ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        last = (first + count - 1) % 2**31
        for record in self.history[pid][-5:]:
            if record[:2] == (first, last):
                return "dup", record
        if first == self.next_seq(pid):
            return "ok", None
        return "error", ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    def apply(self, pid, epoch, first, count, offset):
        if self.epoch.get(pid) != epoch:
            self.history[pid] = []
        self.epoch[pid] = epoch
        last = (first + count - 1) % 2**31
        self.history[pid].append((first, last, offset, offset + count - 1))


@given(st.data())
def test_random_producers_agree_with_the_model(data):
    model, p = Model(), Partition()
    for _ in range(data.draw(st.integers(1, 60))):
        pid = data.draw(st.integers(0, 2))
        epoch = max(0, model.epoch.get(pid, 0) + data.draw(st.sampled_from([-1, 0, 0, 0, 0, 1])))
        count = data.draw(st.integers(1, 4))
        kind = data.draw(st.sampled_from(["next", "next", "retry", "any", "start"]))
        if kind == "next":
            first = model.next_seq(pid)
        elif kind == "retry" and model.history.get(pid):
            back = data.draw(st.integers(1, min(7, len(model.history[pid]))))
            first, last = model.history[pid][-back][:2]
            count = (last - first) % 2**31 + 1
        elif kind == "start":
            first = data.draw(st.sampled_from([0, MAX_SEQ - 2, MAX_SEQ]))
        else:
            first = data.draw(st.integers(0, 20))
        want, detail = model.verdict(pid, epoch, first, count)
        result = p.produce(batch(pid, epoch, first, count))
        if want == "ok":
            assert result.ok
            model.apply(pid, epoch, first, count, p.end - count)
        elif want == "dup":
            assert result.is_duplicate and result.error == ErrorCode.NONE
            d = result.duplicate
            assert (d.first_seq, d.last_seq, d.first_offset, d.last_offset) == detail
        else:
            assert result.error == detail and not result.is_duplicate
    snapshot = p.state.snapshot()
    assert ProducerStateManager.load(snapshot).snapshot() == snapshot
    rebuilt = ProducerStateManager()
    rebuilt.rebuild(p.log)
    assert rebuilt.snapshot() == snapshot
