"""`BrokerLivenessMonitor` over real sockets on 127.0.0.1: a listener that goes away (with its
connections) is declared gone once the store still shows the probed registration; a listener
that never accepts (a stopped process: the kernel completes handshakes into its backlog) is
not; a registration moved to another endpoint is watched there instead."""

from __future__ import annotations

import asyncio
import functools
import socket

from odradek.controller.broker_liveness import State
from odradek.controller.broker_liveness_monitor import BrokerLivenessMonitor
from odradek.controller.commands import LiveBroker
from odradek.metadata.errors import NoNodeError
from odradek.metadata.layout import BrokerInfo, Endpoint

EPOCH = 77


class Store:
    """``/brokers/ids/1`` as the monitor reads it back: ``(epoch, port)``, or None."""

    def __init__(self, port: int | None) -> None:
        self.registration = None if port is None else (EPOCH, port)

    def creation_id(self, path: str) -> int:
        if self.registration is None:
            raise NoNodeError(path)
        return self.registration[0]

    def get(self, path: str):
        if self.registration is None:
            raise NoNodeError(path)
        return info(self.registration[1]).to_json(0), 0


def info(port: int) -> BrokerInfo:
    return BrokerInfo(1, (Endpoint("PLAINTEXT", "127.0.0.1", port),))


def listener(backlog: int = 8) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


def monitor(store: Store, gone: list) -> BrokerLivenessMonitor:
    return BrokerLivenessMonitor(0, lambda b: b.info.endpoints[0], lambda: store,
                                 lambda b, e: gone.append((b, e)), probe_timeout=2.0)


def in_loop(scenario):
    """A test of ``scenario`` (a coroutine function) run in a loop of its own."""
    @functools.wraps(scenario)
    def test():
        asyncio.run(scenario())
    return test


async def until(predicate, what: str, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.02)


async def accept(sock: socket.socket) -> socket.socket:
    conn, _ = await asyncio.get_running_loop().sock_accept(sock)
    return conn


@in_loop
async def test_a_process_gone_is_declared_once_its_connection_ends_and_its_port_refuses():
    sock = listener()
    port = sock.getsockname()[1]
    gone: list = []
    m = monitor(Store(port), gone)
    m.update({1: LiveBroker(1, EPOCH, info(port))})
    conn = await asyncio.wait_for(accept(sock), 10)  # the watch connection
    sock.close()  # what the kernel does when the process dies: the listener...
    conn.close()  # ...and every connection go
    await until(lambda: gone, "declared gone")
    assert gone == [(1, EPOCH)]
    assert m.machine.states[1] is State.GONE
    m.shutdown()


@in_loop
async def test_a_stopped_process_is_never_declared_gone():
    """SIGSTOP: the listener never accepts, but the kernel completes handshakes into its
    backlog; the watch connection stands, nothing is suspected."""
    sock = listener()
    port = sock.getsockname()[1]
    gone: list = []
    m = monitor(Store(port), gone)
    m.update({1: LiveBroker(1, EPOCH, info(port))})
    await asyncio.sleep(1.0)
    assert gone == []
    assert m.machine.states[1] is State.WATCHING
    m.shutdown()
    sock.close()


@in_loop
async def test_a_moved_listener_is_watched_at_its_new_endpoint_not_declared_gone():
    sock = listener()
    port = sock.getsockname()[1]
    moved = listener()
    new_port = moved.getsockname()[1]
    store = Store(port)
    gone: list = []
    m = monitor(store, gone)
    m.update({1: LiveBroker(1, EPOCH, info(port))})
    conn = await asyncio.wait_for(accept(sock), 10)
    store.registration = (EPOCH, new_port)  # the znode rewritten in place (same epoch)
    sock.close()
    conn.close()
    await until(lambda: m.machine.registrations[1].port == new_port, "watched at the new port")
    await asyncio.wait_for(accept(moved), 10)
    assert gone == []
    assert m.machine.states[1] is State.WATCHING
    m.shutdown()
    moved.close()


@in_loop
async def test_a_registration_already_gone_is_left_to_the_broker_watch():
    sock = listener()
    port = sock.getsockname()[1]
    sock.close()  # refuses from the start
    gone: list = []
    m = monitor(Store(None), gone)
    m.update({1: LiveBroker(1, EPOCH, info(port))})
    await until(lambda: m.machine.states.get(1) is State.GONE, "refused twice")
    await asyncio.sleep(0.2)
    assert gone == []
    m.update({})
    assert 1 not in m.machine.states
    m.shutdown()

