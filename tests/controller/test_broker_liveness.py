"""`BrokerLiveness`: two refusals of the current registration, nothing accepted between them,
declare its process gone, once; anything else keeps the broker watched."""

from __future__ import annotations

import random

from odradek.controller.broker_liveness import (
    CONFIRM_DELAY_S,
    RETRY_DELAY_S,
    BrokerLiveness,
    DeclareGone,
    Forget,
    Probe,
    ProbeResult,
    Registration,
    State,
)

OK, REFUSED, TIMEOUT = ProbeResult.OK, ProbeResult.REFUSED, ProbeResult.TIMEOUT
R1 = Registration(epoch=10, host="127.0.0.1", port=9001)


def watched(broker_id: int = 1, registration: Registration = R1) -> BrokerLiveness:
    machine = BrokerLiveness()
    assert machine.registered(broker_id, registration) == [Probe(broker_id, registration)]
    assert machine.probe_result(broker_id, registration, OK) == []
    return machine


def test_connection_lost_then_refused_twice_declares_the_process_gone():
    m = watched()
    assert m.connection_lost(1, R1) == [Probe(1, R1)]
    assert m.probe_result(1, R1, REFUSED) == [Probe(1, R1, CONFIRM_DELAY_S)]
    assert m.states[1] is State.SUSPECT
    assert m.probe_result(1, R1, REFUSED) == [DeclareGone(1, 10)]
    assert m.states[1] is State.GONE
    # once per registration: nothing more, whatever comes
    assert m.probe_result(1, R1, REFUSED) == []
    assert m.connection_lost(1, R1) == []


def test_connections_lost_soon_after_they_opened_are_probed_again_later():
    """A broker that closes new connections at once is not reconnected to in a loop; but
    one short connection is what a dying process's listener gives (it accepts the first
    probe into its backlog, then the kernel closes it): probed again at once."""
    m = watched()
    assert m.connection_lost(1, R1) == [Probe(1, R1)]
    assert m.connection_lost(1, R1, lasted_s=0.01) == [Probe(1, R1)]
    assert m.connection_lost(1, R1, lasted_s=0.01) == [Probe(1, R1, RETRY_DELAY_S)]
    assert m.connection_lost(1, R1, lasted_s=0.01) == [Probe(1, R1, RETRY_DELAY_S)]
    assert m.connection_lost(1, R1, lasted_s=RETRY_DELAY_S) == [Probe(1, R1)]
    assert m.connection_lost(1, R1, lasted_s=0.01) == [Probe(1, R1)]


def test_a_refused_first_connection_is_confirmed_too():
    """A controller elected after the broker died never had a connection to lose."""
    m = BrokerLiveness()
    m.registered(1, R1)
    assert m.probe_result(1, R1, REFUSED) == [Probe(1, R1, CONFIRM_DELAY_S)]
    assert m.probe_result(1, R1, REFUSED) == [DeclareGone(1, 10)]


def test_an_accepted_connection_clears_the_suspicion():
    m = watched()
    m.connection_lost(1, R1)
    m.probe_result(1, R1, REFUSED)
    assert m.probe_result(1, R1, OK) == []
    assert m.states[1] is State.WATCHING
    # a later single refusal starts over: no declaration from refusals split by an OK
    m.connection_lost(1, R1)
    assert m.probe_result(1, R1, REFUSED) == [Probe(1, R1, CONFIRM_DELAY_S)]


def test_a_timeout_is_not_a_refusal():
    """Stopped or cut off, not gone: retried after a while, the count starts over."""
    m = watched()
    m.connection_lost(1, R1)
    assert m.probe_result(1, R1, REFUSED) == [Probe(1, R1, CONFIRM_DELAY_S)]
    assert m.probe_result(1, R1, TIMEOUT) == [Probe(1, R1, RETRY_DELAY_S)]
    assert m.states[1] is State.WATCHING
    assert m.probe_result(1, R1, REFUSED) == [Probe(1, R1, CONFIRM_DELAY_S)]
    for _ in range(5):
        assert m.probe_result(1, R1, TIMEOUT) == [Probe(1, R1, RETRY_DELAY_S)]


