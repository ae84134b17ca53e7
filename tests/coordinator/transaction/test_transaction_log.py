"""``__transaction_state`` records: Kafka's bytes, round trips, tombstones, bad input, and the
loader over a real log."""

from __future__ import annotations

import pytest

from odradek.coordinator.transaction import loader
from odradek.coordinator.transaction.transaction_log import (
    TransactionLogError,
    TransactionLogRecord,
    decode_record,
)
from odradek.coordinator.transaction.transaction_metadata import TxnTransit
from odradek.coordinator.transaction.transaction_shard import TransactionShard
from odradek.coordinator.transaction.transaction_state import TransactionState as S
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.config import LogConfig
from tests.storage.helpers import T0, open_log


def transit(state=S.ONGOING, partitions=frozenset({("b", 1), ("a", 0), ("a", 2)}), epoch=3):
    return TxnTransit(producer_id=77, previous_producer_id=-1, producer_epoch=epoch, last_producer_epoch=-1,
                      timeout_ms=60_000, state=state, partitions=partitions, start_ms=1000, last_update_ms=2000)


def test_key_bytes_are_kafkas():
    assert TransactionLogRecord("t1", None).key_bytes() == b"\x00\x00\x00\x02t1"


def test_value_v0_layout():
    value = TransactionLogRecord("t1", transit()).value_bytes()
    assert value[:2] == b"\x00\x00"  # version 0
    assert value[2:10] == (77).to_bytes(8, "big")  # producer id
    assert value[10:12] == b"\x00\x03"  # epoch
    assert value[12:16] == (60_000).to_bytes(4, "big")  # timeout
    assert value[16] == S.ONGOING.id
    assert value[17:21] == b"\x00\x00\x00\x02"  # two topics, sorted: a [0, 2], b [1]
    assert value[-16:] == (2000).to_bytes(8, "big") + (1000).to_bytes(8, "big")


@pytest.mark.parametrize("state", [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
                                   S.COMPLETE_ABORT])
def test_round_trip(state):
    partitions = frozenset() if state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) else transit().partitions
    record = TransactionLogRecord("t1", transit(state, partitions))
    assert decode_record(record.key_bytes(), record.value_bytes()) == record


def test_empty_writes_a_null_partition_array():
    value = TransactionLogRecord("t1", transit(S.EMPTY, frozenset())).value_bytes()
    assert value[17:21] == b"\xff\xff\xff\xff"


def test_tombstone_and_never_written_states():
    assert decode_record(TransactionLogRecord("t1", None).key_bytes(), None) == TransactionLogRecord("t1", None)
    for state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        with pytest.raises(ValueError):
            TransactionLogRecord("t1", transit(state, frozenset())).value_bytes()


@pytest.mark.parametrize("key, value", [
    (b"", None), (b"\x00\x01\x00\x01t", None), (b"\x00\x00\x00\x05t", None),
    (b"\x00\x00\x00\x01t", b"\x00\x00"), (b"\x00\x00\x00\x01t", b"\x00\x07" + bytes(40)),
    (b"\x00\x00\x00\x01t", TransactionLogRecord("t", transit()).value_bytes() + b"x"),
])
def test_malformed_records_raise_transaction_log_error(key, value):
    with pytest.raises(TransactionLogError):
        decode_record(key, value)


def test_unknown_status_raises():
    value = bytearray(TransactionLogRecord("t", transit()).value_bytes())
    value[16] = 42
    with pytest.raises(TransactionLogError):
        decode_record(b"\x00\x00\x00\x01t", bytes(value))


def test_loader_keeps_the_last_record_of_each_id_and_forgets_tombstones(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "READ_BYTES", 120)  # several reads
    plog = open_log(tmp_path, LogConfig(cleanup_policy=("compact",)))
    records = [TransactionLogRecord("a", transit(S.EMPTY, frozenset(), epoch=0)),
               TransactionLogRecord("b", transit(S.EMPTY, frozenset(), epoch=0)),
               TransactionLogRecord("a", transit(S.ONGOING, frozenset({("x", 0)}), epoch=0)),
               TransactionLogRecord("a", transit(S.PREPARE_COMMIT, frozenset({("x", 0)}), epoch=0)),
               TransactionLogRecord("c", transit(S.COMPLETE_ABORT, frozenset(), epoch=5)),
               TransactionLogRecord("b", None)]
    for record in records:
        builder = BatchBuilder(BatchSpec(base_offset=plog.log_end_offset))
        builder.append(T0, record.key_bytes(), record.value_bytes())
        data = builder.build()
        plog.append(data, LogAppendInfo.from_batches(data))
    bad = BatchBuilder(BatchSpec(base_offset=plog.log_end_offset))
    bad.append(T0, b"\x00\x09junk", b"")
    data = bad.build()
    plog.append(data, LogAppendInfo.from_batches(data))
    shard = TransactionShard(0, 1)
    stats = loader.load_shard(shard, plog)
    assert (stats.records, stats.skipped, stats.end_offset) == (6, 1, 7)
    assert sorted(shard.transactions) == ["a", "c"]
    assert shard.get("a").state == S.PREPARE_COMMIT and shard.get("a").partitions == {("x", 0)}
    assert [t.transactional_id for t in shard.preparing()] == ["a"]
    assert shard.get("c").producer_epoch == 5
