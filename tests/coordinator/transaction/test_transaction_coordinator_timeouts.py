"""``TransactionCoordinator.abort_timed_out_transactions`` on a broker whose transaction log
has one replica: there the PrepareAbort write is answered at once (a done future, not a
coroutine to run), and every timed-out transaction is still fenced and aborted in the same
pass, with nothing logged at ERROR."""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from odradek.client import Producer
from odradek.coordinator.transaction.transaction_state import TransactionState
from tests.coordinator.transaction.test_local_markers import broker, create  # noqa: F401 - a fixture

pytestmark = pytest.mark.timeout(120)


def test_every_timed_out_transaction_is_aborted_in_one_pass(broker, caplog):
    topic = f"timeouts-{uuid.uuid4().hex[:8]}"
    create(broker.bootstrap, topic)
    tids = [f"{topic}-{n}" for n in range(3)]
    producers = [Producer(broker.bootstrap, transactional_id=tid) for tid in tids]
    try:
        for producer in producers:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, b"never committed", partition=0)
            producer.flush()
        coordinator = broker.broker.txn_coordinator
        with caplog.at_level(logging.ERROR, logger="odradek"):
            aborted = broker.call(lambda: coordinator.abort_timed_out_transactions(
                coordinator.clock.milliseconds() + 3_600_000))
        assert aborted == len(tids)
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []

        def states():
            return broker.call(lambda: [coordinator.describe(tid)[1].state for tid in tids])
        deadline = time.monotonic() + 30
        while states() != [TransactionState.COMPLETE_ABORT] * len(tids):
            assert time.monotonic() < deadline, states()
            time.sleep(0.05)
    finally:
        for producer in producers:
            try:
                producer.close(timeout=5)
            except Exception:  # noqa: BLE001 - fenced by the abort: closing may say so
                pass
