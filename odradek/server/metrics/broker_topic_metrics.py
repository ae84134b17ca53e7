"""Kafka's ``BrokerTopicMetrics`` as plain counters: per topic, summed into the broker total
when scraped.

What is counted, and where (Kafka's ``ReplicaManager.appendToLocalLog`` / ``readFromLog`` and
``KafkaApis.handleFetchRequest``):

- ``messages_in`` / ``bytes_in``: records and record bytes (as received) of each partition a
  client's Produce appended here as leader: the produce fast path (``server/produce_fast_path.py``)
  and the generic handler (``handlers/produce.py``). Followers' appends (replication) and the
  coordinators' own writes to ``__consumer_offsets`` / ``__transaction_state`` are not counted;
  a duplicate an idempotent producer sent again is acknowledged, and counted, once more.
- ``bytes_out``: record bytes of the final Fetch response to a consumer (not to followers),
  per partition.
- ``failed_produce`` / ``failed_fetch``: partitions of a request that failed for a reason Kafka
  counts as unexpected. Kafka leaves out the errors that are the client's or the cluster's
  routine (``NOT_COUNTED_PRODUCE`` / ``NOT_COUNTED_FETCH``): an unknown topic, a moved leader,
  too large or corrupt batches, a failed disk.

Cost: the hot paths reach a topic's ``TopicStats`` by one dict lookup per topic and request
(``BrokerTopicStats.topic``) and add to two integers per partition; nothing is locked (one
event loop) and nothing is allocated after a topic's first request. The broker total is the
sum at scrape time, plus what deleted topics had counted (``retire``), so it never decreases.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode

# Kafka's "known exceptions", which do not mark FailedProduceRequestsPerSec / FailedFetchRequestsPerSec.
NOT_COUNTED_PRODUCE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
})
NOT_COUNTED_FETCH = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.OFFSET_OUT_OF_RANGE,
})

# (attribute, metric name after ``kafka_server_brokertopicmetrics_``, Kafka's meter, help text)
COUNTERS = (
    ("messages_in", "messagesin", "MessagesInPerSec", "records appended by client produce requests"),
    ("bytes_in", "bytesin", "BytesInPerSec", "record bytes appended by client produce requests"),
    ("bytes_out", "bytesout", "BytesOutPerSec", "record bytes sent to consumers in fetch responses"),
    ("failed_produce", "failedproducerequests", "FailedProduceRequestsPerSec",
     "partitions of produce requests that failed unexpectedly"),
    ("failed_fetch", "failedfetchrequests", "FailedFetchRequestsPerSec",
     "partitions of fetch requests that failed unexpectedly"),
)


class TopicStats:
    """One topic's counters (monotonic, since the broker started)."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "failed_produce", "failed_fetch")

    def __init__(self) -> None:
        self.messages_in = self.bytes_in = self.bytes_out = 0
        self.failed_produce = self.failed_fetch = 0

    def add(self, other: TopicStats) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class BrokerTopicStats:
    """Every topic's ``TopicStats`` on this broker, made on a topic's first count."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        self.retired = TopicStats()  # the counts of topics since deleted

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def produced(self, topic: str, first_offset: int, last_offset: int, nbytes: int) -> None:
        """A client's records ``first_offset..last_offset`` (``nbytes`` of batches) appended."""
        stats = self.topic(topic)
        stats.messages_in += last_offset - first_offset + 1
        stats.bytes_in += nbytes

    def produce_failed(self, topic: str, error: ErrorCode) -> None:
        if error not in NOT_COUNTED_PRODUCE:
            self.topic(topic).failed_produce += 1

    def fetch_failed(self, topic: str, error: ErrorCode) -> None:
        if error not in NOT_COUNTED_FETCH:
            self.topic(topic).failed_fetch += 1

    def fetched(self, partitions) -> None:
        """A consumer's fetch answered: ``partitions`` are ``(topic, records)`` pairs (records:
        bytes or a file region, anything with a length)."""
        topics = self.topics
        for topic, records in partitions:
            if records:
                stats = topics.get(topic) or self.topic(topic)
                stats.bytes_out += len(records)

    def retire(self, live_topics) -> None:
        """Fold the stats of topics not in ``live_topics`` into ``retired`` (the total keeps
        them; the per-topic series end, as Kafka removes a deleted topic's metrics)."""
        for name in [t for t in self.topics if t not in live_topics]:
            self.retired.add(self.topics.pop(name))

    def total(self) -> TopicStats:
        total = TopicStats()
        total.add(self.retired)
        for stats in self.topics.values():
            total.add(stats)
        return total


def topic_families(stats: BrokerTopicStats) -> list:
    """``kafka_server_brokertopicmetrics_<name>_total``: one series per topic (``topic``
    label) and the broker total without labels, as the JMX exporter exports Kafka's per-topic
    and all-topics meters."""
    from prometheus_client.core import CounterMetricFamily

    total = stats.total()
    families = []
    for attr, name, meter, documentation in COUNTERS:
        family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", f"{documentation} (Kafka's {meter})")
        sample = family.name + "_total"
        for topic in sorted(stats.topics):
            family.add_sample(sample, {"topic": topic}, getattr(stats.topics[topic], attr))
        family.add_sample(sample, {}, getattr(total, attr))
        families.append(family)
    return families
