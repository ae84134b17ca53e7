"""BrokerTopicStats: what counts as in, out and failed, and the families Prometheus reads."""

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.metrics.broker_topic_metrics import BrokerTopicStats, topic_families

from tests.server.metrics.scrape import expose, value

PREFIX = "kafka_server_brokertopicmetrics_"


def test_counts_per_topic_and_the_broker_total():
    stats = BrokerTopicStats()
    stats.produced("a", 0, 9, 1000)  # offsets 0..9: ten records
    stats.produced("a", 10, 10, 80)
    stats.produced("b", 5, 7, 300)
    stats.fetched([("a", b"x" * 700), ("b", b""), ("b", b"y" * 50)])
    samples = expose(topic_families(stats))
    assert value(samples, PREFIX + "messagesin_total", topic="a") == 11
    assert value(samples, PREFIX + "messagesin_total", topic="b") == 3
    assert value(samples, PREFIX + "messagesin_total") == 14
    assert value(samples, PREFIX + "bytesin_total", topic="a") == 1080
    assert value(samples, PREFIX + "bytesin_total") == 1380
    assert value(samples, PREFIX + "bytesout_total", topic="a") == 700
    assert value(samples, PREFIX + "bytesout_total") == 750
    assert value(samples, PREFIX + "failedproducerequests_total") == 0


def test_only_unexpected_failures_count_as_kafka_counts_them():
    stats = BrokerTopicStats()
    for code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
                 ErrorCode.MESSAGE_TOO_LARGE):
        stats.produce_failed("t", code)
    stats.produce_failed("t", ErrorCode.INVALID_TIMESTAMP)
    stats.produce_failed("t", ErrorCode.NOT_ENOUGH_REPLICAS)
    stats.fetch_failed("t", ErrorCode.OFFSET_OUT_OF_RANGE)
    stats.fetch_failed("t", ErrorCode.CORRUPT_MESSAGE)  # a damaged segment: counted for fetches
    samples = expose(topic_families(stats))
    assert value(samples, PREFIX + "failedproducerequests_total", topic="t") == 2
    assert value(samples, PREFIX + "failedfetchrequests_total", topic="t") == 1


def test_a_deleted_topics_series_ends_and_the_total_keeps_its_counts():
    stats = BrokerTopicStats()
    stats.produced("gone", 0, 4, 500)
    stats.produced("kept", 0, 0, 100)
    stats.retire({"kept"})
    samples = expose(topic_families(stats))
    assert (PREFIX + "messagesin_total", frozenset({("topic", "gone")})) not in samples
    assert value(samples, PREFIX + "messagesin_total", topic="kept") == 1
    assert value(samples, PREFIX + "messagesin_total") == 6
    assert value(samples, PREFIX + "bytesin_total") == 600
