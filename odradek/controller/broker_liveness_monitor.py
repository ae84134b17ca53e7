"""`BrokerLivenessMonitor`: the I/O edge of `broker_liveness.BrokerLiveness` on the controller's
asyncio loop, a part of `channel_manager.ControllerChannelManager` (which follows the
controller's live broker set and hands it over with `update`).

Per live broker other than this one, one task carries out the machine's latest `Probe`: wait
its delay, open a plain TCP connection to the broker's inter-broker endpoint (no request is
ever sent on it; TLS and SASL listeners accept the TCP handshake all the same), report OK,
REFUSED (every address of the endpoint refused) or TIMEOUT (`PROBE_TIMEOUT_S`, or any other
error); once accepted, keep the connection and report `connection_lost` when it ends (the
broker closes it, or its process dies and the kernel closes it). A broker that closes idle
connections (``connections.max.idle.ms``) only costs a reconnect.

On `DeclareGone` the registration is read back from the store first (off the loop): the
broker is declared gone (``on_gone(broker_id, epoch)``, which the channel manager turns into
`events.BrokerProcessGone`) only if ``/brokers/ids/<id>`` still has the probed epoch (czxid)
and endpoint. A znode already gone is left to the controller's broker watch; one with another
endpoint (a dynamic listener change, which rewrites the znode in place, and which the
controller's live set does not follow) is fed to the machine as a new registration, so a
broker moving its listener is never taken for dead.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Mapping

from odradek.controller.broker_liveness import (
    Action,
    BrokerLiveness,
    DeclareGone,
    Forget,
    Probe,
    ProbeResult,
    Registration,
)
from odradek.controller.commands import LiveBroker
from odradek.metadata import layout
from odradek.metadata.errors import NoNodeError, StoreError
from odradek.metadata.layout import BrokerInfo, Endpoint

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 1.0
"""A connection not accepted within this long is a TIMEOUT: an unreachable or overloaded
broker, never a gone one (a live listener's kernel completes the handshake even when the
process is stopped)."""


class _Watch(asyncio.Protocol):
    """A connection that is only waited on: ``lost`` resolves when it ends."""

    def __init__(self) -> None:
        self.lost: asyncio.Future = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:  # nothing is asked, nothing expected
        pass

    def connection_lost(self, exc) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


class BrokerLivenessMonitor:
    """See the module docstring. Every method runs on the loop's thread.

    ``endpoint_of(live_broker)`` gives the broker's inter-broker `Endpoint` (None: none, not
    watched); ``store()`` the metadata store (read back before declaring);
    ``on_gone(broker_id, epoch)`` is called once per registration found gone (logged here
    unless ``log_gone`` is false: the caller says what it does about it)."""

    def __init__(
        self,
        own_id: int,
        endpoint_of: Callable[[LiveBroker], Endpoint | None],
        store: Callable[[], object],
        on_gone: Callable[[int, int], object],
        *,
        probe_timeout: float = PROBE_TIMEOUT_S,
        log_gone: bool = True,
    ) -> None:
        self.own_id = own_id
        self.endpoint_of = endpoint_of
        self.store = store
        self.on_gone = on_gone
        self.probe_timeout = probe_timeout
        self.log_gone = log_gone
        self.machine = BrokerLiveness()
        self._given: dict[int, LiveBroker] = {}  # what `update` last gave, per broker
        self._tasks: dict[int, asyncio.Task] = {}
        self._closed = False

    def update(self, live: Mapping[int, LiveBroker]) -> None:
        """Follow the controller's live set: registrations new or changed since the last
        call are watched afresh, brokers gone from it are forgotten."""
        if self._closed:
            return
        for broker_id in [b for b in self._given if b not in live]:
            del self._given[broker_id]
            self._apply(self.machine.unregistered(broker_id))
        for broker_id, target in live.items():
            if broker_id == self.own_id or self._given.get(broker_id) == target:
                continue
            self._given[broker_id] = target
            endpoint = self.endpoint_of(target)
            if endpoint is None:
                self._apply(self.machine.unregistered(broker_id))
                continue
            self._apply(self.machine.registered(
                broker_id, Registration(target.epoch, endpoint.host, endpoint.port)))

    def shutdown(self) -> None:
        self._closed = True
        for broker_id in list(self._tasks):
            self._cancel(broker_id)

    # -- actions ------------------------------------------------------------------------------

    def _apply(self, actions: list[Action]) -> None:
        for action in actions:
            if self._closed:
                return
            if isinstance(action, Forget):
                self._cancel(action.broker_id)
            elif isinstance(action, Probe):
                self._start(action.broker_id, self._probe(action))
            elif isinstance(action, DeclareGone):
                self._start(action.broker_id, self._confirm_gone(action))

    def _start(self, broker_id: int, coro) -> None:
        """The broker's task becomes ``coro`` (the one running, if it asked, just returns)."""
        self._cancel(broker_id)
        self._tasks[broker_id] = asyncio.get_running_loop().create_task(
            coro, name=f"controller-liveness-{broker_id}")

    def _cancel(self, broker_id: int) -> None:
        task = self._tasks.pop(broker_id, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _probe(self, probe: Probe) -> None:
        if probe.delay_s:
            await asyncio.sleep(probe.delay_s)
        registration = probe.registration
        result, transport, watch = await self._connect(registration)
        self._apply(self.machine.probe_result(probe.broker_id, registration, result))
        if watch is None:
            return
        opened = asyncio.get_running_loop().time()
        try:
            await watch.lost
        finally:
            transport.abort()
        lasted = asyncio.get_running_loop().time() - opened
        self._apply(self.machine.connection_lost(probe.broker_id, registration, lasted))

    async def _connect(self, registration: Registration):
        """``(result, transport, watch)``: REFUSED only when every address refused."""
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(registration.host, registration.port, type=socket.SOCK_STREAM),
                self.probe_timeout)
        except (OSError, asyncio.TimeoutError):
            return ProbeResult.TIMEOUT, None, None
        refused = 0
        for family, _, proto, _, address in infos:
            try:
                transport, watch = await asyncio.wait_for(loop.create_connection(
                    _Watch, address[0], address[1], family=family, proto=proto), self.probe_timeout)
            except ConnectionRefusedError:
                refused += 1
            except (OSError, asyncio.TimeoutError):
                pass
            else:
                return ProbeResult.OK, transport, watch
        if infos and refused == len(infos):
            return ProbeResult.REFUSED, None, None
        return ProbeResult.TIMEOUT, None, None

    async def _confirm_gone(self, declare: DeclareGone) -> None:
        """Read the registration back; declare only if it is the one probed."""
        broker_id, epoch = declare.broker_id, declare.epoch
        probed = self.machine.registrations.get(broker_id)
        try:
            now = await asyncio.get_running_loop().run_in_executor(None, self._read_registration, broker_id)
        except StoreError as e:
            log.info("controller: broker %d refuses connections but its registration cannot be "
                     "read (%s): left to its session", broker_id, e)
            return
        if now is None or probed is None:
            return
        if now != probed:
            self._apply(self.machine.registered(broker_id, now))
            return
        if self.log_gone:
            log.warning("controller: broker %d (epoch %d) refuses connections at %s:%d: its process is "
                        "gone; handled as failed before its session expires", broker_id, epoch,
                        probed.host, probed.port)
        self.on_gone(broker_id, epoch)

    def _read_registration(self, broker_id: int) -> Registration | None:
        """``/brokers/ids/<id>`` as a `Registration` (None: absent, or no such endpoint)."""
        live = read_live_broker(self.store(), broker_id)
        endpoint = None if live is None else self.endpoint_of(live)
        return None if endpoint is None else Registration(live.epoch, endpoint.host, endpoint.port)


def read_live_broker(store, broker_id: int) -> LiveBroker | None:
    """``/brokers/ids/<id>`` with its epoch (the znode's czxid); None when absent."""
    path = layout.broker_path(broker_id)
    try:
        epoch = store.creation_id(path)
        data, _ = store.get(path)
    except NoNodeError:
        return None
    return LiveBroker(broker_id, epoch, BrokerInfo.from_json(broker_id, data))
