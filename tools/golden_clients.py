"""Client scenarios for tools/capture_golden.py: one short Kafka session per client.

Each run_<client>(scenario) creates a topic (admin), produces keyed records with
headers (plain, then with each compression codec, then idempotent), consumes
them in a group (join, sync, heartbeat, commit, fetch offsets, leave), lists
offsets and deletes the topic. A step that fails (a gap in the broker) is
noted and the session goes on, so the requests are recorded all the same.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time

CODECS = ("gzip", "snappy", "lz4", "zstd")
# Repetitive values, so that every codec shrinks the batch: librdkafka sends a
# batch uncompressed when compressing does not make it smaller.
RECORDS = [(b"k%d" % i, b"value-%d " % i * 12, [("h1", b"v%d" % i)]) for i in range(3)]


class Scenario:
    """Runs a client's steps; a failing step is reported, not fatal."""

    def __init__(self, recorder, bootstrap: str, client: str) -> None:
        """recorder.use(client, variant) labels the connections opened meanwhile."""
        self.recorder, self.bootstrap, self.client = recorder, bootstrap, client
        self.topic = f"golden-{client}"
        self.group = f"golden-{client}-group"
        self.problems: list[str] = []

    def step(self, name: str, fn, *args, variant: str = "", **kwargs) -> None:
        print(f"  {self.client}: {name}{' ' + variant if variant else ''}")
        with self.recorder.use(self.client, variant):
            try:
                fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001  (a broker gap must not stop the capture)
                self.problems.append(f"{self.client} {name} {variant}: {type(exc).__name__}: {exc}")
                print(f"    failed: {type(exc).__name__}: {exc}")


# --- kafka-python -------------------------------------------------------------

def run_kafka_python(sc: Scenario) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    bs, topic, tp = sc.bootstrap, sc.topic, TopicPartition(sc.topic, 0)
    admin = KafkaAdminClient(bootstrap_servers=bs, client_id="golden", request_timeout_ms=10000)
    sc.step("create topic", admin.create_topics, [NewTopic(topic, 1, 1)])

    def produce(**config):
        producer = KafkaProducer(bootstrap_servers=bs, client_id="golden", linger_ms=5, **config)
        try:
            for key, value, headers in RECORDS:
                producer.send(topic, key=key, value=value, headers=headers)
            producer.flush(10)
        finally:
            producer.close(5)

    sc.step("produce", produce)
    for codec in CODECS:
        sc.step("produce", produce, variant=codec, compression_type=codec)
    # kafka-python 3 is idempotent by default; asked for explicitly all the same.
    sc.step("idempotent produce", produce, enable_idempotence=True, acks="all")

    def consume():
        consumer = KafkaConsumer(bootstrap_servers=bs, client_id="golden", group_id=sc.group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 heartbeat_interval_ms=100, session_timeout_ms=10000)
        try:
            consumer.subscribe([topic])
            poll_until(lambda: sum(len(v) for v in consumer.poll(200).values()), len(RECORDS))
            poll_for(lambda: consumer.poll(100), 1.0)  # lets a few Heartbeats go out
            consumer.commit()
            consumer.committed(tp)
            consumer.beginning_offsets([tp])
            consumer.end_offsets([tp])
            consumer.offsets_for_times({tp: 0})
        finally:
            consumer.close(autocommit=False)

    sc.step("consume with group", consume)
    sc.step("delete topic", admin.delete_topics, [topic])
    admin.close()


def poll_until(poll, want: int, deadline_s: float = 20.0) -> None:
    """Calls poll() (returning a count) until the counts add up to want."""
    got, end = 0, time.monotonic() + deadline_s
    while got < want:
        if time.monotonic() > end:
            raise TimeoutError(f"got {got} of {want} records")
        got += poll() or 0


def poll_for(poll, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        poll()


# --- confluent-kafka (librdkafka) ---------------------------------------------

def run_confluent(sc: Scenario) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

    base = {"bootstrap.servers": sc.bootstrap, "client.id": "golden"}
    admin = AdminClient(base)
    sc.step("create topic", lambda: wait_all(admin.create_topics([NewTopic(sc.topic, 1, 1)])))

    def produce(**config):
        producer = Producer({**base, "linger.ms": 5, **config})
        for key, value, headers in RECORDS:
            producer.produce(sc.topic, key=key, value=value, headers=headers)
        if producer.flush(10):
            raise TimeoutError("records left unsent")

    sc.step("produce", produce)
    for codec in CODECS:
        sc.step("produce", produce, variant=codec, **{"compression.codec": codec})
    sc.step("idempotent produce", produce, **{"enable.idempotence": True})

    def consume():
        consumer = Consumer({**base, "group.id": sc.group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "heartbeat.interval.ms": 100,
                             "session.timeout.ms": 10000})
        tp = TopicPartition(sc.topic, 0)
        try:
            consumer.subscribe([sc.topic])
            poll_until(lambda: count_messages(consumer.poll(0.2)), len(RECORDS))
            poll_for(lambda: consumer.poll(0.1), 1.0)
            consumer.commit(asynchronous=False)
            consumer.committed([tp], timeout=10)
            consumer.get_watermark_offsets(tp, timeout=10, cached=False)
            consumer.offsets_for_times([TopicPartition(sc.topic, 0, 0)], timeout=10)
        finally:
            consumer.close()

    sc.step("consume with group", consume)
    sc.step("admin list offsets", lambda: wait_all(admin.list_offsets(
        {TopicPartition(sc.topic, 0): OffsetSpec.latest()}, request_timeout=10)))
    sc.step("delete topic", lambda: wait_all(admin.delete_topics([sc.topic])))


def wait_all(futures: dict) -> None:
    for future in futures.values():
        future.result(timeout=15)


def count_messages(message) -> int:
    if message is None:
        return 0
    if message.error():
        raise RuntimeError(str(message.error()))
    return 1


# --- aiokafka -----------------------------------------------------------------

def run_aiokafka(sc: Scenario) -> None:
    from aiokafka.admin import NewTopic

    def run(coro_fn, *args, **kwargs):
        asyncio.run(asyncio.wait_for(coro_fn(sc, *args, **kwargs), 30))

    sc.step("create topic", run, aio_admin, "create_topics", [NewTopic(sc.topic, 1, 1)])
    sc.step("produce", run, aio_produce)
    for codec in CODECS:
        sc.step("produce", run, aio_produce, variant=codec, compression_type=codec)
    sc.step("idempotent produce", run, aio_produce, enable_idempotence=True)
    sc.step("consume with group", run, aio_consume)
    sc.step("delete topic", run, aio_admin, "delete_topics", [sc.topic])


async def aio_admin(sc: Scenario, method: str, *args) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=sc.bootstrap, client_id="golden")
    await admin.start()
    try:
        await getattr(admin, method)(*args)
    finally:
        await admin.close()


