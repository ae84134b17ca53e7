"""AsyncConsumer against a real broker: assign, seek, poll, multi-partition fetch, offsets by
time, pause/resume, out-of-range positions, iteration, deserializers, commits."""

from __future__ import annotations

import pytest

from odradek.client import (
    AsyncAdminClient,
    AsyncConsumer,
    AsyncProducer,
    BrokerError,
    ClientClosedError,
    ConsumerRecord,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    OffsetOutOfRangeError,
    TopicPartition,
)
from odradek.client.connection import BrokerConnection
from odradek.protocol.generated import ApiKey
from tests.client.helpers import create_topic, run

T0 = 1_650_000_000_000


async def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    """``per_partition`` records in each partition: value ``p-i``, timestamp ``T0 + 10 i``."""
    await create_topic(bootstrap, topic, partitions)
    async with AsyncProducer(bootstrap) as producer:
        for i in range(per_partition):
            for p in range(partitions):
                producer.send(topic, b"%d-%d" % (p, i), key=b"k%d" % i, partition=p, timestamp=T0 + 10 * i,
                              headers=[("i", b"%d" % i)])
        await producer.flush()


def test_poll_reads_every_partition_with_one_fetch_per_broker(broker, topic_name, monkeypatch):
    fetches = []
    real_send = BrokerConnection.send

    def recording_send(self, api_key, body, **kw):
        if api_key == ApiKey.FETCH:
            fetches.append(sorted(p.partition for t in body.topics for p in t.partitions))
        return real_send(self, api_key, body, **kw)

    async def main():
        await fill(broker.bootstrap, topic_name, 3, 200)
        monkeypatch.setattr(BrokerConnection, "send", recording_send)
        async with AsyncConsumer(broker.bootstrap, auto_offset_reset="earliest", max_poll_records=10_000) as consumer:
            consumer.assign([TopicPartition(topic_name, p) for p in range(3)])
            got = {p: [] for p in range(3)}
            while sum(map(len, got.values())) < 600:
                for tp, records in (await consumer.poll(5000)).items():
                    got[tp.partition].extend(records)
        for p in range(3):
            assert [(r.offset, r.value, r.key, r.timestamp, r.headers) for r in got[p]] == [
                (i, b"%d-%d" % (p, i), b"k%d" % i, T0 + 10 * i, (("i", b"%d" % i),)) for i in range(200)]
        assert fetches[0] == [0, 1, 2]  # the three partitions in one request

    run(main())


def test_seek_position_and_offsets(broker, topic_name):
    async def main():
        await fill(broker.bootstrap, topic_name, 2, 50)
        tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
        async with AsyncConsumer(broker.bootstrap) as consumer:  # auto_offset_reset latest
            consumer.assign([tp0, tp1])
            assert consumer.assignment() == {tp0, tp1}
            assert await consumer.position(tp0) == 50
            assert await consumer.poll(100) == {}
            consumer.seek(tp0, 47)
            consumer.seek_to_beginning(tp1)
            polled = await consumer.poll(5000, max_records=100)
            assert [r.offset for r in polled[tp0]] == [47, 48, 49]
            assert polled[tp1][0].offset == 0
            consumer.seek_to_end()
            assert await consumer.position(tp1) == 50
            assert consumer.highwater(tp0) == 50
            assert await consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
            assert await consumer.end_offsets([tp0]) == {tp0: 50}
            found = await consumer.offsets_for_times({tp0: T0 + 101, tp1: T0 + 10_000})
            assert (found[tp0].offset, found[tp0].timestamp) == (11, T0 + 110)
            assert found[tp1] is None  # no record that late
            assert await consumer.partitions_for_topic(topic_name) == [0, 1]
            assert topic_name in await consumer.topics()

    run(main())


def test_max_records_and_the_rest_of_a_batch_come_next(broker, topic_name):
    async def main():
        await fill(broker.bootstrap, topic_name, 1, 30)
        tp = TopicPartition(topic_name, 0)
        async with AsyncConsumer(broker.bootstrap, auto_offset_reset="earliest", max_poll_records=7) as consumer:
            consumer.assign([tp])
            offsets = []
            while len(offsets) < 30:
                records = (await consumer.poll(5000)).get(tp, [])
                assert len(records) <= 7
                offsets += [r.offset for r in records]
            assert offsets == list(range(30))

    run(main())


def test_pause_and_resume(broker, topic_name):
    async def main():
        await fill(broker.bootstrap, topic_name, 2, 5)
        tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
        async with AsyncConsumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([tp0, tp1])
            consumer.pause(tp1)
            assert consumer.paused() == {tp1}
            seen = set()
            for _ in range(3):
                seen |= set(await consumer.poll(100))
            assert seen == {tp0}
            consumer.resume(tp1)
            polled = await consumer.poll(5000)
            assert [r.offset for r in polled[tp1]] == [0, 1, 2, 3, 4]

    run(main())


