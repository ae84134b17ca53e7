"""A leader's appends, by every path, are recorded in its log's leader epoch cache."""

import uuid

from odradek.replication.partition import Partition
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from tests.storage.helpers import T0, make_batch, open_log


def _partition(tmp_path, epoch: int) -> Partition:
    # Built as the tests and tools do, without become_leader: the epoch is not begun yet.
    log = open_log(tmp_path, LogConfig(), FakeClock(T0))
    return Partition("topic", 0, uuid.uuid4(), log, leader_id=1, isr=(1,), leader_epoch=epoch)


def test_fast_path_appends_record_the_epoch(tmp_path):
    part = _partition(tmp_path, 5)
    data = bytearray(make_batch(0, 3))
    info = part.prepare_plain_append(data, None)
    if info is not None:
        part.append_plain(data, info)
    else:
        part.append_records_as_leader(memoryview(data), T0)
    assert part.log.leader_epoch_cache.entries == ((5, 0),)
    # Once begun, the fast path takes the appends again.
    more = bytearray(make_batch(0, 2))
    assert part.prepare_plain_append(more, None) is not None


def test_generic_and_coordinator_appends_record_the_epoch(tmp_path):
    part = _partition(tmp_path, 2)
    part.append_records_as_leader(memoryview(bytearray(make_batch(0, 3, producer_id=9, base_sequence=0))), T0)
    part.leader_epoch = 4
    part.append_as_coordinator(make_batch(0, 1), T0)
    assert part.log.leader_epoch_cache.entries == ((2, 0), (4, 3))
