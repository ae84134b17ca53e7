"""The exactly-once sink's own log: per query, the last committed batch and the batch being
published, kept in a compacted odradek topic (``_odradek_spark_commits`` by default).

One record per state change, keyed by the query id (compaction keeps the newest per query);
its value is JSON::

    {"committed": 7,                      # last batch id published in full (-1: none)
     "intent": null | {                   # the batch being published, written before it is
        "batch": 8,
        "staged": [[task, staging partition, first offset, last offset, count, tag], ...],
        "partitions": {"topic": partition count},
        "start": {"topic": {"partition": end offset before publishing}}}}

Writes wait for acks=all. A state is read by scanning the topic's one partition from its log
start to its end and keeping the query's last record: cheap, because compaction keeps one
record per query. The topic is created on first use (one partition, cleanup.policy=compact,
the broker's default replication factor).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from odradek.client import AdminClient, BrokerError, Consumer, NewTopic, Producer, TopicPartition
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["Intent", "SinkState", "SinkLog", "ensure_topic"]


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
            ensure_topic(admin, NewTopic(topic, 1, -1, configs={"cleanup.policy": "compact"}))

    def read(self, query_id: str) -> SinkState:
        key = query_id.encode()
        state = SinkState()
        with Consumer(self.bootstrap, client_id="odradek-spark-sink", max_poll_records=10_000) as consumer:
            consumer.assign([self.tp])
            end = consumer.end_offsets([self.tp])[self.tp]
            consumer.seek_to_beginning(self.tp)
            while consumer.position(self.tp) < end:
                for record in consumer.poll(1000).get(self.tp, []):
                    if record.key == key and record.value is not None and record.offset < end:
                        state = SinkState.from_json(record.value)
        return state

    def write(self, query_id: str, state: SinkState) -> None:
        with Producer(self.bootstrap, client_id="odradek-spark-sink", acks="all") as producer:
            producer.send(self.topic, state.to_json(), key=query_id.encode(), partition=0).result()
