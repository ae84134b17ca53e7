"""MirrorMaker between two brokers on loopback (in this process): a live stream copied with
keys, headers, timestamps and partitions, the target topic created like the source's, a
restart resuming from the positions committed on the target, topics and partitions found
later, config sync, aborted source transactions left out, and a second mirror fencing the
first."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from odradek.client import (
    AdminClient,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    NewPartitions,
    NewTopic,
    Producer,
    ResourceType,
)
from odradek.client.topic_partition import TopicPartition
from odradek.mirror import MirrorConfig, MirrorError, MirrorMaker
from odradek.protocol.generated import ApiKey
from odradek.records.record import Record
from odradek.testing.broker import InProcessBroker
from tests.mirror.mirror_harness import (
    LiveProducer,
    MirrorThread,
    committed_positions,
    expected_partitions,
    produce,
    read_partitions,
    wait_caught_up,
)

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """(source, target): two single-broker clusters."""
    root = tmp_path_factory.mktemp("mirror")
    with InProcessBroker(root / "source") as source, InProcessBroker(root / "target") as target:
        yield source, target


@pytest.fixture
def names():
    """A topic prefix and a group id no other test uses."""
    tag = uuid.uuid4().hex[:8]
    return f"m{tag}", f"mirror-{tag}"


def mirror_config(source, target, topics: str, group_id: str, **overrides) -> MirrorConfig:
    settings = {"commit_interval_ms": 100, "reporting_interval_ms": 200, "refresh_topics_interval_s": 0.3}
    settings.update(overrides)
    return MirrorConfig(source.bootstrap, target.bootstrap, topics, group_id=group_id, **settings)


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's configs set for it (not defaults)."""
    with AdminClient(bootstrap) as admin:
        entries = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    return {e.name: e.value for e in next(iter(entries.values())).values() if not e.is_default}


def create_filled_topic(cluster, topic: str, records: int, partitions: int) -> None:
    """Create ``topic`` on ``cluster`` and produce ``records`` records to it (``produce``'s)."""
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    produce(cluster.bootstrap, topic, 0, records, partitions)

def test_live_stream_is_copied_partition_by_partition(clusters, names):
    source, target = clusters
    prefix, group = names
    topic = f"{prefix}-orders"
    with AdminClient(source.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1, configs={
            "retention.ms": "86400000", "cleanup.policy": "compact", "max.message.bytes": "200000",
            "min.insync.replicas": "1"})])  # min.insync.replicas belongs to the source cluster: not copied
    produce(source.bootstrap, topic, 0, 500, PARTITIONS)  # some history before the mirror starts
    live = LiveProducer(source.bootstrap, topic, 500, 3000, PARTITIONS)
    with MirrorThread(mirror_config(source, target, f"{prefix}-.*", group)) as mirror:
        live.start()
        live.finish()
        ends = wait_caught_up(source.bootstrap, target.bootstrap, [topic], group)
        progress = mirror.stop()

    with AdminClient(target.bootstrap) as admin:
        assert len(admin.describe_topics([topic])[topic].partitions) == PARTITIONS
    assert topic_configs(target.bootstrap, topic) == {
        "retention.ms": "86400000", "cleanup.policy": "compact", "max.message.bytes": "200000"}
    copied = read_partitions(target.bootstrap, topic)
    assert copied == expected_partitions(0, 3000, PARTITIONS)
    assert copied == read_partitions(source.bootstrap, topic)

    summary = progress.topics()[topic]
    assert (summary.partitions, summary.copied, summary.end, summary.position, summary.lag) == (
        PARTITIONS, 3000, sum(ends.values()), sum(ends.values()), 0)
    assert "3000 records copied" in summary.line() and "(lag 0)" in summary.line()

    # A Kafka client sees the same records, with their source timestamps as CreateTime.
    consumer = KafkaConsumer(bootstrap_servers=target.bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=3000)
    consumer.assign([KafkaTopicPartition(topic, 0)])
    first = next(iter(consumer))
    consumer.close()
    assert (first.key, first.value, first.timestamp, first.timestamp_type) == (
        b"key-0", b"value-0", 1_600_000_000_000, 0)
    assert first.headers == [("seq", b"0"), ("origin", b"source")]


