"""What the mirror's tests share: a deterministic stream of records (keys, headers, explicit
timestamps, spread over partitions), a producer writing it while a mirror runs, a mirror in a
thread of its own, reading whole partitions, and waiting until a mirror has caught up (its
positions committed on the target equal the source's end offsets)."""

from __future__ import annotations

import asyncio
import threading
import time

from odradek.client import AdminClient, Consumer, Producer, TopicPartition
from odradek.mirror import MirrorConfig, MirrorMaker

BASE_TIMESTAMP = 1_600_000_000_000  # far from now: a copied timestamp cannot be the target's clock
WAIT_S = 60  # the longest any wait below lasts before it fails the test


def stream_record(i: int, partitions: int) -> tuple[int, bytes, bytes, tuple, int]:
    """Record ``i`` of a stream: ``(partition, key, value, headers, timestamp)``."""
    headers = (("seq", str(i).encode()), ("origin", b"source"))
    return i % partitions, f"key-{i % 23}".encode(), f"value-{i}".encode(), headers, BASE_TIMESTAMP + 7 * i


class LiveProducer(threading.Thread):
    """Writes records ``start..end`` of the stream to ``topic`` in bursts of ``burst``,
    flushing after each, so that a mirror running meanwhile copies a stream still growing."""

    def __init__(self, bootstrap: str, topic: str, start: int, end: int, partitions: int, burst: int = 200) -> None:
        super().__init__(name="live-producer", daemon=True)
        self.bootstrap, self.topic, self.start_at, self.end, self.partitions = bootstrap, topic, start, end, partitions
        self.burst = burst
        self.sent = 0  # records acknowledged so far
        self.error: BaseException | None = None
        self._stop_requested = threading.Event()

    def stop(self) -> int:
        """End after the burst being written (before ``end`` if need be); the stream position
        the next writer starts from (``start + sent``)."""
        self._stop_requested.set()
        self.finish()
        return self.start_at + self.sent

    def run(self) -> None:
        try:
            with Producer(self.bootstrap, linger_ms=2) as producer:
                for i in range(self.start_at, self.end):
                    partition, key, value, headers, timestamp = stream_record(i, self.partitions)
                    producer.send(self.topic, value, key=key, headers=headers, partition=partition, timestamp=timestamp)
                    if (i + 1 - self.start_at) % self.burst == 0:
                        producer.flush()
                        self.sent = i + 1 - self.start_at
                        if self._stop_requested.is_set():
                            return
                        time.sleep(0.02)  # let the mirror see the stream grow
                producer.flush()
                self.sent = self.end - self.start_at
        except BaseException as e:  # noqa: BLE001 - reported by finish()
            self.error = e

    def finish(self) -> None:
        self.join(WAIT_S)
        assert not self.is_alive(), "the producer did not finish"
        if self.error is not None:
            raise self.error


def produce(bootstrap: str, topic: str, start: int, end: int, partitions: int) -> None:
    producer = LiveProducer(bootstrap, topic, start, end, partitions)
    producer.run()
    if producer.error is not None:
        raise producer.error


class MirrorThread:
    """A MirrorMaker running on an event loop in a thread: ``stop()`` returns its progress
    (or raises what ended it)."""

    def __init__(self, config: MirrorConfig) -> None:
        self.mirror = MirrorMaker(config)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="mirror", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self.mirror.run())
        except BaseException as e:  # noqa: BLE001 - handed to the test by stop()
            self.error = e

    def start(self) -> MirrorThread:
        self.thread.start()
        return self

    def stop(self):
        self.mirror.stop()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the mirror did not stop"
        if self.error is not None:
            raise self.error
        return self.mirror.progress

    def __enter__(self) -> MirrorThread:
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.thread.is_alive():
            self.mirror.stop()
            self.thread.join(WAIT_S)


def end_offsets(bootstrap: str, topics: list[str], isolation_level: str = "read_committed") -> dict[TopicPartition, int]:
    with AdminClient(bootstrap) as admin:
        described = admin.describe_topics(topics)
    tps = [TopicPartition(t, p.partition) for t, d in described.items() for p in d.partitions]
    with Consumer(bootstrap, isolation_level=isolation_level) as consumer:
        return consumer.end_offsets(tps)


def committed_positions(target: str, group_id: str) -> dict[TopicPartition, int]:
    """The source positions a mirror committed on the target."""
    with AdminClient(target) as admin:
        return {tp: o.offset for tp, o in admin.list_group_offsets(group_id, require_stable=True).items()}


def wait_caught_up(source: str, target: str, topics: list[str], group_id: str = "odradek-mirror",
                   check=None) -> dict[TopicPartition, int]:
    """Wait until the positions the mirror committed on the target reach the source's end
    offsets for every partition of ``topics``; returns those offsets. ``check()`` runs on each
    round (to fail fast when the mirror died)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        if check is not None:
            check()
        ends = end_offsets(source, topics)
        try:
            committed = committed_positions(target, group_id)
        except Exception:  # noqa: BLE001 - the group's coordinator may be loading: ask again
            committed = {}
        if all(committed.get(tp, 0) >= end for tp, end in ends.items()):
            return ends
        assert time.monotonic() < deadline, f"the mirror did not catch up: source {ends}, mirrored {committed}"
        time.sleep(0.2)


def read_partitions(bootstrap: str, topic: str, isolation_level: str = "read_committed") -> dict[int, list[tuple]]:
    """Every record of every partition of ``topic``, to its end offset for the isolation
    level: ``{partition: [(key, value, headers, timestamp), ...]}`` in offset order."""
    ends = end_offsets(bootstrap, [topic], isolation_level)
    out: dict[int, list[tuple]] = {tp.partition: [] for tp in ends}
    with Consumer(bootstrap, isolation_level=isolation_level, auto_offset_reset="earliest") as consumer:
        consumer.assign(list(ends))
        deadline = time.monotonic() + WAIT_S
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            assert time.monotonic() < deadline, f"could not read {topic} to its end {ends}"
            for tp, records in consumer.poll(500).items():
                out[tp.partition].extend((r.key, r.value, tuple(r.headers), r.timestamp) for r in records)
    return out


def expected_partitions(start: int, end: int, partitions: int) -> dict[int, list[tuple]]:
    """What ``read_partitions`` gives for records ``start..end`` of the stream."""
    out: dict[int, list[tuple]] = {p: [] for p in range(partitions)}
    for i in range(start, end):
        partition, key, value, headers, timestamp = stream_record(i, partitions)
        out[partition].append((key, value, headers, timestamp))
    return out
