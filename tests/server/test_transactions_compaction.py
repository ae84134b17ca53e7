"""A compacted topic written by a transactional producer (librdkafka), under a running broker's
cleaner: the aborted data goes, the markers go once their transactions' data went and
``delete.retention.ms`` passed (with a delete horizon set on them in between), and the
read_committed consumers of confluent-kafka, kafka-python and aiokafka see the latest committed
value of every key, before and after."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from odradek.testing.broker import InProcessBroker
from tests.server.group_clients import create_topic, wait_for
from tests.server.txn_clients import READERS

pytestmark = pytest.mark.timeout(180)

TOPIC = "compacted-txn"
COMPACT = {"cleanup.policy": "compact", "segment.bytes": 1024, "min.cleanable.dirty.ratio": 0.01,
           "delete.retention.ms": 300}
KEYS = [b"k%d" % i for i in range(4)]


def latest(records) -> dict[bytes, bytes]:
    """key -> value of its last record; values are ``key=tag``."""
    out = {}
    for _, _, value in sorted(records):
        key, _, _ = value.partition(b"=")
        out[key] = value
    return out


def markers_below(b, offset: int) -> int:
    def count():
        log = b.broker.replica_manager.get(TOPIC, 0).log
        return sum(1 for s in log.segments for _, h in s.iter_batches() if h.is_control and h.base_offset < offset)
    return b.call(count)


def test_read_committed_view_survives_marker_removal(tmp_path):
    with InProcessBroker(tmp_path / "data", log_cleaner_backoff_ms=100) as b:
        create_topic(b.bootstrap, TOPIC, 1, **COMPACT)
        producer = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "compacting", "linger.ms": 2})
        producer.init_transactions(30)

        def transaction(keys, tag: bytes, commit: bool = True) -> None:
            producer.begin_transaction()
            for key in keys:
                producer.produce(TOPIC, key=key, value=key + b"=" + tag)
            producer.flush(30)
            (producer.commit_transaction if commit else producer.abort_transaction)(30)

        for i in range(12):  # every third one aborted, the last one too
            transaction(KEYS, b"%d" % i, commit=i % 3 != 2)
        expected = {key: key + b"=10" for key in KEYS}
        for name, read in READERS.items():
            assert latest(read(b.bootstrap, TOPIC, 1)) == expected, name
        written = b.call(lambda: b.broker.replica_manager.get(TOPIC, 0).log.log_end_offset)
        fillers = iter(range(10**6))

        def more() -> None:  # later transactions: dirty data for the cleaner's passes
            transaction([b"f%d" % (next(fillers) % 3)], b"x")

        # Only the marker of transaction 10 (whose records are the newest of their keys) stays.
        wait_for(lambda: markers_below(b, written) == 1, timeout=90, step=more, interval=0.2)
        for name, read in READERS.items():
            records = read(b.bootstrap, TOPIC, 1)
            assert {k: v for k, v in latest(records).items() if k in expected} == expected, name
            assert not any(v.endswith((b"=2", b"=5", b"=8", b"=11")) for _, _, v in records), name
