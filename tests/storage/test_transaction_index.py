"""The ``.txnindex`` file of a segment: Kafka's 34-byte entries, replay-safe appends,
truncation, the search a read_committed fetch makes, and its life with its segment (rename,
deletion, truncation, the cleaner's swap, a torn tail)."""

from __future__ import annotations

import os
import struct

import pytest

from odradek.storage.cleaner import LogCleaner
from odradek.storage.config import LogConfig
from odradek.storage.transaction_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    collect_aborted,
    decode_entries,
)
from tests.storage.helpers import T0, append, open_log


def index_at(tmp_path, name="00000000000000000000.txnindex") -> TransactionIndex:
    path = str(tmp_path / name)
    return TransactionIndex(lambda: path)


def test_entries_use_kafkas_layout(tmp_path):
    idx = index_at(tmp_path)
    assert idx.append(AbortedTxn(7, 10, 20, 21))
    data = open(idx.path, "rb").read()
    assert len(data) == ENTRY_SIZE == 34
    assert struct.unpack(">hqqqq", data) == (0, 7, 10, 20, 21)


def test_append_ignores_a_replayed_entry_and_refuses_one_out_of_order(tmp_path):
    idx = index_at(tmp_path)
    assert idx.append(AbortedTxn(1, 0, 5, 6))
    assert idx.append(AbortedTxn(2, 3, 9, 10))
    assert not idx.append(AbortedTxn(1, 0, 5, 6))  # a replay after an unclean stop
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(3, 0, 7, 8))
    assert [e.last_offset for e in index_at(tmp_path).entries()] == [5, 9]  # read back from disk


def test_truncate_to_keeps_entries_whose_marker_is_below(tmp_path):
    idx = index_at(tmp_path)
    for i in range(4):
        idx.append(AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6))
    idx.truncate_to(26)
    assert [e.producer_id for e in idx.entries()] == [0, 1, 2]
    assert os.path.getsize(idx.path) == 3 * ENTRY_SIZE
    idx.truncate_to(0)
    assert idx.entries() == [] and not os.path.exists(idx.path)


def test_a_torn_last_entry_is_ignored_and_overwritten(tmp_path):
    idx = index_at(tmp_path)
    idx.append(AbortedTxn(1, 0, 5, 6))
    with open(idx.path, "ab") as f:
        f.write(b"\0\0\0\0\0\0\0\2\0")  # a crash in the middle of the next entry
    again = index_at(tmp_path)
    assert [e.producer_id for e in again.entries()] == [1]
    again.append(AbortedTxn(2, 6, 8, 9))
    assert decode_entries(open(again.path, "rb").read()) == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 6, 8, 9)]


def test_collect_finds_overlapping_transactions_and_stops_once_complete(tmp_path):
    idx = index_at(tmp_path)
    idx.append(AbortedTxn(1, 0, 4, 5))  # data 0.., marker at 4
    idx.append(AbortedTxn(2, 6, 12, 8))  # another transaction open from 8 when it ended
    idx.append(AbortedTxn(3, 8, 20, 21))
    r = idx.collect(5, 10)
    assert [t.producer_id for t in r.aborted] == [2, 3] and r.complete
    r = idx.collect(0, 30)
    assert [t.producer_id for t in r.aborted] == [1, 2, 3] and not r.complete
    assert [t.producer_id for t in idx.collect(13, 30).aborted] == [3]


def test_log_keeps_the_index_with_its_segment(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    for _ in range(6):
        append(log, 2)
    first, second = log.segments[0], log.segments[1]
    first.txn_index.append(AbortedTxn(1, first.base_offset, second.base_offset - 1, second.base_offset))
    second.txn_index.append(AbortedTxn(2, second.base_offset, second.base_offset + 1, second.base_offset + 2))
    found = collect_aborted(log.segments, 0, log.log_end_offset)
    assert [t.producer_id for t in found] == [1, 2]
    # Truncation into the second segment cuts its index; the first keeps its own.
    log.truncate_to(second.base_offset + 1)
    assert second.txn_index.entries() == [] and len(first.txn_index) == 1
    # Deletion (DeleteRecords past it) retires the file with the segment.
    path = first.txn_index.path
    log.delete_records(second.base_offset)
    assert not os.path.exists(path) and os.path.exists(path + ".deleted")
    log.remove_deleted_files(T0 + 10**9)
    assert not os.path.exists(path + ".deleted")
    log.close()


def test_index_survives_a_reopen_and_stale_files_go(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    for _ in range(4):
        append(log, 2)
    log.segments[0].txn_index.append(AbortedTxn(5, 0, 1, 2))
    directory = log.directory
    log.close()
    orphan = os.path.join(directory, "00000000000000009999.txnindex")
    open(orphan, "wb").close()
    log = open_log(tmp_path, LogConfig(segment_bytes=300), clean_shutdown=True)
    assert log.segments[0].txn_index.entries() == [AbortedTxn(5, 0, 1, 2)]
    assert not os.path.exists(orphan)
    log.close()


def test_the_cleaners_swap_keeps_the_entries(tmp_path):
    """The cleaned segments hold the entries of the aborted transactions whose data the pass
    met (that data goes; entry and marker go at later passes: ``test_cleaner_markers``)."""
    from tests.storage.test_cleaner_transactions import TxnLog

    config = LogConfig(segment_bytes=300, cleanup_policy=("compact",))
    t = TxnLog(open_log(tmp_path, config))
    for r in range(8):
        if r in (0, 4):
            t.write([(b"a", b"aborted"), (b"b", b"aborted")], pid=9)
            t.end(9, commit=False)
        t.write([(b"a", b"%d" % r), (b"b", b"%d" % r)])
    t.log.roll()
    log = t.log
    before = collect_aborted(log.segments, 0, log.log_end_offset)
    assert len(before) == 2 and sum(1 for s in log.segments if s.txn_index.entries()) == 2  # two segments
    assert LogCleaner().clean(log, T0 + 10, force=True) is not None
    assert collect_aborted(log.segments, 0, log.log_end_offset) == before
    assert not [n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap"))]
    log.close()