def test_a_restarted_mirror_copies_only_what_is_new(clusters, names):
    source, target = clusters
    prefix, group = names
    topic = f"{prefix}-events"
    create_filled_topic(source, topic, 900, PARTITIONS)
    config = mirror_config(source, target, topic, group)
    with MirrorThread(config) as mirror:
        wait_caught_up(source.bootstrap, target.bootstrap, [topic], group)
        assert mirror.stop().copied == 900

    produce(source.bootstrap, topic, 900, 1500, PARTITIONS)
    with MirrorThread(config) as mirror:
        wait_caught_up(source.bootstrap, target.bootstrap, [topic], group)
        progress = mirror.stop()
    assert progress.copied == 600  # the first 900 were behind the committed positions
    assert read_partitions(target.bootstrap, topic) == expected_partitions(0, 1500, PARTITIONS)

    # Another group id has no positions on the target: it starts from the source's beginning.
    other = f"{group}-other"
    with MirrorThread(mirror_config(source, target, topic, other)) as mirror:
        wait_caught_up(source.bootstrap, target.bootstrap, [topic], other)
        assert mirror.stop().copied == 1500


def test_topics_and_partitions_added_later_are_mirrored(clusters, names):
    source, target = clusters
    prefix, group = names
    first, second = f"{prefix}-a", f"{prefix}-b"
    create_filled_topic(source, first, 100, 1)
    with MirrorThread(mirror_config(source, target, f"{prefix}-.*", group)) as mirror:
        wait_caught_up(source.bootstrap, target.bootstrap, [first], group)
        with AdminClient(source.bootstrap) as admin:
            admin.create_partitions({first: NewPartitions(PARTITIONS)})
            admin.create_topics([NewTopic(second, 2, 1, configs={"retention.bytes": "10000000"})])
        produce(source.bootstrap, first, 100, 400, PARTITIONS)  # now to partitions 1 and 2 too
        produce(source.bootstrap, second, 0, 200, 2)
        wait_caught_up(source.bootstrap, target.bootstrap, [first, second], group)
        mirror.stop()

    with AdminClient(target.bootstrap) as admin:
        described = admin.describe_topics([first, second])
    assert [len(described[t].partitions) for t in (first, second)] == [PARTITIONS, 2]
    assert read_partitions(target.bootstrap, first) == read_partitions(source.bootstrap, first)
    assert read_partitions(target.bootstrap, second) == expected_partitions(0, 200, 2)
    assert topic_configs(target.bootstrap, second) == {"retention.bytes": "10000000"}


def test_sync_topic_configs_keeps_existing_target_topics_in_step(clusters, names):
    source, target = clusters
    prefix, group = names
    topic = f"{prefix}-configs"
    with AdminClient(source.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, configs={"retention.ms": "1000000"})])
    with AdminClient(target.bootstrap) as admin:  # the target has it already, with an override of its own
        admin.create_topics([NewTopic(topic, 1, 1, configs={"segment.ms": "7200000"})])
    produce(source.bootstrap, topic, 0, 50, 1)
    with MirrorThread(mirror_config(source, target, topic, group, sync_topic_configs=True)) as mirror:
        wait_caught_up(source.bootstrap, target.bootstrap, [topic], group)
        with AdminClient(source.bootstrap) as admin:
            admin.incremental_alter_configs({ConfigResource(ResourceType.TOPIC, topic): [
                AlterConfigOp("retention.ms", "2000000"), AlterConfigOp("delete.retention.ms", "5000")]})
        _wait_for(lambda: topic_configs(target.bootstrap, topic) == {
            "retention.ms": "2000000", "delete.retention.ms": "5000"})
        with AdminClient(source.bootstrap) as admin:
            admin.incremental_alter_configs({ConfigResource(ResourceType.TOPIC, topic): [
                AlterConfigOp("delete.retention.ms", None, AlterConfigOpType.DELETE)]})
        _wait_for(lambda: topic_configs(target.bootstrap, topic) == {"retention.ms": "2000000"})
        mirror.stop()


