"""The exactly-once sinks' own log: per query, what the driver decided, kept in a compacted
odradek topic (``_odradek_spark_commits`` by default).

The transactional sink (``txn_sink``) keeps one ``Decision`` per query, keyed ``txn:<query id>``;
its value is JSON::

    {"batch": 8,                          # the last batch decided (committed)
     "handles": [[transactional id, producer id, producer epoch], ...],  # its transactions
     "done": true}                        # every handle committed (false: still committing)

The staged sink (``exactly_once``) keys its state by the bare query id; its value is JSON::

    {"committed": 7,                      # last batch id published in full (-1: none)
     "intent": null | {                   # the batch being published, written before it is
        "batch": 8,
        "staged": [[task, staging partition, first offset, last offset, count, tag], ...],
        "partitions": {"topic": partition count},
        "start": {"topic": {"partition": end offset before publishing}}}}

Writes wait for acks=all. A state is read from the end of the topic's one partition
backwards: the last ``TAIL`` records are scanned for the query's newest record, then a window
eight times larger, and so on down to the log start; a query's state is written at every
batch, so it is nearly always in the first window, whatever the log's length. The topic is
created on first use (one partition, cleanup.policy=compact with 16 MiB segments, so that
compaction keeps it to about one record per query, the broker's default replication
factor).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from odradek.client import AdminClient, BrokerError, Consumer, NewTopic, Producer, TopicPartition
from odradek.client.offset_fetcher import EARLIEST, LATEST, OffsetFetcher
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["Decision", "Intent", "SinkState", "SinkLog", "ensure_topic", "read_decision_pooled"]

TAIL = 256  # records scanned first, from the end
SEGMENT_BYTES = 16 << 20


@dataclass(frozen=True)
class Intent:
    batch: int
    staged: list                                  # StagedWrite.as_row() of each task
    partitions: dict = field(default_factory=dict)  # target topic -> partition count
    start: dict = field(default_factory=dict)       # target topic -> {partition: offset}


@dataclass(frozen=True)
class SinkState:
    committed: int = -1
    intent: Intent | None = None

    def to_json(self) -> bytes:
        return json.dumps({"committed": self.committed,
                           "intent": None if self.intent is None else asdict(self.intent)},
                          sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> "SinkState":
        data = json.loads(raw)
        intent = data.get("intent")
        return cls(int(data["committed"]), None if intent is None else Intent(**intent))


@dataclass(frozen=True)
class Decision:
    """The transactional sink's commit decision for one batch of a query."""

    batch: int
    handles: tuple = ()                           # (transactional id, producer id, epoch) each
    done: bool = False

    def to_json(self) -> bytes:
        return json.dumps({"batch": self.batch, "handles": [list(h) for h in self.handles], "done": self.done},
                          sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> "Decision":
        data = json.loads(raw)
        return cls(int(data["batch"]), tuple(tuple(h) for h in data["handles"]), bool(data["done"]))


def ensure_topic(admin: AdminClient, topic: NewTopic) -> None:
    """Create ``topic`` unless it exists."""
    try:
        admin.create_topics([topic])
    except BrokerError as e:
        if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise


class SinkLog:
    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.tp = TopicPartition(topic, 0)
        with AdminClient(bootstrap, client_id="odradek-spark-sink") as admin:
            ensure_topic(admin, NewTopic(topic, 1, -1, configs={"cleanup.policy": "compact",
                                                                "segment.bytes": str(SEGMENT_BYTES)}))

    def read(self, query_id: str) -> SinkState:
        raw = self._last_value(query_id.encode())
        return SinkState() if raw is None else SinkState.from_json(raw)

    def write(self, query_id: str, state: SinkState) -> None:
        self._write(query_id.encode(), state.to_json())

    def read_decision(self, query_id: str) -> Decision | None:
        """The transactional sink's last decision for ``query_id`` (None: none yet)."""
        raw = self._last_value(b"txn:" + query_id.encode())
        return None if raw is None else Decision.from_json(raw)

    def write_decision(self, query_id: str, decision: Decision) -> None:
        self._write(b"txn:" + query_id.encode(), decision.to_json())

    def _last_value(self, key: bytes) -> bytes | None:
        """The value of the newest record with ``key`` (None: there is none)."""
        with Consumer(self.bootstrap, client_id="odradek-spark-sink", max_poll_records=10_000) as consumer:
            consumer.assign([self.tp])
            first = consumer.beginning_offsets([self.tp])[self.tp]
            end = consumer.end_offsets([self.tp])[self.tp]
            window = TAIL
            upper = end
            while upper > first:
                start = max(first, end - window)
                found, value = self._scan(consumer, key, start, upper)
                if found:
                    return value
                upper, window = start, window * 8
        return None

    def _scan(self, consumer, key: bytes, start: int, end: int) -> tuple[bool, bytes | None]:
        """Whether a record with ``key`` is in ``[start, end)``, and the newest one's value."""
        found, value = False, None
        consumer.seek(self.tp, start)
        while consumer.position(self.tp) < end:
            for record in consumer.poll(1000).get(self.tp, []):
                if record.key == key and record.offset < end:
                    found, value = True, record.value
        return found, value

    def _write(self, key: bytes, value: bytes) -> None:
        with Producer(self.bootstrap, client_id="odradek-spark-sink", acks="all") as producer:
            producer.send(self.topic, value, key=key, partition=0).result()


def read_decision_pooled(bootstrap: str, topic: str, query_id: str, timeout_s: float = 60) -> Decision | None:
    """``SinkLog.read_decision`` for executors: the same backwards search through the
    process's pooled client (``client_pool``; no client of its own to start per task) and the
    source's range reader. The topic must exist (the driver's writer creates it)."""
    from odradek.spark import client_pool
    from odradek.spark.offset_range import OffsetRange
    from odradek.spark.range_reader import FetchConfig, read_range

    key = b"txn:" + query_id.encode()
    tp = TopicPartition(topic, 0)
    fetcher = OffsetFetcher(client_pool.cluster(bootstrap))
    thread = client_pool.loop_thread()
    first = thread.run(fetcher.list_offsets({tp: EARLIEST}, timeout_s))[tp].offset
    end = thread.run(fetcher.list_offsets({tp: LATEST}, timeout_s))[tp].offset
    config = FetchConfig(bootstrap, fail_on_data_loss=False, retry_timeout_ms=int(timeout_s * 1000))
    upper, window = end, TAIL
    while upper > first:
        start = max(first, end - window)
        found = None
        for batch in read_range(config, OffsetRange(topic, 0, start, upper)):
            keys, values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
            for k, v in zip(keys, values):
                if k == key:
                    found = (v,)
        if found is not None:
            return None if found[0] is None else Decision.from_json(found[0])
        upper, window = start, window * 8
    return None
