"""Retries against scripted brokers: leaders that move, idempotent resends kept in order,
coordinators and controllers that move, bootstrap addresses that are down."""

from __future__ import annotations

import asyncio

import pytest

from odradek.client import AsyncConsumer, AsyncProducer, TopicPartition
from odradek.client.admin import AsyncAdminClient
from odradek.client.admin_types import NewTopic
from odradek.client.cluster import ClusterClient
from odradek.client.coordinator import GroupCoordinatorClient
from odradek.client.errors import BrokerError, KafkaConnectionError, KafkaTimeoutError
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.create_topics_response import (
    CreatableTopicResult,
    CreateTopicsResponse,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from odradek.protocol.generated.find_coordinator_response import (
    Coordinator,
    FindCoordinatorResponse,
)
from odradek.protocol.generated.init_producer_id_response import InitProducerIdResponse
from odradek.protocol.generated.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from odradek.protocol.generated.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from odradek.records.batch import read_header
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.reader import read_batch
from tests.client.fake_broker import TOPIC_IDS, FakeBroker, metadata_response


def run(coroutine, timeout: float = 30):
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


class FakeCluster:
    """Two fake brokers sharing one view of who leads what."""

    def __init__(self, topics: dict[str, list[int]]) -> None:
        self.topics = topics
        self.controller = 1
        self.brokers: list[FakeBroker] = []

    async def start(self, handler) -> FakeCluster:
        def dispatch(fake, header, body):
            if header.request_api_key == ApiKey.METADATA:
                return metadata_response(self.brokers, self.topics, self.controller)
            return handler(fake, header, body)

        self.brokers = [await FakeBroker(n, dispatch).start() for n in (1, 2)]
        return self

    @property
    def bootstrap(self) -> str:
        return self.brokers[0].bootstrap

    async def close(self) -> None:
        for b in self.brokers:
            await b.close()


def produce_answer(body, code: int = 0, base_offset: int = 0):
    return ProduceResponse(responses=[
        TopicProduceResponse(t.name, [PartitionProduceResponse(p.index, code, base_offset if not code else -1)
                                      for p in t.partition_data])
        for t in body.topic_data])


def test_producer_follows_a_leader_that_moved():
    async def main():
        cluster = FakeCluster({"t": [1]})

        def handler(fake, header, body):
            if fake.node_id == 1:
                cluster.topics["t"] = [2]  # the leadership moved away
                return produce_answer(body, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return produce_answer(body, 0, base_offset=7)

        await cluster.start(handler)
        try:
            async with AsyncProducer(cluster.bootstrap, enable_idempotence=False, linger_ms=0,
                                     retry_backoff_ms=10) as producer:
                metadata = await producer.send("t", b"v", key=b"k")
                assert (metadata.partition, metadata.offset) == (0, 7)
            first = cluster.brokers[0].of(ApiKey.PRODUCE)
            second = cluster.brokers[1].of(ApiKey.PRODUCE)
            assert len(first) == 1 and len(second) == 1
            assert bytes(first[0].topic_data[0].partition_data[0].records) == \
                bytes(second[0].topic_data[0].partition_data[0].records)
        finally:
            await cluster.close()

    run(main())


def test_producer_refreshes_metadata_when_the_leader_cannot_be_reached():
    # The leader's broker went away between two sends (no request of ours was in flight to
    # fail): connecting to it fails, which must refresh the metadata (the new leader is
    # there) rather than try the dead address until metadata_max_age_ms.
    async def main():
        cluster = FakeCluster({"t": [2]})
        await cluster.start(lambda fake, header, body: produce_answer(body, 0, base_offset=fake.node_id * 10))
        try:
            async with AsyncProducer(cluster.bootstrap, enable_idempotence=False, linger_ms=0,
                                     retry_backoff_ms=10) as producer:
                assert (await producer.send("t", b"a")).offset == 20
                gone = cluster.brokers[1]
                gone._server.close()  # no new connections; the open one is cut
                for writer in gone._writers:
                    writer.close()
                cluster.topics["t"] = [1]
                await asyncio.sleep(0.3)  # the producer sees its connection closed
                metadata = await asyncio.wait_for(producer.send("t", b"b"), 5)
                assert metadata.offset == 10
        finally:
            await cluster.brokers[0].close()

    run(main())


class IdempotentLog:
    """A partition log that checks sequences like a broker: it refuses the first batch once
    (retriably), then anything out of order, and answers resends of appended batches with
    their first offset."""

    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.appended: dict[int, int] = {}  # base sequence -> base offset
        self.refused_first = False
        self.out_of_order = 0

    def append(self, records) -> tuple[int, int]:
        header = read_header(records)
        seq = header.base_sequence
        if seq == 0 and not self.refused_first:
            self.refused_first = True
            return ErrorCode.NOT_ENOUGH_REPLICAS, -1
        if seq in self.appended:
            return ErrorCode.NONE, self.appended[seq]
        if seq != len(self.values):
            self.out_of_order += 1
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        base = len(self.values)
        self.appended[seq] = base
        self.values.extend(r.value for r in read_batch(records).records())
        return ErrorCode.NONE, base


def test_idempotent_retries_keep_the_order_and_append_once():
    log = IdempotentLog()

    async def answer(body):
        await asyncio.sleep(0.01)  # keep several requests in flight
        parts = []
        for t in body.topic_data:
            for p in t.partition_data:
                code, base = log.append(bytes(p.records))
                parts.append(PartitionProduceResponse(p.index, code, base))
        return ProduceResponse(responses=[TopicProduceResponse("t", parts)])

    def handler(fake, header, body):
        if header.request_api_key == ApiKey.INIT_PRODUCER_ID:
            return InitProducerIdResponse(error_code=0, producer_id=42, producer_epoch=0)
        return answer(body)

    async def main():
        cluster = await FakeCluster({"t": [1]}).start(handler)
        try:
            async with AsyncProducer(cluster.bootstrap, batch_size=300, linger_ms=0,
                                     retry_backoff_ms=5) as producer:
                futures = []
                for i in range(200):
                    futures.append(producer.send("t", b"value-%03d" % i))
                    if i % 20 == 0:
                        await asyncio.sleep(0.002)
                results = await asyncio.gather(*futures)
            assert [r.offset for r in results] == list(range(200))
            assert log.values == [b"value-%03d" % i for i in range(200)]
            requests = cluster.brokers[0].of(ApiKey.PRODUCE)
            assert log.out_of_order > 0  # batches behind the refused one came back too
            headers = [read_header(bytes(r.topic_data[0].partition_data[0].records)) for r in requests]
            assert {h.producer_id for h in headers} == {42}
        finally:
            await cluster.close()

    run(main())


def test_consumer_follows_a_leader_that_moved():
    batch = BatchBuilder(BatchSpec(base_offset=0))
    for i in range(5):
        batch.append(1000 + i, b"k", b"v%d" % i)
    records = batch.build()

    async def later_empty(header):
        await asyncio.sleep(0.05)
        return fetch_answer(header, b"", 5)

    def fetch_answer(header, data, hw, code=0):
        topic_id = TOPIC_IDS["t"]
        return FetchResponse(responses=[FetchableTopicResponse(
            topic="t", topic_id=topic_id,
            partitions=[PartitionData(partition_index=0, error_code=code, high_watermark=hw, records=data)])])

    async def main():
        cluster = FakeCluster({"t": [1]})
        served = []

        def handler(fake, header, body):
            if fake.node_id == 1:
                cluster.topics["t"] = [2]
                return fetch_answer(header, b"", -1, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if not served:
                served.append(1)
                return fetch_answer(header, records, 5)
            return later_empty(header)

        await cluster.start(handler)
        try:
            async with AsyncConsumer(cluster.bootstrap, retry_backoff_ms=10) as consumer:
                tp = TopicPartition("t", 0)
                consumer.assign([tp])
                consumer.seek(tp, 2)
                got = []
                while len(got) < 3:
                    got += (await consumer.poll(2000)).get(tp, [])
                assert [(r.offset, r.value) for r in got] == [(2, b"v2"), (3, b"v3"), (4, b"v4")]
                assert await consumer.position(tp) == 5
        finally:
            await cluster.close()

    run(main())


def test_coordinator_that_moved_is_found_again():
    async def main():
        answers = iter([ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NONE])
        found = []

        def handler(fake, header, body):
            if header.request_api_key == ApiKey.FIND_COORDINATOR:
                found.append(fake.node_id)
                return FindCoordinatorResponse(
                    node_id=1, host="127.0.0.1", port=fake.port,
                    coordinators=[Coordinator(body.coordinator_keys[0], 1, "127.0.0.1", fake.port)]
                    if header.request_api_version >= 4 else [])
            code = next(answers)
            part = {"partition_index": 0, "committed_offset": 9, "metadata": "m", "error_code": 0}
            if header.request_api_version >= 8:
                return OffsetFetchResponse(groups=[OffsetFetchResponseGroup(
                    "g", [OffsetFetchResponseTopics("t", [OffsetFetchResponsePartitions(**part)])], code)])
            return OffsetFetchResponse(error_code=code, topics=[
                OffsetFetchResponseTopic("t", [OffsetFetchResponsePartition(**part)])])

        cluster = await FakeCluster({"t": [1]}).start(handler)
        client = ClusterClient(cluster.bootstrap, retry_backoff_ms=5)
        try:
            await client.start()
            coordinator = GroupCoordinatorClient(client, "g")
            offsets = await coordinator.fetch_offsets([TopicPartition("t", 0)])
            assert offsets[TopicPartition("t", 0)].offset == 9
            assert len(found) == 2  # NOT_COORDINATOR sent it looking again; loading did not
            await coordinator.close()
        finally:
            await client.close()
            await cluster.close()

    run(main())


def test_admin_retries_on_the_new_controller():
    async def main():
        cluster = FakeCluster({})

        def handler(fake, header, body):
            if fake.node_id == 1:
                cluster.controller = 2
                code = ErrorCode.NOT_CONTROLLER
            else:
                code = ErrorCode.NONE
            return CreateTopicsResponse(topics=[CreatableTopicResult(name=t.name, error_code=code)
                                                for t in body.topics])

        await cluster.start(handler)
        try:
            async with AsyncAdminClient(cluster.bootstrap, retry_backoff_ms=5) as admin:
                await admin.create_topics([NewTopic("x", 1, 1)])
            assert len(cluster.brokers[0].of(ApiKey.CREATE_TOPICS)) == 1
            assert len(cluster.brokers[1].of(ApiKey.CREATE_TOPICS)) == 1
        finally:
            await cluster.close()

    run(main())


def test_bootstrap_skips_an_address_that_is_down_and_retry_gives_up_on_fatal_errors():
    async def main():
        cluster = await FakeCluster({}).start(lambda *a: None)
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        dead = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        client = ClusterClient(f"127.0.0.1:{dead},{cluster.bootstrap}", retry_backoff_ms=5)
        try:
            await client.start()
            assert set(client.metadata.brokers) == {1, 2}
            calls = []

            async def flaky():
                calls.append(1)
                if len(calls) < 3:
                    raise KafkaConnectionError("lost")
                if len(calls) == 3:
                    raise BrokerError(ErrorCode.INVALID_CONFIG)
                return "never"

            with pytest.raises(BrokerError) as info:
                await client.retry(flaky, client.loop.time() + 10)
            assert info.value.code == ErrorCode.INVALID_CONFIG and len(calls) == 3
        finally:
            await client.close()
            await cluster.close()

    run(main())


def test_a_record_nobody_answers_for_fails_after_the_delivery_timeout():
    async def main():
        cluster = await FakeCluster({"t": [1]}).start(lambda *a: None)  # Produce never answered
        try:
            async with AsyncProducer(cluster.bootstrap, enable_idempotence=False, linger_ms=0,
                                     request_timeout_ms=200, delivery_timeout_ms=700,
                                     retry_backoff_ms=10) as producer:
                with pytest.raises((KafkaTimeoutError, KafkaConnectionError)):
                    await producer.send("t", b"v")
            assert len(cluster.brokers[0].of(ApiKey.PRODUCE)) >= 2  # retried before giving up
        finally:
            await cluster.close()

    run(main())
