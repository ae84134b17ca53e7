"""The synchronous Producer under concurrency: callers' threads append into open batches while
the loop seals, sends, expires and flushes them (see ``sync.Producer`` and the accumulator's
lock). Every record must arrive exactly once, in each thread's order per partition, with its
future giving the offset it landed at."""

from __future__ import annotations

import concurrent.futures
import itertools
import sys
import threading
import time

import pytest

from odradek.client import (
    AdminClient,
    BrokerError,
    BufferFullError,
    ClientClosedError,
    Consumer,
    KafkaTimeoutError,
    NewTopic,
    Producer,
    TopicPartition,
)
from odradek.client.sync import EventLoopThread
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from tests.client.fake_broker import FakeBroker, metadata_response


@pytest.fixture(autouse=True)
def frequent_thread_switches():
    """Switch threads every few microseconds rather than every 5 ms, so that a thread is
    often interrupted in the middle of an append: races show up in a short test."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(interval)


def create(broker, topic: str, partitions: int) -> None:
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def read_back(broker, topic: str, partitions: int, count: int) -> dict:
    """``{(partition, offset): value}`` of the first ``count`` records of ``topic``."""
    out = {}
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        idle_polls = 0
        while len(out) < count:
            polled = consumer.poll(5000)
            idle_polls = 0 if polled else idle_polls + 1
            assert idle_polls < 6, f"read {len(out)} of {count} records of {topic}"
            for tp, records in polled.items():
                for r in records:
                    out[(tp.partition, r.offset)] = r.value
    return out


def run_threads(target, count: int) -> None:
    errors = []

    def guarded(t):
        try:
            target(t)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]


def check_exactly_once_in_order(landed: dict, futures: dict) -> None:
    """``landed``: {(partition, offset): value}; ``futures``: {value: future}. Values are
    b"thread-seq-..."; each thread's records of a partition must be in its sending order."""
    assert sorted(landed.values()) == sorted(futures)  # every record once, nothing else
    for (partition, offset), value in landed.items():
        metadata = futures[value].result(timeout=0)
        assert (metadata.partition, metadata.offset) == (partition, offset)
    last: dict = {}
    for (partition, _), value in sorted(landed.items()):
        thread, seq = value.split(b"-")[:2]
        assert int(seq) > last.get((partition, thread), -1), "reordered within a partition"
        last[(partition, thread)] = int(seq)


def test_threads_sending_to_several_partitions_land_exactly_once_in_order(broker, topic_name):
    create(broker, topic_name, 3)
    per_thread, threads = 1500, 4
    futures = {}
    called = []
    lock = threading.Lock()
    # Small batches and no linger: batches are created, sealed and taken all the time.
    with Producer(broker.bootstrap, batch_size=600, linger_ms=0) as producer:
        def work(t):
            mine = {}
            for i in range(per_thread):
                value = b"%d-%d-" % (t, i) + b"x" * (i % 40)
                kind = i % 4
                if kind == 0:
                    f = producer.send(topic_name, value)
                elif kind == 1:
                    f = producer.send(topic_name, value, key=b"key%d" % (i % 7))
                elif kind == 2:
                    f = producer.send(topic_name, value, partition=i % 3, headers={"t": str(t)})
                else:
                    f = producer.send(topic_name, value, callback=lambda md, exc: called.append((md, exc)))
                mine[value] = f
            with lock:
                futures.update(mine)

        run_threads(work, threads)
        producer.flush()
        assert all(f.done() for f in futures.values())
    assert len(called) == per_thread * threads // 4
    assert all(exc is None and md.topic == topic_name for md, exc in called)
    check_exactly_once_in_order(read_back(broker, topic_name, 3, len(futures)), futures)


def test_appends_racing_the_sender_for_tiny_batches_lose_nothing(broker, topic_name):
    # Two or three records a batch and no linger: the sender takes and seals the open batch
    # the callers append to all the time.
    create(broker, topic_name, 1)
    futures = {}
    lock = threading.Lock()
    with Producer(broker.bootstrap, batch_size=300, linger_ms=0) as producer:
        def work(t):
            mine = {}
            for i in range(2500):
                value = b"%d-%d-" % (t, i) + b"z" * 80
                mine[value] = producer.send(topic_name, value)
            with lock:
                futures.update(mine)

        run_threads(work, 4)
        producer.flush()
    check_exactly_once_in_order(read_back(broker, topic_name, 1, len(futures)), futures)


