"""A broker checkpointing all the time while topics come and go keeps its log directory.

With ``log.flush.offset.checkpoint.interval.ms=1`` and
``replica.high.watermark.checkpoint.interval.ms=1`` the periodic passes rewrite the
checkpoints without pause, while each topic deletion writes its directory's checkpoints from
another thread. Both used to write ``<name>.tmp`` and rename it: the second rename found it
gone, the log directory was reported failed and the broker (one directory) halted, within two
create/delete cycles. One writer per checkpoint file (``file_ops.replace_durably``,
``LogManager.checkpoint_dir``) keeps it online through many.
"""

from __future__ import annotations

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from odradek.testing.broker import InProcessBroker

CYCLES = 20


def test_topics_created_and_deleted_under_constant_checkpoints(tmp_path):
    with InProcessBroker(tmp_path / "data", log_flush_offset_checkpoint_interval_ms=1,
                         replica_high_watermark_checkpoint_interval_ms=1) as node:
        admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
        producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks="all")
        try:
            for cycle in range(CYCLES):
                name = f"churn-{cycle}"
                admin.create_topics([NewTopic(name, 2, 1)])
                producer.send(name, b"v", partition=cycle % 2).get(10)
                errors = admin.delete_topics([name], timeout_ms=10_000, raise_errors=False)
                assert [t["error_code"] for t in errors["topics"]] == [0]
                assert node.broker.log_manager.failure_channel.offline_log_dirs == [], f"cycle {cycle}"
            producer.send("churn-after", b"v").get(10)  # still up, and serving
        finally:
            producer.close()
            admin.close()
        assert not node.broker.halted.is_set()
        assert node.broker.log_manager.failure_channel.offline_log_dirs == []
