"""Brokers' requests to the controller: the ControlledShutdown (7) and AlterPartition (56)
handlers at the controller, and `BrokerToControllerChannel` (in-process when the controller
is this broker, over a socket otherwise, retried on NOT_CONTROLLER and while none is known)."""

from __future__ import annotations

import asyncio

import pytest

from odradek.client.errors import KafkaTimeoutError
from odradek.controller.controller_service import ControllerService
from odradek.controller.request_encoding import encode_alter_partition
from odradek.metadata import layout
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.alter_partition_request import AlterPartitionRequest
from odradek.protocol.generated.controlled_shutdown_request import ControlledShutdownRequest
from odradek.protocol.generated.controlled_shutdown_response import ControlledShutdownResponse
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.broker_to_controller import BrokerToControllerChannel
from odradek.server.handlers import HANDLERS, alter_partition, controlled_shutdown
from odradek.server.request import RequestContext
from tests.controller.fake_kafka_server import FakeKafkaServer
from tests.controller.service_fakes import FakeBroker, FakeChannel, async_wait_until, info, state
from tests.controller.service_fakes import write_topic


class ControllerBroker(FakeBroker):
    """A fake broker whose in-process requests go to the real handlers."""

    def dispatch(self, ctx, body):
        self.dispatched.append((ctx, body))
        return HANDLERS[ctx.api_key](ctx, body)


class Conn:
    def __init__(self, broker):
        self.broker = broker
        self.listener_name = "PLAINTEXT"


def ctx(broker, api_key, version):
    return RequestContext(Conn(broker), api_key, version, 1, "test", version)


async def started(broker) -> ControllerService:
    channel = FakeChannel()
    broker.controller_service = ControllerService(broker, channel_manager=channel)
    channel.on_event = broker.controller_service.submit
    await broker.controller_service.start()
    return broker.controller_service


def test_registered_and_served():
    from odradek.client.connection import CLIENT_VERSIONS
    from odradek.protocol.api_keys import SUPPORTED

    for key in (ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION):
        assert key in HANDLERS and key in SUPPORTED
    for key in (4, 5, 6, 7, 56):
        assert key in CLIENT_VERSIONS


def test_controlled_shutdown_handler():
    store = EmbeddedStore()
    broker = ControllerBroker(1, store)
    other = FakeBroker(2, store)
    write_topic(store, "t", {0: (2, 1), 1: (1, 2)})

    async def scenario():
        service = await started(broker)
        try:
            request = ControlledShutdownRequest(2, other.broker_epoch)
            response = await controlled_shutdown.handle(ctx(broker, 7, 3), request)
            assert response.error_code == ErrorCode.NONE and response.remaining_partitions == []
            assert state(store, "t", 0).leader == 1
            # v1 carries no broker epoch, and -1 says none: refused, the broker stays electable
            for version, unchecked in ((1, ControlledShutdownRequest(1)), (3, ControlledShutdownRequest(1, -1))):
                response = await controlled_shutdown.handle(ctx(broker, 7, version), unchecked)
                assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
            assert 1 not in service.controller.ctx.shutting_down
            stale = ControlledShutdownRequest(2, other.broker_epoch + 5)
            response = await controlled_shutdown.handle(ctx(broker, 7, 3), stale)
            assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
        finally:
            service.shutdown()
        response = await controlled_shutdown.handle(ctx(broker, 7, 3), request)
        assert response.error_code == ErrorCode.NOT_CONTROLLER

    asyncio.run(scenario())


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_alter_partition_handler(version):
    store = EmbeddedStore()
    broker = ControllerBroker(1, store)
    FakeBroker(2, store)
    write_topic(store, "t", {0: (1, 2)})

    async def scenario():
        service = await started(broker)
        try:
            await async_wait_until(lambda: broker.metadata_image().topic("t"))
            topic_id = broker.metadata_image().topic("t").topic_id
            s = state(store, "t", 0)
            request = encode_alter_partition(1, broker.broker_epoch,
                                             [(("t", 0), s.leader_epoch, (1,), s.zk_version)],
                                             version, {"t": topic_id})
            response = await alter_partition.handle(ctx(broker, 56, version), request)
            assert response.error_code == ErrorCode.NONE
            (p,) = response.topics[0].partitions
            assert (p.error_code, list(p.isr), p.partition_epoch) == (0, [1], s.zk_version + 1)
            assert state(store, "t", 0).isr == (1,)
            if version >= 2:
                assert response.topics[0].topic_id == topic_id
                unknown = encode_alter_partition(1, broker.broker_epoch,
                                                 [(("x", 0), 0, (1,), 0)], version, {})
                response = await alter_partition.handle(ctx(broker, 56, version), unknown)
                assert response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
            stale = AlterPartitionRequest(broker_id=1, broker_epoch=broker.broker_epoch + 1)
            response = await alter_partition.handle(ctx(broker, 56, version), stale)
            assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
        finally:
            service.shutdown()

    asyncio.run(scenario())


