"""`ControllerLiveness`: every other broker's fast detection of a controller whose process is
gone, so that a kill -9 of the controller is not waited out for its ZooKeeper session.

A controller killed keeps ``/controller`` (an ephemeral znode of its session) until its session
expires (``zookeeper.session.timeout.ms``): no broker may run for the seat meanwhile, and with no
controller nobody moves the dead broker's leaderships either. The controller detects a dead
broker through `broker_liveness.BrokerLiveness`; this is the same detection pointed the other
way: each broker that is not the controller watches the controller's inter-broker endpoint with
a `broker_liveness_monitor.BrokerLivenessMonitor` (a plain TCP connection, two refusals
`broker_liveness.CONFIRM_DELAY_S` apart, the registration read back unchanged), and when the
controller's process is found gone, it vacates ``/controller``: deletes it, with the version it
read, if it still names that broker. Every broker's ``/controller`` watch then runs an election
(`controller_service.ControllerService`), and the new controller's own monitor finds the dead
broker gone and handles it as failed (`events.BrokerProcessGone`); a new controller that found
it gone itself fails it from the start (`gone_registrations`), and the first elections of its
failover already move the dead controller's leaderships.

Why vacating is safe: the dead controller can write nothing more (its process is gone), and a
live controller wrongly taken for dead (a firewall that rejects connections, see
`broker_liveness`) only loses its seat: its context is dropped when its ``/controller`` watch
fires, and every write of a controller is fenced by the ``/controller_epoch`` version, which the
next controller bumps. It costs an election, never data; and the monitor declares a
registration gone at most once, so a broker is never voted out in a loop.

Threads: `follow` is called on the controller's event thread (it reads the store there);
the monitor runs on the broker's loop; the vacating write runs in the loop's executor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from odradek.controller.broker_liveness_monitor import BrokerLivenessMonitor, read_live_broker
from odradek.controller.commands import LiveBroker
from odradek.metadata import layout
from odradek.metadata.errors import BadVersionError, NoNodeError, StoreError
from odradek.metadata.layout import Endpoint

log = logging.getLogger(__name__)


class ControllerLiveness:
    """See the module docstring. ``endpoint_of(live_broker)`` gives a broker's inter-broker
    `Endpoint`; ``store()`` the metadata store."""

    def __init__(self, own_id: int, endpoint_of: Callable[[LiveBroker], Endpoint | None],
                 store: Callable[[], object]) -> None:
        self.own_id = own_id
        self.store = store
        self.monitor = BrokerLivenessMonitor(own_id, endpoint_of, store, self._on_gone, log_gone=False)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.vacated: list[int] = []
        """Controllers whose ``/controller`` this broker deleted (tests, diagnostics)."""
        self._gone: dict[int, int] = {}

    def gone_registrations(self) -> dict[int, int]:
        """The registrations (broker id: epoch) of controllers found gone here: a broker that
        takes the seat next fails them at once (`events.ClusterSnapshot.fenced_registrations`).
        A registration the store no longer holds, or holds at another epoch, is no longer
        fenced there. Any thread."""
        return dict(self._gone)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def follow(self, controller_id: int) -> None:
        """Watch ``controller_id`` (-1: none, or this broker itself: watch nobody). Reads its
        registration from the store; call from any thread but the loop's."""
        live = {}
        if controller_id not in (-1, self.own_id):
            try:
                found = read_live_broker(self.store(), controller_id)
            except (StoreError, ValueError):  # unreadable: its session decides
                found = None
            if found is not None:  # (None: gone already)
                live = {controller_id: found}
        self._call(self.monitor.update, live)

    def shutdown(self) -> None:
        self._call(self.monitor.shutdown)

    def _call(self, fn, *args) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop closed in between
            pass

    def _on_gone(self, broker_id: int, epoch: int) -> None:
        """On the loop: the monitor read the registration back unchanged."""
        self._gone = {**self._gone, broker_id: epoch}  # swapped whole: read on other threads
        asyncio.get_running_loop().run_in_executor(None, self.vacate, broker_id, epoch)

    def vacate(self, broker_id: int, epoch: int) -> bool:
        """Delete ``/controller`` if it still names ``broker_id`` (at the version read, so a
        seat taken meanwhile is left alone); whether it was deleted."""
        store = self.store()
        try:
            data, version = store.get(layout.CONTROLLER)
            if layout.decode_controller(data) != broker_id:
                return False
            store.delete(layout.CONTROLLER, version)
        except (NoNodeError, BadVersionError):
            return False
        except (StoreError, ValueError) as e:
            log.info("broker %d: the controller %d is gone but /controller could not be vacated (%s): "
                     "left to its session", self.own_id, broker_id, e)
            return False
        self.vacated.append(broker_id)
        log.warning("broker %d: the controller %d (epoch %d) refuses connections: its process is gone; "
                    "/controller vacated for an election before its session expires",
                    self.own_id, broker_id, epoch)
        return True
