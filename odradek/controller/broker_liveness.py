"""`BrokerLiveness`: the controller's fast detection of a broker whose process is gone, as a
pure state machine (no sockets, no clock): the edge (`broker_liveness_monitor`) feeds it what
it saw and carries out the actions it returns.

Why: a broker killed (kill -9, a crash) keeps its ``/brokers/ids/<id>`` znode until its
ZooKeeper session expires (``zookeeper.session.timeout.ms``), so Kafka's controller
(``KafkaController.onBrokerFailure``) moves its leaderships only then. But the kernel closes a
dead process's sockets at once: the controller's connection to it ends (EOF or RST), and a new
connection to its registered endpoint is refused (ECONNREFUSED: no socket listens there). A
live broker's listener does not refuse: a stopped (SIGSTOP) or overloaded one still completes
handshakes into its accept backlog, or lets them time out when the backlog is full; a broker
cut off by the network times out or gets EHOSTUNREACH. So two refusals of the registered
endpoint, `CONFIRM_DELAY_S` apart, with no accepted connection between them, say that the
registration's process is gone, and the controller can handle it as a failure long before
the session expires (`events.BrokerProcessGone`). The one exception: a firewall that rejects
(iptables ``REJECT``, ICMP port unreachable) makes a live broker look gone; it is then
handled as failed until it registers again, which costs availability, never data: leader
epochs and the ISR's znode version fence it as they fence any deposed leader.

Per broker the machine knows its current `Registration` (broker epoch, i.e. the czxid of its
znode, and the inter-broker endpoint) and one state:

=========  =========================================================================
WATCHING   a connection is open or being opened (`Probe` sent); nothing suspected
SUSPECT    the last probe was refused; a confirming `Probe` is due after the delay
GONE       refused twice: `DeclareGone` was returned; nothing more for this
           registration (only a new registration, `registered`, starts over)
=========  =========================================================================

Transitions (``r`` the broker's current registration; a report about any other
registration is stale, e.g. a refusal of the old endpoint after the broker registered
again, and is ignored):

* ``registered(b, r)``: a new or changed registration -> WATCHING, `Probe` (no delay);
  the same registration again -> nothing.
* ``unregistered(b)``: forgotten (the edge closes its connection, `Forget`).
* ``connection_lost(b, r, lasted_s)`` in WATCHING -> WATCHING, `Probe`: at once, unless
  this connection and the one before both lasted less than `RETRY_DELAY_S`: then after
  that delay (a broker that closes new connections at once, over its ``max.connections``
  say, is not reconnected to in a loop). One short connection is normal at a death: the
  kernel closes a dying process's sockets one by one, so the probe that follows the first
  EOF can still be accepted into the listener's backlog, and is reset a moment later.
* ``probe_result(b, r, OK)`` -> WATCHING (the edge keeps that connection and waits for it
  to end).
* ``probe_result(b, r, TIMEOUT)`` (or any other failure) -> WATCHING, `Probe` after
  `RETRY_DELAY_S`: unreachable is not gone, and any refusal count starts over.
* ``probe_result(b, r, REFUSED)``: in WATCHING -> SUSPECT, `Probe` after `CONFIRM_DELAY_S`;
  in SUSPECT -> GONE, `DeclareGone(b, r.epoch)`.

Invariant: `DeclareGone` for a registration follows two REFUSED reports for that same
registration with no OK or TIMEOUT report between them, and is returned at most once while
that registration stays the broker's current one.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

CONFIRM_DELAY_S = 0.15
"""Between the first refusal and the confirming probe. A listener is only ever absent while
its process is gone (a broker binds its listeners before it registers, see
``odradek/server/broker.py``); the second look guards against a port being rebound at that
moment (a dynamic listener change), and costs 150 ms of the failover."""

RETRY_DELAY_S = 1.0
"""Between attempts to reach a broker that does not answer (a timeout, an unreachable host):
not a sign of death; the ZooKeeper session decides those."""


class ProbeResult(enum.Enum):
    OK = "ok"  # the connection was accepted
    REFUSED = "refused"  # ECONNREFUSED: nothing listens at the endpoint
    TIMEOUT = "timeout"  # no answer in time, or any other failure (unreachable, reset, ...)


class State(enum.Enum):
    WATCHING = "watching"
    SUSPECT = "suspect"
    GONE = "gone"


@dataclass(frozen=True)
class Registration:
    """What the controller knows of a broker's registration: its epoch (the czxid of
    ``/brokers/ids/<id>``) and its endpoint on the inter-broker listener."""

    epoch: int
    host: str
    port: int


@dataclass(frozen=True)
class Probe:
    """Connect to ``registration``'s endpoint after ``delay_s`` and report `probe_result`;
    when accepted, keep the connection and report `connection_lost` when it ends."""

    broker_id: int
    registration: Registration
    delay_s: float = 0.0


@dataclass(frozen=True)
class DeclareGone:
    """The process of ``broker_id``'s registration at ``epoch`` is gone: hand the controller
    `events.BrokerProcessGone`."""

    broker_id: int
    epoch: int


@dataclass(frozen=True)
class Forget:
    """Stop watching ``broker_id`` (close its connection, drop a pending probe)."""

    broker_id: int


Action = Probe | DeclareGone | Forget


class BrokerLiveness:
    """See the module docstring. ``states`` and ``registrations`` are readable by tests."""

    def __init__(self) -> None:
        self.registrations: dict[int, Registration] = {}
        self.states: dict[int, State] = {}
        self.quick_losses: dict[int, int] = {}
        """Broker -> watched connections in a row that ended within `RETRY_DELAY_S`."""

    def registered(self, broker_id: int, registration: Registration) -> list[Action]:
        if self.registrations.get(broker_id) == registration:
            return []
        self.registrations[broker_id] = registration
        self.states[broker_id] = State.WATCHING
        self.quick_losses.pop(broker_id, None)
        return [Probe(broker_id, registration)]

    def unregistered(self, broker_id: int) -> list[Action]:
        if self.registrations.pop(broker_id, None) is None:
            return []
        del self.states[broker_id]
        self.quick_losses.pop(broker_id, None)
        return [Forget(broker_id)]

    def connection_lost(self, broker_id: int, registration: Registration,
                        lasted_s: float = float("inf")) -> list[Action]:
        """The watched connection ended after ``lasted_s`` seconds open."""
        if not self._current(broker_id, registration) or self.states[broker_id] != State.WATCHING:
            return []
        quick = self.quick_losses.get(broker_id, 0) + 1 if lasted_s < RETRY_DELAY_S else 0
        self.quick_losses[broker_id] = quick
        return [Probe(broker_id, registration, RETRY_DELAY_S if quick > 1 else 0.0)]

    def probe_result(self, broker_id: int, registration: Registration, result: ProbeResult) -> list[Action]:
        if not self._current(broker_id, registration):
            return []
        state = self.states[broker_id]
        if state == State.GONE:
            return []
        if result == ProbeResult.OK:
            self.states[broker_id] = State.WATCHING
            return []
        if result == ProbeResult.REFUSED:
            if state == State.SUSPECT:
                self.states[broker_id] = State.GONE
                return [DeclareGone(broker_id, registration.epoch)]
            self.states[broker_id] = State.SUSPECT
            return [Probe(broker_id, registration, CONFIRM_DELAY_S)]
        self.states[broker_id] = State.WATCHING
        return [Probe(broker_id, registration, RETRY_DELAY_S)]

    def _current(self, broker_id: int, registration: Registration) -> bool:
        return self.registrations.get(broker_id) == registration
