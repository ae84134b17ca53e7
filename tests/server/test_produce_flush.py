"""Group commit: produces that arrive during one fsync share the next one."""

from __future__ import annotations

import asyncio
import threading

import pytest

from odradek.server.handlers.produce_flush import LogFlusher
from odradek.testing.broker import InProcessBroker
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient, produce_body, simple_batch


class FakeLog:
    """A log whose ``flush`` blocks until released and makes durable what it saw at its
    start (as ``Log.flush`` does)."""

    def __init__(self) -> None:
        self.log_end_offset = 0
        self.recovery_point = 0
        self.flushes = 0
        self.release = threading.Event()
        self.started = threading.Event()
        self.fail = False

    def append(self, n: int) -> int:
        self.log_end_offset += n
        return self.log_end_offset

    def flush(self) -> None:
        target = self.log_end_offset
        self.flushes += 1
        self.started.set()
        assert self.release.wait(10)
        self.release.clear()
        if self.fail:
            raise OSError(5, "Input/output error")
        self.recovery_point = max(self.recovery_point, target)


async def wait_started(log: FakeLog) -> None:
    while not log.started.is_set():
        await asyncio.sleep(0.001)
    log.started.clear()


def test_waiters_arriving_during_a_flush_share_the_next_one():
    async def scenario():
        log = FakeLog()
        flusher = LogFlusher(log)
        first = flusher.flush_through(log.append(10))
        await wait_started(log)
        later = [flusher.flush_through(log.append(10)) for _ in range(5)]
        log.release.set()
        await first
        assert not any(f.done() for f in later)  # their batches came after that fsync began
        await wait_started(log)
        log.release.set()
        await asyncio.gather(*later)
        return log, flusher

    log, flusher = asyncio.run(scenario())
    assert log.flushes == 2 and flusher.flushes == 2
    assert log.recovery_point == 60


def test_nothing_to_flush_resolves_at_once():
    async def scenario():
        log = FakeLog()
        log.recovery_point = log.log_end_offset = 7
        fut = LogFlusher(log).flush_through(7)
        assert fut.done()
        return log.flushes

    assert asyncio.run(scenario()) == 0


def test_a_failed_flush_fails_its_waiters_and_the_next_waiter_retries():
    async def scenario():
        log = FakeLog()
        flusher = LogFlusher(log)
        log.fail = True
        failed = flusher.flush_through(log.append(3))
        await wait_started(log)
        log.release.set()
        with pytest.raises(OSError):
            await failed
        log.fail = False
        retried = flusher.flush_through(log.log_end_offset)
        await wait_started(log)
        log.release.set()
        await retried
        return log

    log = asyncio.run(scenario())
    assert log.flushes == 2 and log.recovery_point == 3


def test_flush_per_message_answers_only_durable_appends_in_order(tmp_path):
    """With ``log.flush.interval.messages=1`` every pipelined produce is answered, in order,
    only once the log's recovery point (moved by fsync) covers its batch."""
    with InProcessBroker(tmp_path / "data", log_flush_interval_messages=1) as b:
        c = WireClient(b.bootstrap)
        create_topic(c, "durable")
        frames = [c.frame("Produce", 9, produce_body("durable", 0, simple_batch([b"%d" % i, b"x"])))
                  for i in range(30)]
        c.send_raw(b"".join(frames))
        plog = b.broker.replica_manager.get("durable", 0).log
        for i in range(30):
            cid, resp = c.response("Produce", 9)
            part = resp.responses[0].partition_responses[0]
            assert (cid, part.error_code, part.base_offset) == (i + 2, 0, 2 * i)
            assert plog.recovery_point >= 2 * i + 2
