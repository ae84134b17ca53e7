"""AsyncProducer against a real broker: placement, batching, compression, acks, idempotence,
callbacks, serializers, limits and closing."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from odradek.client import (
    AsyncAdminClient,
    AsyncProducer,
    BrokerError,
    BufferFullError,
    ClientClosedError,
    KafkaTimeoutError,
    RecordMetadata,
)
from odradek.client.partitioner import key_partition
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records import compression as codecs
from tests.client.helpers import create_topic, raw_batches, read_all, run


def test_send_returns_where_each_record_landed_and_they_read_back(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        async with AsyncProducer(broker.bootstrap) as producer:
            futures = [producer.send(topic_name, b"value-%d" % i, key=b"key-%d" % (i % 7),
                                     headers=[("n", str(i).encode()), ("none", None)] if i % 3 == 0 else None,
                                     timestamp=1_600_000_000_000 + i)
                       for i in range(500)]
            await producer.flush()
            results = [f.result() for f in futures]
        assert results == [RecordMetadata(topic_name, 0, i, 1_600_000_000_000 + i) for i in range(500)]
        records = (await read_all(broker.bootstrap, topic_name, 500))[0]
        for i, r in enumerate(records):
            assert (r.offset, r.key, r.value, r.timestamp) == (i, b"key-%d" % (i % 7), b"value-%d" % i,
                                                               1_600_000_000_000 + i)
            assert r.headers == ((("n", str(i).encode()), ("none", None)) if i % 3 == 0 else ())

    run(main())


def test_keyed_records_go_to_the_java_default_partition(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 7)
        keys = [b"k%d" % i for i in range(400)] + [b"", bytes(range(256))]
        async with AsyncProducer(broker.bootstrap, linger_ms=1) as producer:
            results = await asyncio.gather(*(producer.send(topic_name, b"v", key=k) for k in keys))
        assert [r.partition for r in results] == [key_partition(k, 7) for k in keys]

    run(main())


def test_unkeyed_records_fill_one_partition_per_batch(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 4)
        # 100-byte records, batches of at most ~9 records; linger long so batches fill.
        async with AsyncProducer(broker.bootstrap, batch_size=1100, linger_ms=1000) as producer:
            futures = [producer.send(topic_name, b"x" * 100) for _ in range(90)]
            await producer.flush()
        partitions = [f.result().partition for f in futures]
        runs = [len(list(group)) for _, group in itertools.groupby(partitions)]
        assert len(set(partitions)) > 1
        assert all(n == runs[0] for n in runs[:-1]) and 5 <= runs[0] <= 10, runs
        batches = await raw_batches(broker.bootstrap, topic_name, partitions[0])
        assert batches[0].header.records_count == runs[0]  # one run of the sticky partition = one batch

    run(main())


def test_explicit_partition_custom_partitioner_and_serializers(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 3)
        chosen = []

        def partitioner(topic, key, n):
            chosen.append((topic, key, n))
            return None if key == b'"default"' else 2

        async with AsyncProducer(broker.bootstrap, partitioner=partitioner,
                                 key_serializer=lambda k: json.dumps(k).encode(),
                                 value_serializer=lambda v: json.dumps(v).encode()) as producer:
            explicit = await producer.send(topic_name, {"a": 1}, partition=1)
            custom = await producer.send(topic_name, [1, 2], key="x")
            default = await producer.send(topic_name, None, key="default")  # a tombstone stays null
        assert (explicit.partition, custom.partition) == (1, 2)
        assert default.partition == key_partition(b'"default"', 3)
        assert chosen == [(topic_name, b'"x"', 3), (topic_name, b'"default"', 3)]
        records = await read_all(broker.bootstrap, topic_name, 3, partitions=3)
        assert records[1][0].value == b'{"a": 1}' and records[2][0].key == b'"x"'
        assert records[default.partition][-1].value is None

    run(main())


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(broker, topic_name, codec):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        async with AsyncProducer(broker.bootstrap, compression_type=codec, linger_ms=20) as producer:
            futures = [producer.send(topic_name, b"record %d " % i * 20, key=b"%d" % i) for i in range(300)]
            await producer.flush()
        assert [f.result().offset for f in futures] == list(range(300))
        batches = await raw_batches(broker.bootstrap, topic_name)
        assert {b.compression for b in batches} == {getattr(codecs, codec.upper())}
        records = (await read_all(broker.bootstrap, topic_name, 300))[0]
        assert [r.value for r in records] == [b"record %d " % i * 20 for i in range(300)]

    run(main())


def test_acks_zero_and_one(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        async with AsyncProducer(broker.bootstrap, acks=0) as producer:
            fire = [producer.send(topic_name, b"a%d" % i) for i in range(10)]
            await producer.flush()
        assert {f.result().offset for f in fire} == {-1}  # no answer, no offset
        async with AsyncProducer(broker.bootstrap, acks=1) as producer:
            assert (await producer.send(topic_name, b"b")).offset == 10
        assert len((await read_all(broker.bootstrap, topic_name, 11))[0]) == 11

    run(main())


def test_idempotence_stamps_producer_id_and_consecutive_sequences(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        async with AsyncProducer(broker.bootstrap, batch_size=500, linger_ms=0) as producer:  # acks=all
            futures = [producer.send(topic_name, b"v" * 50) for _ in range(60)]
            await producer.flush()
        assert [f.result().offset for f in futures] == list(range(60))
        headers = [b.header for b in await raw_batches(broker.bootstrap, topic_name)]
        assert len(headers) > 3 and len({h.producer_id for h in headers}) == 1 and headers[0].producer_id >= 0
        sequence = 0
        for h in headers:
            assert h.base_sequence == sequence
            sequence += h.records_count

    run(main())


def test_no_idempotence_with_acks_one_and_explicit_misconfiguration_is_refused(broker, topic_name):
    with pytest.raises(ValueError):
        AsyncProducer(broker.bootstrap, acks=1, enable_idempotence=True)

    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        async with AsyncProducer(broker.bootstrap, acks=1) as producer:
            await producer.send(topic_name, b"v")
        assert (await raw_batches(broker.bootstrap, topic_name))[0].header.producer_id == -1

    run(main())


def test_delivery_callbacks_and_send_and_wait(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        calls = []
        async with AsyncProducer(broker.bootstrap) as producer:
            for i in range(5):
                producer.send(topic_name, b"%d" % i, callback=lambda md, exc: calls.append((md.offset, exc)))
            await producer.flush()
            assert (await producer.send_and_wait(topic_name, b"last")).offset == 5
            producer.send(topic_name, b"x", partition=9, callback=lambda md, exc: calls.append((md, exc)))
            await producer.flush()
        assert calls[:5] == [(i, None) for i in range(5)]
        md, exc = calls[5]
        assert md is None and isinstance(exc, BrokerError) and exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(main())


def test_buffer_full_then_wait_for_buffer(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        async with AsyncProducer(broker.bootstrap, batch_size=1000, buffer_memory=3000, linger_ms=1000) as producer:
            futures = []
            refused = 0
            for i in range(100):
                while True:
                    try:
                        futures.append(producer.send(topic_name, b"%03d" % i * 30))
                        break
                    except BufferFullError:
                        refused += 1
                        await producer.wait_for_buffer()
            await producer.flush()
        assert refused > 0
        assert [f.result().offset for f in futures] == list(range(100))

    run(main())


def test_record_too_large_and_bad_partition_fail_their_future(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 2)
        async with AsyncProducer(broker.bootstrap, max_request_size=1000) as producer:
            too_big = producer.send(topic_name, b"x" * 2000)
            bad = producer.send(topic_name, b"x", partition=2)
            fine = producer.send(topic_name, b"x", partition=1)
            with pytest.raises(BrokerError) as info:
                await too_big
            assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
            with pytest.raises(BrokerError) as info:
                await bad
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert (await fine).offset == 0
            with pytest.raises(TypeError):
                producer.send(topic_name, "a str is not bytes", partition=1)

    run(main())


def test_unknown_topic_is_auto_created_or_times_out(broker, topic_name):
    async def main():
        async with AsyncProducer(broker.bootstrap, allow_auto_create_topics=False, max_block_ms=300) as producer:
            with pytest.raises(KafkaTimeoutError):
                await producer.send(topic_name + "-missing", b"v")
        async with AsyncProducer(broker.bootstrap) as producer:  # the broker auto-creates it
            futures = [producer.send(topic_name, b"v%d" % i) for i in range(3)]
            await producer.flush()
            assert [f.result().offset for f in futures] == [0, 1, 2]
            assert await producer.partitions_for(topic_name) == [0]

    run(main())


def test_close_delivers_what_is_queued_and_then_refuses(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        producer = await AsyncProducer(broker.bootstrap, linger_ms=5000).start()
        futures = [producer.send(topic_name, b"v") for _ in range(20)]
        await producer.close()
        assert [f.result().offset for f in futures] == list(range(20))
        with pytest.raises(ClientClosedError):
            producer.send(topic_name, b"late")

    run(main())


def test_new_partitions_are_used_once_metadata_shows_them(broker, topic_name):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 2)
        keys = [b"key-%d" % i for i in range(50)]
        async with AsyncProducer(broker.bootstrap) as producer:
            before = await asyncio.gather(*(producer.send(topic_name, b"v", key=k) for k in keys))
            async with AsyncAdminClient(broker.bootstrap) as admin:
                await admin.create_partitions({topic_name: 5})
            await producer.cluster.refresh([topic_name])
            after = await asyncio.gather(*(producer.send(topic_name, b"v", key=k) for k in keys))
        assert [r.partition for r in before] == [key_partition(k, 2) for k in keys]
        assert [r.partition for r in after] == [key_partition(k, 5) for k in keys]

    run(main())


def test_futures_are_awaited_gathered_cancelled_and_forwarded(broker, topic_name):
    import concurrent.futures

    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        async with AsyncProducer(broker.bootstrap, linger_ms=50) as producer:
            futures = [producer.send(topic_name, b"v%d" % i) for i in range(20)]
            assert asyncio.isfuture(futures[0]) and not futures[0].done()
            assert futures[3].cancel()  # the future, not the record
            outside = concurrent.futures.Future()
            assert producer.send(topic_name, b"w", callback=lambda md, exc: None, future=outside) is outside
            first = await futures[0]
            rest = await asyncio.gather(*(f for i, f in enumerate(futures) if i != 3))
            assert first.offset == 0 and [m.offset for m in rest] == [i for i in range(20) if i != 3]
            assert futures[3].cancelled()
            assert outside.result(timeout=0).offset == 20  # the cancelled record took offset 3
            held = producer.send(topic_name + "-new", b"h")  # topic metadata not known yet
            assert (await asyncio.wait_for(held, 30)).offset == 0

    run(main())


def test_send_before_start_is_refused():
    producer = AsyncProducer("127.0.0.1:1")
    with pytest.raises(RuntimeError, match="start"):
        producer.send("t", b"v")
