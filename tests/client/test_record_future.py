"""RecordFuture behaves as a concurrent.futures.Future, waited on or not."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import pytest

from odradek.client.record_future import RecordFuture


def test_completed_without_waiters():
    f = RecordFuture()
    f.set_result(5)
    assert "_cond" not in f.__dict__  # no Condition was ever needed
    assert f.done() and f.result() == 5 and f.exception() is None
    with pytest.raises(concurrent.futures.InvalidStateError):
        f.set_result(6)
    g = RecordFuture()
    g.set_exception(ValueError("x"))
    with pytest.raises(ValueError):
        g.result()
    with pytest.raises(concurrent.futures.InvalidStateError):
        g.set_exception(ValueError("y"))


def test_a_waiting_thread_is_woken_and_callbacks_run():
    f = RecordFuture()
    got = []
    f.add_done_callback(lambda fut: got.append(("callback", fut.result())))
    waiter = threading.Thread(target=lambda: got.append(("waiter", f.result(timeout=10))))
    waiter.start()
    time.sleep(0.05)
    f.set_result("r")
    waiter.join(10)
    assert sorted(got) == [("callback", "r"), ("waiter", "r")]
    with pytest.raises(concurrent.futures.TimeoutError):
        RecordFuture().result(timeout=0.01)


def test_wait_as_completed_and_cancel():
    futures = [RecordFuture() for _ in range(3)]
    threading.Timer(0.05, lambda: [f.set_result(i) for i, f in enumerate(futures)]).start()
    done, not_done = concurrent.futures.wait(futures, timeout=10)
    assert len(done) == 3 and not not_done
    later = [RecordFuture() for _ in range(2)]
    threading.Timer(0.05, lambda: later[1].set_exception(KeyError("k"))).start()
    threading.Timer(0.1, lambda: later[0].set_result(0)).start()
    order = list(concurrent.futures.as_completed(later, timeout=10))
    assert order == [later[1], later[0]]
    cancelled = RecordFuture()
    assert cancelled.cancel() and cancelled.cancelled()
    with pytest.raises(concurrent.futures.InvalidStateError):
        cancelled.set_result(1)
    assert isinstance(cancelled, concurrent.futures.Future)


def test_racing_completion_and_waiting():
    for _ in range(200):
        f = RecordFuture()
        results = []
        t = threading.Thread(target=lambda f=f, results=results: results.append(f.result(timeout=10)))
        t.start()
        f.set_result(1)
        t.join(10)
        assert results == [1]
