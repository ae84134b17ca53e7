"""A transactional batch appended to a leader `Partition`, for the transaction tests."""

from __future__ import annotations

from odradek.records.builder import BatchBuilder, BatchSpec
from tests.storage.helpers import T0


def append_transactional(part, sequences: dict[int, int], pid: int, count: int = 2):
    """Append ``count`` records of producer ``pid`` in one transactional batch, its sequence
    taken from and advanced in ``sequences``; the append's result (base and last offsets)."""
    seq = sequences.get(pid, 0)
    builder = BatchBuilder(BatchSpec(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True))
    for i in range(count):
        builder.append(T0, b"k", b"%d-%d" % (pid, seq + i))
    sequences[pid] = seq + count
    return part.append_records_as_leader(memoryview(bytearray(builder.build())), T0)
