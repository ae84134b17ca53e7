"""The produce fast path takes an acks=-1 partition only when its append alone completes the
acks=all wait, and answers what the completion rule says
(``Partition.check_enough_replicas_reach_offset``): a one-replica partition at
``min.insync.replicas=1``, never a partition whose followers may hold the high watermark
back (a caught-up follower outside the ISR does), nor one short of ``min.insync.replicas``.
No sockets: ``ProduceFastPath``'s two checks over a real replica manager."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.produce_fast_path import ProduceFastPath
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0, make_batch


def test_acks_all_is_taken_only_where_the_append_completes_the_wait(tmp_path):
    clock = FakeClock(T0)
    manager = LogManager([str(tmp_path)], LogConfig(), clock)
    manager.startup()
    min_isr = {}
    rm = ReplicaManager(1, manager, clock, min_insync_replicas=lambda topic: min_isr.get(topic, 1))
    broker = SimpleNamespace(replica_manager=rm, broker_id=1, client_quotas=None, produce_quotas=None,
                             metrics=SimpleNamespace(topics=None))
    fast = ProduceFastPath(broker)

    def append(part) -> int:
        return rm.append(part, memoryview(bytearray(make_batch(0, 2)))).last_offset

    alone = rm.make_leader("alone", 0, uuid.uuid4(), (1,), (1,), 0, LogConfig())
    assert fast._replicated_on_append(alone)
    assert fast._acks_all_error(alone, append(alone)) == ErrorCode.NONE
    min_isr["alone"] = 2  # the generic path refuses it NOT_ENOUGH_REPLICAS before appending
    assert not fast._replicated_on_append(alone)

    shrunk = rm.make_leader("shrunk", 0, uuid.uuid4(), (1, 2, 3), (1,), 0, LogConfig())
    shrunk.update_follower_fetch_state(2, 0, 0, clock.milliseconds())  # caught up: about to join
    assert not fast._replicated_on_append(shrunk)  # the ISR is this broker, but 2 holds the HW
    last = append(shrunk)
    assert shrunk.high_watermark <= last
    assert fast._acks_all_error(shrunk, last) == ErrorCode.REQUEST_TIMED_OUT  # never NONE before the HW
    manager.shutdown()