def test_channel_in_process_when_this_broker_is_controller():
    store = EmbeddedStore()
    broker = ControllerBroker(1, store)
    other = FakeBroker(2, store)
    write_topic(store, "t", {0: (2, 1)})

    async def scenario():
        service = await started(broker)
        try:
            await async_wait_until(lambda: broker.metadata_image().controller_id == 1)
            channel = BrokerToControllerChannel(broker)
            response = await channel.send(ApiKey.CONTROLLED_SHUTDOWN,
                                          ControlledShutdownRequest(2, other.broker_epoch))
            assert isinstance(response, ControlledShutdownResponse)
            assert response.error_code == ErrorCode.NONE
            ctx_, _ = broker.dispatched[-1]
            assert ctx_.api_version == 3 and ctx_.api_key == ApiKey.CONTROLLED_SHUTDOWN
            # a builder gets the version
            seen = []

            def build(version):
                seen.append(version)
                return ControlledShutdownRequest(2, other.broker_epoch)

            await channel.send(ApiKey.CONTROLLED_SHUTDOWN, build)
            assert seen == [3]
        finally:
            service.shutdown()

    asyncio.run(scenario())


def test_channel_remote_retries_not_controller_then_answers():
    answers = [ErrorCode.NOT_CONTROLLER, ErrorCode.NONE]

    def answer(key, version, body):
        return ControlledShutdownResponse(error_code=answers.pop(0))

    async def scenario():
        server = FakeKafkaServer({ApiKey.CONTROLLED_SHUTDOWN: (0, 3)}, answer)
        port = await server.start()
        store = EmbeddedStore()
        broker = FakeBroker(1, store)
        store.create(layout.broker_path(2), info(2, port).to_json(0), ephemeral=True)
        store.create(layout.CONTROLLER, layout.encode_controller(2, 0), ephemeral=True)
        await async_wait_until(lambda: broker.metadata_image().controller_id == 2
                               and broker.metadata_image().broker(2))
        channel = BrokerToControllerChannel(broker, retry_backoff=0.01)
        response = await channel.send(ApiKey.CONTROLLED_SHUTDOWN, ControlledShutdownRequest(1, 5))
        assert response.error_code == ErrorCode.NONE
        assert [(k, v, b.broker_id) for k, v, b in server.received] == [(7, 3, 1), (7, 3, 1)]
        channel.close()
        await server.close()

    asyncio.run(scenario())


def test_channel_times_out_without_a_controller():
    broker = FakeBroker(1)

    async def scenario():
        channel = BrokerToControllerChannel(broker, retry_backoff=0.01)
        with pytest.raises(KafkaTimeoutError):
            await channel.send(ApiKey.CONTROLLED_SHUTDOWN, ControlledShutdownRequest(1, 5),
                               timeout=0.1)

    asyncio.run(scenario())