def test_flush_while_other_threads_send_waits_for_what_was_sent_before(broker, topic_name):
    create(broker, topic_name, 2)
    sent: list = []  # (value, future), appended only after send returned
    with Producer(broker.bootstrap, linger_ms=50) as producer:
        def work(t):
            for i in range(3000):
                value = b"%d-%d" % (t, i)
                sent.append((value, producer.send(topic_name, value, key=b"%d" % (i % 5))))
                if i % 100 == 0:
                    time.sleep(0.001)

        workers = threading.Thread(target=run_threads, args=(work, 3))
        workers.start()
        flushes = 0
        while workers.is_alive() or flushes < 3:
            before = list(sent)
            producer.flush()
            flushes += 1
            assert all(f.done() for _, f in before)
        workers.join()
        producer.flush()
        futures = dict(sent)
    assert len(futures) == 9000
    check_exactly_once_in_order(read_back(broker, topic_name, 2, len(futures)), futures)


def test_close_while_other_threads_send_delivers_or_refuses_every_record(broker, topic_name):
    create(broker, topic_name, 2)
    sent: list = []
    refused = []
    sending = [threading.Event() for _ in range(3)]
    producer = Producer(broker.bootstrap, batch_size=1000, linger_ms=20)

    def work(t):
        for i in itertools.count():  # until refused: the close is the only way out
            value = b"%d-%d" % (t, i)
            try:
                f = producer.send(topic_name, value)
            except ClientClosedError:  # closed: no more sends
                refused.append(value)
                return
            sent.append((value, f))
            sending[t].set()
            if f.done() and isinstance(f.exception(), ClientClosedError):  # closing
                refused.append(value)
                return

    workers = threading.Thread(target=run_threads, args=(work, 3))
    workers.start()
    # Close while every thread is sending and after a first delivery, however the threads
    # are scheduled (waiting on events, not on elapsed time).
    assert all(e.wait(60) for e in sending)
    sent[0][1].result(60)
    producer.close()
    workers.join(60)
    assert not workers.is_alive() and len(refused) == 3
    delivered = {}
    for value, f in sent:
        assert f.done()  # close settles every record: delivered, or failed as closed
        if f.exception() is None:
            delivered[value] = f
        else:
            assert isinstance(f.exception(), ClientClosedError)
    assert delivered
    check_exactly_once_in_order(read_back(broker, topic_name, 2, len(delivered)), delivered)


def test_threads_block_for_buffer_space_and_all_get_through(broker, topic_name):
    create(broker, topic_name, 2)
    futures = {}
    lock = threading.Lock()
    with Producer(broker.bootstrap, batch_size=1000, buffer_memory=3000, linger_ms=1) as producer:
        acc = producer._acc

        def work(t):
            mine = {}
            for i in range(400):
                value = b"%d-%d-" % (t, i) + b"y" * 90
                mine[value] = producer.send(topic_name, value, partition=i % 2)
                assert acc.buffered < acc.buffer_memory + acc.batch_size  # reserved per batch
            with lock:
                futures.update(mine)

        run_threads(work, 4)
        producer.flush()
    check_exactly_once_in_order(read_back(broker, topic_name, 2, len(futures)), futures)