def test_aborted_source_transactions_are_not_copied(clusters, names):
    source, target = clusters
    prefix, group = names
    topic = f"{prefix}-txn"
    with AdminClient(source.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    with Producer(source.bootstrap, transactional_id=f"{prefix}-writer") as producer:
        producer.init_transactions()
        for n, commit in enumerate((True, False, True, False)):
            producer.begin_transaction()
            for i in range(10):
                producer.send(topic, f"{n}-{i}".encode(), partition=0)
            producer.commit_transaction() if commit else producer.abort_transaction()
    with MirrorThread(mirror_config(source, target, topic, group)) as mirror:
        ends = wait_caught_up(source.bootstrap, target.bootstrap, [topic], group)
        progress = mirror.stop()
    values = [value for _, value, _, _ in read_partitions(target.bootstrap, topic)[0]]
    assert values == [f"{n}-{i}".encode() for n in (0, 2) for i in range(10)]
    # The position passed the aborted records and the markers: nothing is left to copy.
    assert progress.copied == 20 and progress.topics()[topic].lag == 0
    assert committed_positions(target.bootstrap, group) == ends


def test_a_second_mirror_with_the_same_group_fences_the_first(clusters, names):
    source, target = clusters
    prefix, group = names
    topic = f"{prefix}-fenced"
    create_filled_topic(source, topic, 10, 1)
    config = mirror_config(source, target, topic, group)
    first = MirrorThread(config).start()
    wait_caught_up(source.bootstrap, target.bootstrap, [topic], group)
    with MirrorThread(config) as second:
        _wait_for(lambda: second.mirror.progress.partitions)  # it has fenced the first and started
        produce(source.bootstrap, topic, 10, 20, 1)
        # The first finds out at its next write: copying the new records.
        _wait_for(lambda: not first.thread.is_alive())
        with pytest.raises(MirrorError, match="another mirror"):
            first.stop()
        wait_caught_up(source.bootstrap, target.bootstrap, [topic], group)
        second.stop()
    assert read_partitions(target.bootstrap, topic) == expected_partitions(0, 20, 1)


def _wait_for(condition) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.1)


class SlowCommit:
    """Holds the target's answer to the mirror's first committing EndTxn after ``arm()`` until
    the source has answered ``fetches`` more Fetch requests of the mirror (at most
    ``_HOLD_AT_MOST_S``): a commit as long as the source needs to be read that often."""

    _HOLD_AT_MOST_S = 15

    def __init__(self, source, target, transactional_id: str, fetches: int) -> None:
        self.source, self.target = source.broker, target.broker
        self.transactional_id, self.fetches = transactional_id, fetches
        self.armed = False
        self.seen = 0  # the mirror's Fetch requests to the source
        self.met: bool | None = None  # whether the source was read during the held commit

    def __enter__(self) -> SlowCommit:
        source_dispatch, target_dispatch = self.source.dispatch, self.target.dispatch

        def on_source(ctx, body):
            if ctx.api_key == ApiKey.FETCH and ctx.client_id == "odradek-mirror":
                self.seen += 1
            return source_dispatch(ctx, body)

        def on_target(ctx, body):
            answer = target_dispatch(ctx, body)
            if (ctx.api_key != ApiKey.END_TXN or not self.armed or not body.committed
                    or body.transactional_id != self.transactional_id):
                return answer
            self.armed = False
            return self._held(answer)

        self.source.dispatch, self.target.dispatch = on_source, on_target
        return self

    async def _held(self, answer):
        until, deadline = self.seen + self.fetches, time.monotonic() + self._HOLD_AT_MOST_S
        while self.seen < until and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        self.met = self.seen >= until
        return await answer if asyncio.iscoroutine(answer) else answer

    def arm(self) -> None:
        self.armed = True

    def __exit__(self, *exc) -> None:
        del self.source.dispatch, self.target.dispatch  # the class's method again


