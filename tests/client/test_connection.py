"""One broker connection: version negotiation, pipelining, timeouts, closing."""

from __future__ import annotations

import asyncio

import pytest

from odradek.client.connection import CLIENT_VERSIONS, BrokerConnection, negotiate
from odradek.client.errors import (
    ClientClosedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from odradek.protocol.api_keys import SUPPORTED
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.metadata_request import MetadataRequest
from tests.client.fake_broker import FakeBroker, metadata_response


def run(coroutine, timeout: float = 20):
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


def test_negotiate_takes_the_highest_version_in_both_ranges():
    client = {1: (4, 17), 3: (1, 12), 60: (0, 1), 19: (2, 7)}
    broker = {1: (0, 12), 3: (5, 9), 18: (0, 4), 19: (0, 1)}
    assert negotiate(client, broker) == {1: 12, 3: 9}  # 60 unknown to the broker, 19 disjoint


def test_real_broker_versions_are_the_highest_common_ones(broker):
    async def main():
        conn = await BrokerConnection("127.0.0.1", broker.port).connect()
        try:
            for key, (lo, hi) in CLIENT_VERSIONS.items():
                if key in SUPPORTED:
                    assert conn.versions[key] == min(hi, SUPPORTED[key][1])
            meta = await conn.send(ApiKey.METADATA, MetadataRequest(topics=[]))
            assert [b.node_id for b in meta.brokers] == [1]
        finally:
            await conn.close()

    run(main())


def test_narrow_and_missing_apis_of_a_broker():
    async def main():
        fake = await FakeBroker(1, lambda b, h, body: metadata_response([b], {}),
                                versions={ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 5)}).start()
        conn = await BrokerConnection("127.0.0.1", fake.port).connect()
        try:
            assert conn.api_version(ApiKey.METADATA) == 5
            with pytest.raises(UnsupportedVersionError):
                conn.api_version(ApiKey.PRODUCE)
            # An API the broker lacks fails in the future, not by raising from send.
            with pytest.raises(UnsupportedVersionError):
                await conn.send(ApiKey.FETCH, None)
            await conn.send(ApiKey.METADATA, MetadataRequest(topics=[]))
            assert fake.requests[-1][0].request_api_version == 5
        finally:
            await conn.close()
            await fake.close()

    run(main())


def test_responses_out_of_order_are_matched_by_correlation_id():
    held = []

    def handler(fake, header, body):
        # Answer nothing until three requests are in, then answer them last-first.
        future = asyncio.get_running_loop().create_future()
        held.append((future, body))
        if len(held) == 3:
            for f, b in reversed(held):
                f.set_result(metadata_response([fake], {t.name: [1] for t in b.topics}))
        return future

    async def main():
        fake = await FakeBroker(1, handler).start()
        conn = await BrokerConnection("127.0.0.1", fake.port).connect()
        try:
            futures = [conn.send(ApiKey.METADATA, MetadataRequest(topics=[_topic(f"t{i}")])) for i in range(3)]
            assert conn.in_flight == 3
            answers = await asyncio.gather(*futures)
            assert [a.topics[0].name for a in answers] == ["t0", "t1", "t2"]
        finally:
            await conn.close()
            await fake.close()

    run(main())


def test_a_request_without_answer_times_out_and_closes_the_connection():
    async def main():
        fake = await FakeBroker(1, lambda *a: None).start()  # never answers
        conn = await BrokerConnection("127.0.0.1", fake.port, request_timeout=0.3).connect()
        closed = []
        conn.on_close.append(closed.append)
        try:
            slow = conn.send(ApiKey.METADATA, MetadataRequest(topics=[]), timeout=0.2)
            later = conn.send(ApiKey.METADATA, MetadataRequest(topics=[]), timeout=10)
            with pytest.raises(KafkaTimeoutError):
                await slow
            with pytest.raises(KafkaConnectionError):
                await later  # the stream can no longer be trusted
            assert conn.closed and closed == [conn]
            with pytest.raises(KafkaConnectionError):
                await conn.send(ApiKey.METADATA, MetadataRequest(topics=[]))
        finally:
            await conn.close()
            await fake.close()

    run(main())


def test_close_fails_pending_requests_and_a_broker_hangup_fails_them_retriably():
    async def main():
        fake = await FakeBroker(1, lambda *a: None).start()
        conn = await BrokerConnection("127.0.0.1", fake.port).connect()
        pending = conn.send(ApiKey.METADATA, MetadataRequest(topics=[]))
        await conn.close()
        with pytest.raises(ClientClosedError):
            await pending
        conn = await BrokerConnection("127.0.0.1", fake.port).connect()
        pending = conn.send(ApiKey.METADATA, MetadataRequest(topics=[]))
        await asyncio.sleep(0.05)
        await fake.close()  # the broker goes away
        with pytest.raises(KafkaConnectionError) as info:
            await pending
        assert info.value.retriable
        await conn.close()

    run(main())


def test_connection_refused():
    async def main():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(KafkaConnectionError):
            await BrokerConnection("127.0.0.1", port).connect(timeout=2)

    run(main())


def _topic(name):
    from odradek.protocol.generated.metadata_request import MetadataRequestTopic

    return MetadataRequestTopic(name=name)