def test_threads_give_up_after_max_block_when_the_buffer_stays_full():
    # A broker that takes Produce requests and never answers: the buffer stays full.
    def handler(fake, header, body):
        if header.request_api_key == ApiKey.METADATA:
            return metadata_response([fake], {"t": [1, 1]})
        return None

    loop = EventLoopThread("fake-broker")
    fake = loop.run(FakeBroker(1, handler).start())
    producer = Producer(fake.bootstrap, batch_size=1000, buffer_memory=3000, max_block_ms=200,
                        linger_ms=0, enable_idempotence=False)
    sent: list = []
    gave_up = []
    try:
        # Records held until metadata arrives are placed without a memory check: get the
        # topic known first (its first record is placed, and never answered).
        sent.append(producer.send("t", b"x" * 100, partition=0))
        deadline = time.monotonic() + 10
        while producer._acc.topics["t"].ready is not None and time.monotonic() < deadline:
            time.sleep(0.01)

        def work(t):
            for i in range(1000):
                try:
                    sent.append(producer.send("t", b"x" * 100, partition=t % 2))
                except BufferFullError:
                    gave_up.append(t)
                    return

        run_threads(work, 3)
        assert sorted(gave_up) == [0, 1, 2]
        assert 3 <= len(sent) < 3000  # at least a record a batch
        assert producer._acc.buffered < 3000 + 1000
        assert not any(f.done() for f in sent)
    finally:
        producer.close(timeout=0.5)
        loop.run(fake.close())
        loop.stop()
    assert all(isinstance(f.exception(), ClientClosedError) for f in sent)


def test_records_for_a_topic_not_known_yet_keep_each_threads_order(broker, topic_name):
    # The broker auto-creates the topic: records are held until its metadata arrives, while
    # other threads keep sending; held ones must still go first.
    futures = {}
    lock = threading.Lock()
    with Producer(broker.bootstrap, batch_size=500, linger_ms=0) as producer:
        def work(t):
            mine = {}
            for i in range(300):
                value = b"%d-%d" % (t, i)
                mine[value] = producer.send(topic_name, value)
            with lock:
                futures.update(mine)

        run_threads(work, 3)
        producer.flush()
        assert producer.partitions_for(topic_name) == [0]
    check_exactly_once_in_order(read_back(broker, topic_name, 1, len(futures)), futures)


def test_refused_records_fail_their_future_and_callback_on_the_loop(broker, topic_name):
    create(broker, topic_name, 2)
    calls = []
    done = threading.Event()

    def callback(metadata, error):
        calls.append((threading.current_thread().name, metadata, error))
        if len(calls) == 3:
            done.set()

    with Producer(broker.bootstrap, max_request_size=1000, allow_auto_create_topics=False,
                  max_block_ms=200) as producer:
        too_big = producer.send(topic_name, b"x" * 2000, callback=callback)
        bad = producer.send(topic_name, b"x", partition=2, callback=callback)
        missing = producer.send(topic_name + "-missing", b"x", callback=callback)
        wrong_type = producer.send(topic_name, "a str is not bytes")
        fine = producer.send(topic_name, b"x", partition=1)
        assert too_big.exception(timeout=10).code == ErrorCode.MESSAGE_TOO_LARGE
        with pytest.raises(BrokerError) as info:
            bad.result(timeout=10)
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert isinstance(missing.exception(timeout=10), KafkaTimeoutError)
        assert isinstance(wrong_type.exception(timeout=10), TypeError)
        assert fine.result(timeout=10).offset == 0
        assert done.wait(10)
    assert [(name, md) for name, md, _ in calls] == [("odradek-producer", None)] * 3


def test_callbacks_may_send_and_futures_work_across_threads(broker, topic_name):
    create(broker, topic_name, 1)
    follow_ups = []
    with Producer(broker.bootstrap, linger_ms=5) as producer:
        def resend(metadata, error):  # on the loop's thread, which must not deadlock
            follow_ups.append(producer.send(topic_name, b"after-%d" % metadata.offset))

        first = [producer.send(topic_name, b"first-%d" % i, callback=resend) for i in range(50)]
        done, not_done = concurrent.futures.wait(first, timeout=10)
        assert done == set(first) and not not_done
        producer.flush()
        assert len(follow_ups) == 50
        producer.flush()
        assert sorted(f.result(timeout=10).offset for f in follow_ups) == list(range(50, 100))
        # Waiting from many threads at once, and cancelling a pending future.
        later = [producer.send(topic_name, b"later") for _ in range(20)]
        results = []
        run_threads(lambda t: results.append(later[t].result(timeout=10).offset), 20)
        assert sorted(results) == list(range(100, 120))
        pending = producer.send(topic_name, b"cancelled")
        cancelled = pending.cancel()
        producer.flush()
        assert cancelled == pending.cancelled()
        offsets = [f.result().offset for f in concurrent.futures.as_completed(later, timeout=10)]
        assert sorted(offsets) == list(range(100, 120))
