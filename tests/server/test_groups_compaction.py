"""Compaction under a running broker: a keyed topic shrinks to the latest value per key with
offsets kept, tombstones go after ``delete.retention.ms``, and ``__consumer_offsets`` itself is
compacted while commits keep coming and still replays to the latest offsets."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from odradek.coordinator.group.group_config import OFFSETS_TOPIC, GroupConfig
from odradek.coordinator.group.group_coordinator_shard import GroupCoordinatorShard
from odradek.coordinator.group.loader import load_shard
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import InProcessBroker
from tests.server.group_clients import create_topic, wait_for
from tests.server.group_wire import WireClient, module

COMPACT = {"cleanup.policy": "compact", "segment.bytes": 1024, "min.cleanable.dirty.ratio": 0.01,
           "delete.retention.ms": 300}
OC = module("OffsetCommitRequest")
OF = module("OffsetFetchRequest")


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        out = []
        while c.position(tp) < end:
            for records in c.poll(500).values():
                out += [(r.offset, r.key, r.value) for r in records]
        return out
    finally:
        c.close()


def active_base(broker, topic: str) -> int:
    return broker.call(lambda: broker.broker.replica_manager.get(topic, 0).log.segments[-1].base_offset)


def test_keyed_topic_keeps_the_latest_value_per_key_at_its_offset(tmp_path):
    with InProcessBroker(tmp_path / "data", log_cleaner_backoff_ms=100) as b:
        create_topic(b.bootstrap, "keyed", 1, **COMPACT)
        producer = KafkaProducer(bootstrap_servers=b.bootstrap)
        written = {}  # offset -> (key, value)
        for rnd in range(30):
            for k in range(20):
                key, value = b"k%d" % k, b"v%d-%d" % (k, rnd)
                written[producer.send("keyed", key=key, value=value).get(30).offset] = (key, value)
        producer.close()
        latest = {}
        for offset in sorted(written):
            latest[written[offset][0]] = (offset, written[offset][1])

        def compacted():
            records = read_all(b.bootstrap, "keyed")
            base = active_base(b, "keyed")
            cleaned_keys = [k for o, k, _ in records if o < base]
            return len(cleaned_keys) == len(set(cleaned_keys)) and len(records) < 200 and records

        records = wait_for(compacted, timeout=60, interval=0.2)
        assert all(written[o] == (k, v) for o, k, v in records)  # offsets preserved
        last = {}
        for o, k, v in records:
            last[k] = (o, v)
        assert last == latest


def test_tombstones_disappear_after_delete_retention(tmp_path):
    with InProcessBroker(tmp_path / "data", log_cleaner_backoff_ms=100) as b:
        create_topic(b.bootstrap, "tombs", 1, **COMPACT)
        producer = KafkaProducer(bootstrap_servers=b.bootstrap)
        producer.send("tombs", key=b"doomed", value=b"alive").get(30)
        producer.send("tombs", key=b"doomed", value=None).get(30)
        filler = iter(range(10**6))

        def more():  # new dirty data, so the cleaner keeps passing over the log
            for _ in range(10):
                producer.send("tombs", key=b"f%d" % (next(filler) % 5), value=b"x" * 50)
            producer.flush(30)

        def tombstone_kept():
            return [(k, v) for _, k, v in read_all(b.bootstrap, "tombs") if k == b"doomed"] == [(b"doomed", None)]

        wait_for(tombstone_kept, timeout=60, step=more, interval=0.1)
        wait_for(lambda: all(k != b"doomed" for _, k, _ in read_all(b.bootstrap, "tombs")),
                 timeout=60, step=more, interval=0.1)
        producer.close()


def commit(w: WireClient, offset: int) -> None:
    r = w.call(ApiKey.OFFSET_COMMIT, 8, group_id="busy", generation_id_or_member_epoch=-1, member_id="",
               topics=[OC.OffsetCommitRequestTopic(name="work", partitions=[
                   OC.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset + p) for p in (0, 1)])])
    assert all(p.error_code == ErrorCode.NONE for t in r.topics for p in t.partitions)


def offsets_records(b) -> int:
    def count():
        image = b.broker.metadata_image()
        total = 0
        for p in image.topic(OFFSETS_TOPIC).partitions:
            shard = GroupCoordinatorShard(p, GroupConfig(), b.broker.clock)
            total += load_shard(shard, b.broker.replica_manager.get(OFFSETS_TOPIC, p).log).records
        return total

    return b.call(count)


def test_offsets_topic_is_compacted_and_replays_to_the_latest_commit(tmp_path):
    data = tmp_path / "data"
    settings = {"log_cleaner_backoff_ms": 100, "offsets_topic_segment_bytes": 1024}
    with InProcessBroker(data, **settings) as b:
        create_topic(b.bootstrap, "work", 2)
        with WireClient(b.port) as w:
            w.call(ApiKey.FIND_COORDINATOR, 3, key="busy", key_type=0)
            for i in range(300):
                commit(w, i)
            wait_for(lambda: offsets_records(b) < 100, timeout=60, step=lambda: commit(w, 299), interval=0.2)
    with InProcessBroker(data, **settings) as b, WireClient(b.port) as w:
        def fetched():
            r = w.call(ApiKey.OFFSET_FETCH, 7, group_id="busy", topics=[
                OF.OffsetFetchRequestTopic(name="work", partition_indexes=[0, 1])])
            return r.error_code == ErrorCode.NONE and [p.committed_offset for t in r.topics for p in t.partitions]

        assert wait_for(fetched) == [299, 300]  # loading may answer LOAD_IN_PROGRESS first