def test_positions_out_of_range_follow_auto_offset_reset(broker, topic_name):
    async def main():
        await fill(broker.bootstrap, topic_name, 1, 20)
        tp = TopicPartition(topic_name, 0)
        async with AsyncAdminClient(broker.bootstrap) as admin:
            await admin.delete_records({tp: 5})
        for reset, expected in (("earliest", 5), ("latest", 20)):
            async with AsyncConsumer(broker.bootstrap, auto_offset_reset=reset) as consumer:
                consumer.assign([tp])
                consumer.seek(tp, 2)  # below the log start now
                first = None
                while first is None:
                    records = await consumer.poll(100)
                    if records:
                        first = records[tp][0].offset
                    elif await consumer.position(tp) != 2:
                        first = await consumer.position(tp)
                assert first == expected
        async with AsyncConsumer(broker.bootstrap, auto_offset_reset="none") as consumer:
            consumer.assign([tp])
            with pytest.raises(NoOffsetForPartitionError):
                await consumer.poll(100)
            consumer.seek(tp, 100)
            with pytest.raises(OffsetOutOfRangeError) as info:
                for _ in range(50):
                    await consumer.poll(100)
            assert info.value.partitions == {tp: 100}
            consumer.seek(tp, 7)
            assert (await consumer.poll(5000))[tp][0].offset == 7

    run(main())


def test_async_iteration_and_deserializers(broker, topic_name):
    async def main():
        await fill(broker.bootstrap, topic_name, 2, 3)
        async with AsyncConsumer(broker.bootstrap, auto_offset_reset="earliest",
                                 key_deserializer=bytes.decode, value_deserializer=bytes.decode) as consumer:
            consumer.assign([(topic_name, 0), (topic_name, 1)])
            got = []
            async for record in consumer:
                got.append(record)
                if len(got) == 6:
                    break
        assert all(isinstance(r, ConsumerRecord) for r in got)
        assert sorted((r.partition, r.offset, r.key, r.value) for r in got) == [
            (p, i, f"k{i}", f"{p}-{i}") for p in range(2) for i in range(3)]

    run(main())


def test_commit_and_committed_with_a_group(broker, topic_name):
    async def main():
        await fill(broker.bootstrap, topic_name, 1, 10)
        tp = TopicPartition(topic_name, 0)
        group = f"group-{topic_name}"
        async with AsyncConsumer(broker.bootstrap, group_id=group, auto_offset_reset="earliest") as consumer:
            consumer.assign([tp])
            assert await consumer.committed(tp) is None
            records = await consumer.poll(5000, max_records=4)
            assert [r.offset for r in records[tp]] == [0, 1, 2, 3]
            await consumer.commit()
            assert await consumer.committed(tp) == OffsetAndMetadata(4, "", -1)
            await consumer.commit({tp: OffsetAndMetadata(6, "note")})
        async with AsyncConsumer(broker.bootstrap, group_id=group) as consumer:
            consumer.assign([tp])  # starts at the committed offset, not by auto_offset_reset
            assert (await consumer.poll(5000))[tp][0].offset == 6
            assert (await consumer.committed(tp)).metadata == "note"

    run(main())


def test_closed_consumer_refuses_work(broker, topic_name):
    async def main():
        consumer = await AsyncConsumer(broker.bootstrap).start()
        await consumer.close()
        with pytest.raises(ClientClosedError):
            await consumer.poll(10)

    run(main())


def test_poll_of_a_partition_that_does_not_exist_returns_within_its_timeout(broker, topic_name, caplog):
    # With a one-second API timeout, waiting for the missing partition's leader (the old
    # behaviour) raised KafkaTimeoutError; Kafka's consumer returns nothing and says why.
    async def main():
        await fill(broker.bootstrap, topic_name, 1, 3)
        async with AsyncConsumer(broker.bootstrap, auto_offset_reset="earliest",
                                 default_api_timeout_ms=1000) as consumer:
            consumer.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 5),
                             TopicPartition(f"{topic_name}-nowhere", 0)])
            got = []
            while len(got) < 3:
                got += (await consumer.poll(200)).get(TopicPartition(topic_name, 0), [])
            assert await consumer.poll(200) == {}
            with pytest.raises(BrokerError, match="UNKNOWN_TOPIC_OR_PARTITION"):
                await consumer.position((topic_name, 5))
        return got

    with caplog.at_level("WARNING", logger="odradek.client.consumer"):
        assert [r.value for r in run(main())] == [b"0-0", b"0-1", b"0-2"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "odradek.client.consumer"]
    assert len(warnings) == 1, warnings
    assert f"{topic_name}-5" in warnings[0] and f"{topic_name}-nowhere-0" in warnings[0]
    assert f"topic '{topic_name}' has 1 partitions" in warnings[0]
    assert f"topic '{topic_name}-nowhere' does not exist" in warnings[0]