def test_a_new_registration_clears_the_gone_state():
    m = watched()
    m.connection_lost(1, R1)
    m.probe_result(1, R1, REFUSED)
    m.probe_result(1, R1, REFUSED)
    r2 = Registration(epoch=11, host="127.0.0.1", port=9002)
    assert m.registered(1, r2) == [Probe(1, r2)]
    assert m.states[1] is State.WATCHING
    assert m.probe_result(1, r2, OK) == []


def test_a_refusal_of_a_stale_registration_is_ignored():
    m = watched()
    m.connection_lost(1, R1)
    m.probe_result(1, R1, REFUSED)  # the old endpoint refuses...
    r2 = Registration(epoch=11, host="127.0.0.1", port=9002)
    m.registered(1, r2)  # ...because the broker registered again elsewhere
    assert m.probe_result(1, R1, REFUSED) == []
    assert m.connection_lost(1, R1) == []
    assert m.states[1] is State.WATCHING
    # the same epoch at another endpoint (a dynamic listener change) is a new registration too
    r3 = Registration(epoch=11, host="127.0.0.1", port=9003)
    m.registered(1, r3)
    m.probe_result(1, r3, REFUSED)
    assert m.probe_result(1, r2, REFUSED) == []
    assert m.states[1] is State.SUSPECT


def test_the_same_registration_again_changes_nothing():
    m = watched()
    m.connection_lost(1, R1)
    m.probe_result(1, R1, REFUSED)
    assert m.registered(1, R1) == []
    assert m.states[1] is State.SUSPECT


def test_unregistered_brokers_are_forgotten_and_their_reports_ignored():
    m = watched()
    assert m.unregistered(1) == [Forget(1)]
    assert m.unregistered(1) == []
    assert m.probe_result(1, R1, REFUSED) == []
    assert m.connection_lost(1, R1) == []
    assert 1 not in m.states


def test_brokers_are_independent():
    m = watched(1)
    r2 = Registration(epoch=20, host="127.0.0.1", port=9002)
    m.registered(2, r2)
    m.probe_result(1, R1, REFUSED)
    assert m.probe_result(2, r2, REFUSED) == [Probe(2, r2, CONFIRM_DELAY_S)]
    assert m.probe_result(1, R1, REFUSED) == [DeclareGone(1, 10)]
    assert m.states[2] is State.SUSPECT


def test_declared_only_after_two_consecutive_refusals_of_the_same_registration():
    """Random report sequences: every DeclareGone follows two REFUSED reports for the current
    registration with nothing else reported for it between them, at most once while it stays
    the current one."""
    registrations = [Registration(e, "h", p) for e in (1, 2) for p in (1, 2)]
    for seed in range(300):
        rng = random.Random(seed)
        m = BrokerLiveness()
        current = None
        history: list = []  # reports about the current registration since it became current
        declared: set = set()
        for _ in range(40):
            step = rng.random()
            if step < 0.15 or current is None:
                current = rng.choice(registrations)
                if m.registered(1, current):
                    history, declared = [], set()
                continue
            if step < 0.2:
                if m.unregistered(1):
                    current, history = None, []
                continue
            reg = rng.choice(registrations) if rng.random() < 0.2 else current
            if step < 0.35:
                actions = m.connection_lost(1, reg)
                report = "lost"
            else:
                result = rng.choice(list(ProbeResult))
                actions = m.probe_result(1, reg, result)
                report = result
            if reg == current:
                history.append(report)
            for action in actions:
                if isinstance(action, DeclareGone):
                    assert reg == current and action.epoch == current.epoch
                    probes = [h for h in history if h != "lost"]
                    assert probes[-2:] == [REFUSED, REFUSED]
                    assert current not in declared
                    declared.add(current)
