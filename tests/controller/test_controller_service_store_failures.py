"""`ControllerService` when its store stops answering or its session expires: a controller cut
off by a network partition must not answer from decisions it could not write, must resign,
and must come back only through an election that reads the store afresh."""

from __future__ import annotations

import asyncio
import contextlib

from odradek.controller import events as ev
from odradek.controller.commands import LeaderAndIsrRequest
from odradek.controller.controller_service import ControllerService
from odradek.metadata import layout
from odradek.metadata.errors import StoreUnavailableError
from odradek.protocol.generated.error_codes import ErrorCode
from tests.controller.service_fakes import (
    FakeBroker,
    FakeChannel,
    async_wait_until,
    info,
    state,
    write_topic,
)

SESSION_TIMEOUT_MS = 300
"""How long the controller's writer waits out an unreachable store (a session timeout)."""

_STORE_CALLS = ("get", "set", "create", "delete", "multi", "children", "exists", "creation_id")


class Partition:
    """Cuts an `EmbeddedStore` off: every call raises `StoreUnavailableError` while ``down``."""

    def __init__(self, store) -> None:
        self.store = store
        self.down = False
        self.refused = 0
        for name in _STORE_CALLS:
            setattr(store, name, self._guard(getattr(store, name)))

    def _guard(self, call):
        def guarded(*args, **kwargs):
            if self.down:
                self.refused += 1
                raise StoreUnavailableError("the store is partitioned away")
            return call(*args, **kwargs)

        return guarded


def make_service(broker) -> tuple[ControllerService, FakeChannel]:
    channel = FakeChannel()
    service = ControllerService(broker, channel_manager=channel)
    channel.on_event = service.submit
    return service, channel


def make_broker() -> tuple[FakeBroker, int]:
    broker = FakeBroker(1, zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS)
    store = broker.metadata.store
    store.create(layout.broker_path(2), info(2).to_json(0), ephemeral=True)
    epoch2 = store.creation_id(layout.broker_path(2))
    write_topic(store, "t", {0: (1, 2)})
    return broker, epoch2


def shrink(broker, store) -> ev.AlterPartition:
    s = state(store, "t", 0)
    return ev.AlterPartition(1, broker.broker_epoch, ((("t", 0), s.leader_epoch, (1,), s.zk_version),))


def controller_epoch(store) -> int:
    return layout.decode_controller_epoch(store.get(layout.CONTROLLER_EPOCH)[0])


async def ask(service, event):
    return await asyncio.wrap_future(service.submit(event))


@contextlib.asynccontextmanager
async def started(broker):
    service, channel = make_service(broker)
    await service.start()
    try:
        yield service, channel
    finally:
        service.shutdown()


def test_alter_partition_is_not_answered_from_an_unwritten_isr():
    """The partition in the field: the controller-leader is cut from the store and shrinks its
    ISR to itself. The write cannot land; the reply is NOT_CONTROLLER, and the request sent
    again is NOT_CONTROLLER too (not NONE from the ISR the controller had put in memory)."""
    broker, _ = make_broker()
    store = broker.metadata.store
    cut = Partition(store)

    async def scenario():
        async with started(broker) as (service, _channel):
            before = state(store, "t", 0)
            epoch = controller_epoch(store)
            request = shrink(broker, store)
            cut.down = True
            for _ in range(3):
                reply = await ask(service, request)
                assert reply.error is ErrorCode.NOT_CONTROLLER, reply
            assert not service.active
            cut.down = False
            assert state(store, "t", 0) == before  # nothing was written
            # once the store answers, the broker is elected again, at a new epoch, from the
            # store's state: the same request is then written for real
            await async_wait_until(lambda: service.active and service.elections == 2,
                                   what="re-election")
            assert controller_epoch(store) > epoch
            reply = await ask(service, request)
            assert reply.error is ErrorCode.NONE and reply.partitions[0].error is ErrorCode.NONE
            assert state(store, "t", 0).isr == (1,)

    asyncio.run(scenario())


def test_no_request_is_sent_after_a_write_that_did_not_land():
    broker, epoch2 = make_broker()
    store = broker.metadata.store
    cut = Partition(store)

    async def scenario():
        async with started(broker) as (service, channel):
            sent_before = len(channel.of(LeaderAndIsrRequest))
            cut.down = True
            reply = await ask(service, ev.ControlledShutdown(2, epoch2))
            assert reply.error is ErrorCode.NOT_CONTROLLER
            assert len(channel.of(LeaderAndIsrRequest)) == sent_before
            assert state_unreadable_while_down(cut, store)

    asyncio.run(scenario())


def state_unreadable_while_down(cut: Partition, store) -> bool:
    cut.down = False
    try:
        return state(store, "t", 1) is None and state(store, "t", 0).leader == 1
    finally:
        cut.down = True


def test_a_session_expiry_mid_write_resigns_before_anything_else():
    """The store is unreachable and a write is being repeated when the store reports a new
    session (the old one expired): the write stops at once, the controller resigns, and an
    AlterPartition queued behind is answered NOT_CONTROLLER, not from the old context."""
    broker, _ = make_broker()
    store = broker.metadata.store
    cut = Partition(store)

    async def scenario():
        async with started(broker) as (service, _channel):
            service.writer.retry_for = 60.0  # a write would wait a minute for the store
            request = shrink(broker, store)
            cut.down = True
            first = asyncio.wrap_future(service.submit(request))
            await async_wait_until(lambda: cut.refused > 0, what="the write to be tried")
            second = asyncio.wrap_future(service.submit(request))
            service._on_new_session()  # what the store's thread does on a new session
            replies = await asyncio.wait_for(asyncio.gather(first, second), 10)
            assert [r.error for r in replies] == [ErrorCode.NOT_CONTROLLER] * 2
            assert not service.active
            assert state_isr(cut, store) == (1, 2)
            cut.down = False
            await async_wait_until(lambda: service.active and service.elections == 2,
                                   what="re-election")

    asyncio.run(scenario())


def state_isr(cut: Partition, store):
    down, cut.down = cut.down, False
    try:
        return state(store, "t", 0).isr
    finally:
        cut.down = down


def test_a_new_session_always_resigns_first_and_elects_at_a_new_epoch():
    """Kafka's ``Expire``: even when ``/controller`` still names this broker, the controller
    resigns and is elected again at a new epoch, reading the store afresh."""
    broker, _ = make_broker()
    store = broker.metadata.store

    async def scenario():
        async with started(broker) as (service, _channel):
            epoch = controller_epoch(store)
            service._on_new_session()
            await async_wait_until(lambda: service.elections == 2 and service.active,
                                   what="re-election")
            assert controller_epoch(store) == epoch + 1

    asyncio.run(scenario())
