"""`ControllerLiveness` on an embedded store and real sockets on 127.0.0.1: the controller's
listener gone (its registration unchanged) vacates ``/controller``; ``/controller`` naming
another broker, or this broker being the controller, vacates nothing."""

from __future__ import annotations

import asyncio
import socket

from odradek.controller.controller_liveness import ControllerLiveness
from odradek.metadata import layout
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.errors import NoNodeError
from odradek.metadata.layout import BrokerInfo, Endpoint

OWN_ID, CONTROLLER = 2, 1


def registered(store: EmbeddedStore, broker_id: int, port: int) -> None:
    store.ensure_path(layout.BROKER_IDS)
    info = BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", port),))
    store.create(layout.broker_path(broker_id), info.to_json(0), ephemeral=True)


def seat(store: EmbeddedStore, broker_id: int) -> None:
    store.create(layout.CONTROLLER, layout.encode_controller(broker_id, 0), ephemeral=True)


def controller_id(store: EmbeddedStore) -> int | None:
    try:
        return layout.decode_controller(store.get(layout.CONTROLLER)[0])
    except NoNodeError:
        return None


def liveness(store: EmbeddedStore) -> ControllerLiveness:
    return ControllerLiveness(OWN_ID, lambda b: b.info.endpoints[0], lambda: store)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def settle(watch: ControllerLiveness, condition, timeout: float = 5.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def test_a_controller_whose_listener_is_gone_is_voted_out():
    async def scenario():
        store = EmbeddedStore()
        registered(store, CONTROLLER, free_port())  # nothing listens there: refused
        seat(store, CONTROLLER)
        watch = liveness(store)
        watch.start(asyncio.get_running_loop())
        await asyncio.to_thread(watch.follow, CONTROLLER)
        assert await settle(watch, lambda: controller_id(store) is None)
        assert watch.vacated == [CONTROLLER]
        # if this broker wins the seat, its failover fails that registration at once
        czxid = store.creation_id(layout.broker_path(CONTROLLER))
        assert watch.gone_registrations() == {CONTROLLER: czxid}
        watch.shutdown()

    asyncio.run(scenario())


def test_a_live_controller_keeps_its_seat():
    async def scenario():
        store = EmbeddedStore()
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        registered(store, CONTROLLER, server.sockets[0].getsockname()[1])
        seat(store, CONTROLLER)
        watch = liveness(store)
        watch.start(asyncio.get_running_loop())
        await asyncio.to_thread(watch.follow, CONTROLLER)
        assert not await settle(watch, lambda: controller_id(store) is None, timeout=1.0)
        assert watch.gone_registrations() == {}
        watch.shutdown()
        server.close()

    asyncio.run(scenario())


def test_vacating_leaves_a_seat_another_broker_took():
    store = EmbeddedStore()
    seat(store, 3)
    watch = liveness(store)
    assert not watch.vacate(CONTROLLER, 5)
    assert controller_id(store) == 3
    store.delete(layout.CONTROLLER)
    assert not watch.vacate(CONTROLLER, 5)  # no seat at all


def test_this_broker_as_controller_is_not_watched():
    async def scenario():
        store = EmbeddedStore()
        registered(store, OWN_ID, free_port())
        seat(store, OWN_ID)
        watch = liveness(store)
        watch.start(asyncio.get_running_loop())
        await asyncio.to_thread(watch.follow, OWN_ID)
        await asyncio.sleep(0.5)
        assert controller_id(store) == OWN_ID and watch.vacated == []
        assert watch.monitor.machine.registrations == {}

    asyncio.run(scenario())
