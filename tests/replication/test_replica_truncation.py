"""``ReplicaManager.truncate_to``: a follower's truncation reaches every state kept beside the
log."""

import uuid

from odradek.replication.replica_manager import ReplicaManager
from odradek.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0, make_batch


def test_truncation_cuts_log_epochs_producers_and_high_watermark(tmp_path):
    clock = FakeClock(T0)
    manager = LogManager([str(tmp_path)], LogConfig(), clock)
    manager.startup()
    replicas = ReplicaManager(1, manager, clock)
    part = replicas.make_leader("t", 0, uuid.uuid4(), (1,), (1,), 0, LogConfig())
    for i in range(3):
        replicas.append(part, memoryview(bytearray(make_batch(0, 5, producer_id=7, base_sequence=5 * i))))
    replicas.make_leader("t", 0, part.topic_id, (1,), (1,), 2, LogConfig())
    replicas.append(part, memoryview(bytearray(make_batch(0, 5, producer_id=7, base_sequence=15))))
    manager.checkpoint()
    assert part.log.leader_epoch_cache.entries == ((0, 0), (2, 15))
    assert part.high_watermark == 20

    assert replicas.truncate_to(part, 12)  # inside the batch 10..14: it goes whole
    assert part.log_end_offset == 10 and part.high_watermark == 10
    assert part.log.leader_epoch_cache.entries == ((0, 0),)
    assert part.producer_state.entries()[7].last_offset == 9
    points = OffsetCheckpointFile(str(tmp_path / RECOVERY_POINT_CHECKPOINT)).read()
    assert points[("t", 0)] <= 10
    assert not replicas.truncate_to(part, 30)
    manager.shutdown()