async def aio_produce(sc: Scenario, **config) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=sc.bootstrap, client_id="golden",
                                linger_ms=5, **config)
    try:
        await producer.start()
        for key, value, headers in RECORDS:
            await producer.send(sc.topic, key=key, value=value, headers=headers)
        await producer.flush()
    finally:
        await producer.stop()


async def aio_consume(sc: Scenario) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    first, second = (AIOKafkaConsumer(sc.topic, bootstrap_servers=sc.bootstrap,
                                      client_id="golden", group_id=sc.group,
                                      auto_offset_reset="earliest", enable_auto_commit=False,
                                      heartbeat_interval_ms=100) for _ in range(2))
    tp = TopicPartition(sc.topic, 0)
    try:
        await first.start()
        got, end = 0, time.monotonic() + 20
        while got < len(RECORDS) and time.monotonic() < end:
            got += sum(map(len, (await first.getmany(timeout_ms=200)).values()))
        await first.commit()
        await first.committed(tp)
        await first.beginning_offsets([tp])
        await first.end_offsets([tp])
        await first.offsets_for_times({tp: 0})
        # Tansu numbers the first generation 0 and aiokafka leaves a group only
        # from generation > 0: a second member forces a rebalance (and Heartbeats).
        await second.start()
        end = time.monotonic() + 3
        while time.monotonic() < end:
            await asyncio.gather(first.getmany(timeout_ms=100), second.getmany(timeout_ms=100))
    finally:
        await second.stop()
        await first.stop()


# --- kcat (librdkafka as packaged by Debian) ----------------------------------

def run_kcat(sc: Scenario) -> None:
    from kafka import KafkaAdminClient  # kcat has no admin mode: set-up, not recorded
    from kafka.admin import NewTopic

    def kcat(*args: str, stdin: str = "") -> None:
        out = subprocess.run(["kcat", "-b", sc.bootstrap, "-X", "client.id=golden", *args],
                             input=stdin, capture_output=True, text=True, timeout=30)
        if out.returncode:
            raise RuntimeError(f"kcat {' '.join(args)}: {out.stderr.strip()[-300:]}")

    with sc.recorder.use(None):
        admin = KafkaAdminClient(bootstrap_servers=sc.bootstrap, request_timeout_ms=10000)
        admin.create_topics([NewTopic(sc.topic, 1, 1)])
    lines = "".join(f"{k.decode()}:{v.decode()}\n" for k, v, _ in RECORDS)
    produce = ("-P", "-t", sc.topic, "-K", ":", "-H", "h1=v1")
    sc.step("metadata", kcat, "-L")
    sc.step("produce", kcat, *produce, stdin=lines)
    for codec in CODECS:
        sc.step("produce", kcat, *produce, "-X", f"compression.codec={codec}",
                stdin=lines, variant=codec)
    sc.step("idempotent produce", kcat, *produce, "-X", "enable.idempotence=true", stdin=lines)
    sc.step("consume with group", kcat, "-C", "-G", sc.group, "-c", str(len(RECORDS)), "-X",
            "auto.offset.reset=earliest", "-X", "heartbeat.interval.ms=100", sc.topic)
    sc.step("query offsets", kcat, "-Q", "-t", f"{sc.topic}:0:0")
    with sc.recorder.use(None):
        admin.delete_topics([sc.topic])
        admin.close()


CLIENTS = {
    "kafka-python": run_kafka_python,
    "confluent-kafka": run_confluent,
    "aiokafka": run_aiokafka,
    "kcat": run_kcat,
}


def client_version(client: str) -> str:
    if client == "kafka-python":
        import kafka
        return kafka.__version__
    if client == "confluent-kafka":
        import confluent_kafka
        return f"{confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"
    if client == "aiokafka":
        import aiokafka
        return aiokafka.__version__
    out = subprocess.run(["kcat", "-V"], capture_output=True, text=True).stdout
    found = re.search(r"Version (\S+) .*?librdkafka (\S+)", out)
    return f"{found[1]} (librdkafka {found[2]})" if found else "unknown"
