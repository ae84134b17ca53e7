"""Helpers for the consumer group tests that drive real client libraries."""

from __future__ import annotations

import queue
import threading
import time

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

QUIET = {"log_level": 0}


def create_topic(bootstrap: str, name: str, partitions: int, **configs) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs={k: str(v) for k, v in configs.items()})])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, values, partitions: int | None = None, keys=None) -> None:
    """Send ``values`` (round-robin over ``partitions`` when given), wait for every ack."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i, value in enumerate(values):
            producer.send(topic, value=value, key=None if keys is None else keys[i],
                          partition=None if partitions is None else i % partitions)
        producer.flush(30)
    finally:
        producer.close()


def wait_for(condition, timeout: float = 30.0, step=None, interval: float = 0.05):
    """Call ``step()`` and check ``condition()`` until it is truthy; fail after ``timeout`` s.

    The deadline only bounds a test that would otherwise hang: nothing asserts on timing.
    """
    deadline = time.monotonic() + timeout
    while True:
        if step is not None:
            step()
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        if step is None:
            time.sleep(interval)


def partitions_of(assignment) -> list[int]:
    return sorted(tp.partition for tp in assignment)


class ConsumerThread(threading.Thread):
    """One consumer's poll loop in a thread of its own: clients are not thread-safe, and a
    consumer polled in turns with others can miss the end of a rebalance (kafka-python 3.0.12
    drops a JoinGroup/SyncGroup result that completes between two of its polls and joins
    again, so consumers polled round-robin rebalance over and over).

    ``adapter`` is one of the ``*_adapter`` functions below. ``records`` collects every value
    consumed; ``assignment`` is the partitions assigned at the last poll.
    """

    def __init__(self, adapter, name: str = "consumer") -> None:
        super().__init__(name=name, daemon=True)
        self.adapter = adapter
        self.records: list = []
        self.assignment: list[int] = []
        self.events: list[tuple[str, list[int]]] = []  # rebalance callbacks (confluent-kafka)
        self.client = None
        self._calls: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.stopping = threading.Event()
        self.started_polling = threading.Event()

    def run(self) -> None:
        try:
            self.adapter(self)
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def call(self, fn, timeout: float = 30.0):
        """Run ``fn(client)`` in the consumer's own thread, between two polls; its result."""
        done: queue.Queue = queue.Queue()
        self._calls.put((fn, done))
        ok, value = done.get(timeout=timeout)
        if not ok:
            raise value
        return value

    def run_calls(self) -> None:
        """Adapters call this between polls."""
        while not self._calls.empty():
            fn, done = self._calls.get()
            try:
                done.put((True, fn(self.client)))
            except Exception as e:  # noqa: BLE001 - handed to the caller
                done.put((False, e))

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)
        if self.error is not None:
            raise self.error


def kafka_python_adapter(bootstrap: str, group: str, topic: str, **settings):
    from kafka import KafkaConsumer

    def run(t: ConsumerThread) -> None:
        config = {"bootstrap_servers": bootstrap, "group_id": group, "auto_offset_reset": "earliest",
                  "heartbeat_interval_ms": 200, "enable_auto_commit": False, **settings}
        c = t.client = KafkaConsumer(**config)
        try:
            wait_for(lambda: c.partitions_for_topic(topic))  # see test_groups_kafka_python.consumer
            c.subscribe([topic])
            while not t.stopping.is_set():
                for records in c.poll(500).values():
                    t.records += [r.value for r in records]
                t.assignment = partitions_of(c.assignment())
                t.run_calls()
        finally:
            c.close()

    return run


def confluent_adapter(bootstrap: str, group: str, topic: str, **settings):
    import confluent_kafka

    def run(t: ConsumerThread) -> None:
        config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "heartbeat.interval.ms": 200, **QUIET}
        config.update(settings)
        c = confluent_kafka.Consumer(config)
        t.client = c
        try:
            c.subscribe([topic], on_assign=lambda _, parts: t.events.append(("assign", _parts(parts))),
                        on_revoke=lambda _, parts: t.events.append(("revoke", _parts(parts))))
            while not t.stopping.is_set():
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    t.records.append(m.value())
                t.assignment = sorted(tp.partition for tp in c.assignment())
                t.run_calls()
        finally:
            c.close()

    return run


def _parts(partitions) -> list[int]:
    return sorted(tp.partition for tp in partitions)


def aiokafka_adapter(bootstrap: str, group: str, topic: str, **settings):
    import asyncio

    from aiokafka import AIOKafkaConsumer

    async def main(t: ConsumerThread) -> None:
        config = {"bootstrap_servers": bootstrap, "group_id": group, "auto_offset_reset": "earliest",
                  "enable_auto_commit": False, "heartbeat_interval_ms": 200, **settings}
        c = AIOKafkaConsumer(topic, **config)
        await c.start()
        try:
            while not t.stopping.is_set():
                for records in (await c.getmany(timeout_ms=200)).values():
                    t.records += [r.value for r in records]
                t.assignment = partitions_of(c.assignment())
        finally:
            await c.stop()

    return lambda t: asyncio.run(main(t))


def disjoint_cover(threads, partitions: int) -> bool:
    """Every partition assigned to exactly one consumer, every consumer some."""
    parts = [list(t.assignment) for t in threads]
    return all(parts) and sorted(p for ps in parts for p in ps) == list(range(partitions))
