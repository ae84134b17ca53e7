"""A ``ShardHarness`` whose writes also go to a real log, for the loader tests: replaying that
log into a fresh shard (``loaded``) must give back the state the harness's shard has."""

from __future__ import annotations

from odradek.coordinator.group import loader
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.control import ABORT, COMMIT, build_end_txn_marker_batch
from odradek.storage.append_info import LogAppendInfo
from tests.coordinator.group.harness import ShardHarness
from tests.storage.helpers import T0


class LoggingHarness(ShardHarness):
    """Writes go to ``plog`` too, one batch per write (a transactional batch of the write's
    producer when it has one); ``marker`` appends an end-transaction marker and applies it."""

    def __init__(self, plog) -> None:
        super().__init__()
        self.plog = plog

    def _append(self, data: bytes) -> None:
        self.plog.append(data, LogAppendInfo.from_batches(data))

    def apply(self, result):
        for write in result.writes:
            spec = BatchSpec(base_offset=self.plog.log_end_offset)
            if write.producer_id >= 0:
                spec = BatchSpec(base_offset=self.plog.log_end_offset, producer_id=write.producer_id,
                                 producer_epoch=write.producer_epoch, transactional=True)
            builder = BatchBuilder(spec)
            for record in write.records:
                builder.append(T0, record.key_bytes(), record.value_bytes())
            self._append(builder.build())
        return super().apply(result)

    def marker(self, producer_id: int, committed: bool, epoch: int = 0) -> None:
        self._append(build_end_txn_marker_batch(COMMIT if committed else ABORT, 5, producer_id=producer_id,
                                                producer_epoch=epoch, timestamp=T0,
                                                base_offset=self.plog.log_end_offset))
        self.shard.replay_end_transaction(producer_id, committed)


def loaded(plog):
    """``(shard, LoadStats)``: ``plog`` replayed into a fresh shard."""
    fresh = ShardHarness()
    stats = loader.load_shard(fresh.shard, plog)
    return fresh.shard, stats
