"""SyncRecordFuture: a concurrent.futures.Future read from its record's batch result."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import pytest

from odradek.client import NewTopic, Producer, RecordMetadata
from odradek.client.errors import KafkaTimeoutError
from odradek.client.producer_batch import ProducerBatch
from odradek.client.sync import AdminClient
from odradek.client.sync_record_future import SyncRecordFuture

TS = 1_700_000_000_000


class Owner:
    """Stands for the Producer: records which futures asked to be settled."""

    def __init__(self) -> None:
        self.watched: list = []

    def _watch(self, future) -> None:
        self.watched.append(future)


def linked(n: int, owner: Owner):
    """``n`` futures linked to the records of one batch."""
    cls = type("F", (SyncRecordFuture,), {"_owner": owner})
    batch = ProducerBatch("t", 1, 0.0, 1 << 20)
    futures = []
    for i in range(n):
        futures.append(batch.try_append(TS + i, None, b"v", None, cls))
    return batch, futures


def test_unwatched_futures_are_read_from_the_batch_without_being_touched():
    owner = Owner()
    batch, futures = linked(3, owner)
    assert isinstance(futures[0], concurrent.futures.Future)
    assert not futures[0].done() and not futures[0].cancelled()
    batch.complete(7)
    assert futures[2].done() and futures[2].result() == RecordMetadata("t", 1, 9, TS + 2)
    assert futures[0].exception() is None
    assert all("_state" not in f.__dict__ for f in futures) and owner.watched == []


def test_a_waiting_thread_is_woken_once_the_owner_settles_it():
    owner = Owner()
    batch, futures = linked(2, owner)
    got = []
    futures[0].add_done_callback(lambda f: got.append(("callback", f.result().offset)))
    waiter = threading.Thread(target=lambda: got.append(("waiter", futures[1].result(timeout=10).offset)))
    waiter.start()
    deadline = time.monotonic() + 10
    while len(owner.watched) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert set(owner.watched) == set(futures) and not any(f.done() for f in futures)
    batch.complete(100)
    for f in owner.watched:
        f.settle()
    waiter.join(10)
    assert sorted(got) == [("callback", 100), ("waiter", 101)]
    with pytest.raises(concurrent.futures.TimeoutError):
        linked(1, Owner())[1][0].result(timeout=0.01)


def test_wait_as_completed_cancel_and_failure():
    owner = Owner()
    batch, futures = linked(3, owner)
    assert futures[2].cancel() and futures[2].cancelled() and futures[2].done()
    threading.Timer(0.05, lambda: (batch.fail(KafkaTimeoutError("x")),
                                   [f.settle() for f in owner.watched])).start()
    # (wait, as for any Future, never counts a cancelled one done: it is not waited on.)
    done, not_done = concurrent.futures.wait(futures[:2], timeout=10)
    assert done == set(futures[:2]) and not not_done
    assert isinstance(futures[0].exception(), KafkaTimeoutError)
    with pytest.raises(KafkaTimeoutError):
        futures[1].result()
    assert futures[2].cancelled()  # settling after a cancel leaves it cancelled
    assert not futures[0].cancel()
    later_batch, later = linked(2, owner := Owner())
    threading.Timer(0.05, lambda: (later_batch.complete(0),
                                   [f.settle() for f in owner.watched])).start()
    assert sorted(f.result().offset for f in concurrent.futures.as_completed(later, timeout=10)) == [0, 1]


def test_racing_settlement_and_waiting():
    for _ in range(200):
        owner = Owner()
        batch, (f,) = linked(1, owner)
        results = []
        t = threading.Thread(target=lambda f=f, results=results: results.append(f.result(timeout=10)))
        t.start()
        batch.complete(1)
        deadline = time.monotonic() + 10
        while t.is_alive() and time.monotonic() < deadline:
            for watched in owner.watched:
                watched.settle()
            time.sleep(0.0005)
        t.join(10)
        assert [m.offset for m in results] == [1]


def test_producer_futures_waited_on_before_and_after_delivery(broker, topic_name):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    with Producer(broker.bootstrap, linger_ms=20) as producer:
        first = producer.send(topic_name, b"a")
        assert first.result(timeout=10).offset == 0  # waited on while still queued or lingering
        futures = [producer.send(topic_name, b"v%d" % i) for i in range(50)]
        called = threading.Event()
        futures[-1].add_done_callback(lambda f: called.set())
        done, _ = concurrent.futures.wait(futures, timeout=10)
        assert done == set(futures) and called.wait(10)
        producer.flush()
        more = [producer.send(topic_name, b"w") for _ in range(10)]
        producer.flush()
        assert [f.result().offset for f in futures + more] == list(range(1, 61))
        assert all("_state" not in f.__dict__ for f in more)  # read without a Condition
