"""The broker's replication background tasks: ISR expiration (every
``replica.lag.time.max.ms`` / 2) drops a follower that stopped fetching, through the
controller, and the high watermark checkpoint (every
``replica.high.watermark.checkpoint.interval.ms``) records the high watermark that moved."""

from __future__ import annotations

import time

from odradek.replication.high_watermark_checkpoint import HIGH_WATERMARK_CHECKPOINT
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.clock import FakeClock
from odradek.testing.broker import InProcessBroker
from tests.replication.test_alter_partition_manager import FakeChannel, accept
from tests.server.clients import unique_topic, wait_until
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient, produce_body, simple_batch


def test_a_silent_follower_leaves_the_isr_and_the_high_watermark_is_checkpointed(tmp_path):
    clock = FakeClock(int(time.time() * 1000))
    data = tmp_path / "data"
    props = {"replica.lag.time.max.ms": "200", "replica.high.watermark.checkpoint.interval.ms": "50",
             # the fake channel to the controller answers AlterPartition only
             "controlled.shutdown.enable": "false"}
    with InProcessBroker(data, clock=clock, **props) as b:
        topic = unique_topic("isr-expiration")
        wire = WireClient(b.bootstrap)
        create_topic(wire, topic)

        def replicate():
            b.broker.broker_to_controller = FakeChannel(accept)
            rm = b.broker.replica_manager
            part = rm.get(topic, 0)
            rm.make_leader(topic, 0, part.topic_id, (1, 2), (1, 2), 1, part.log.config)
            return part, part.zk_version
        part, version = b.call(replicate)
        wire.request("Produce", 9, produce_body(topic, 0, simple_batch([b"a", b"b", b"c"])))
        wire.close()
        assert b.call(lambda: (part.high_watermark, part.isr)) == (0, (1, 2))  # follower 2 holds it
        clock.advance(1_000)  # follower 2 has not fetched for longer than replica.lag.time.max.ms
        wait_until(lambda: b.call(lambda: part.isr) == (1,), what="the ISR shrink")
        assert b.call(lambda: (part.high_watermark, part.zk_version)) == (3, version + 1)  # the state was written
        path = str(data / HIGH_WATERMARK_CHECKPOINT)
        wait_until(lambda: OffsetCheckpointFile(path).read().get((topic, 0)) == 3, what="the checkpoint")