def test_the_source_is_read_while_a_transaction_commits(clusters, names):
    """The mirror's source consumer is in no group (there is no max.poll.interval.ms to miss):
    what a slow commit could cost is an idle source. Here a commit is held until the source
    has been fetched from 3 more times; records read meanwhile go in the next transaction,
    each copied once."""
    source, target = clusters
    prefix, group = names
    topic = f"{prefix}-slow-commit"
    create_filled_topic(source, topic, 200, 1)
    config = mirror_config(source, target, topic, group, consumer_config={"fetch_max_wait_ms": 10})
    with SlowCommit(source, target, config.transactional_id, fetches=3) as slow:
        with MirrorThread(config) as mirror:
            wait_caught_up(source.bootstrap, target.bootstrap, [topic], group)
            live = LiveProducer(source.bootstrap, topic, 200, 1200, 1, burst=100)
            slow.arm()
            live.start()
            live.finish()
            wait_caught_up(source.bootstrap, target.bootstrap, [topic], group)
            progress = mirror.stop()
    assert slow.met is True
    assert progress.copied == 1200
    assert read_partitions(target.bootstrap, topic) == expected_partitions(0, 1200, 1)


def test_a_mirror_from_a_cluster_into_itself_is_refused(clusters, names):
    source, _ = clusters
    prefix, group = names
    topic = f"{prefix}-self"
    create_filled_topic(source, topic, 10, 1)
    mirror = MirrorThread(mirror_config(source, source, topic, group)).start()
    mirror.thread.join(60)
    with pytest.raises(MirrorError, match=r"the source and the target are the same cluster \(cluster id .+\)"):
        mirror.stop()
    assert read_partitions(source.bootstrap, topic) == expected_partitions(0, 10, 1)
    assert committed_positions(source.bootstrap, group) == {}


def test_topics_mirrored_from_the_target_are_not_mirrored_back(clusters, names, caplog):
    """A mirror source -> target of topic t, and one target -> source of every topic: the
    second copies a topic of the target's own but not t, which the first copies into it."""
    source, target = clusters
    prefix, group = names
    there, own = f"{prefix}-there", f"{prefix}-own"
    with AdminClient(source.bootstrap) as admin:
        admin.create_topics([NewTopic(there, 1, 1)])
    with AdminClient(target.bootstrap) as admin:
        admin.create_topics([NewTopic(own, 1, 1)])
    produce(source.bootstrap, there, 0, 100, 1)
    produce(target.bootstrap, own, 0, 50, 1)
    with MirrorThread(mirror_config(source, target, there, group)) as forth:
        wait_caught_up(source.bootstrap, target.bootstrap, [there], group)
        back_group = f"{group}-back"
        with MirrorThread(mirror_config(target, source, f"{prefix}-.*", back_group)) as back:
            wait_caught_up(target.bootstrap, source.bootstrap, [own], back_group)
            produce(source.bootstrap, there, 100, 150, 1)
            wait_caught_up(source.bootstrap, target.bootstrap, [there], group)
            wait_caught_up(target.bootstrap, source.bootstrap, [own], back_group)  # a refresh later
            back_progress = back.stop()
        forth.stop()
    assert {tp.topic for tp in back_progress.partitions} == {own}
    assert read_partitions(source.bootstrap, there) == expected_partitions(0, 150, 1)
    assert read_partitions(target.bootstrap, there) == expected_partitions(0, 150, 1)
    assert read_partitions(source.bootstrap, own) == expected_partitions(0, 50, 1)
    assert f"topic {there} is left out: on the source it is a mirror of the target's topic" in caplog.text


def test_positions_committed_stop_where_records_read_ahead_begin():
    """Records read during a commit are sent in the next transaction: a commit before then
    (positions alone, or a refresh's) must not commit the consumer's position past them."""

    class Consumer:
        def assignment(self):
            return {TopicPartition("t", 0), TopicPartition("t", 1)}

        async def position(self, tp):
            return 10

    mirror = MirrorMaker(MirrorConfig("a:1", "b:1", "t"))
    mirror._consumer = Consumer()
    for tp in mirror._consumer.assignment():
        mirror.progress.start(tp, 3)  # committed up to 3 before
    mirror._held = {TopicPartition("t", 0): [Record(7, 0, None, b"v"), Record(8, 0, None, b"w")]}
    assert asyncio.run(mirror._positions()) == {TopicPartition("t", 0): 7, TopicPartition("t", 1): 10}
