"""``BrokerCollector``: every metric of one broker, gathered when ``/metrics`` is scraped.

A ``prometheus_client`` custom collector (registered in the broker's own
``CollectorRegistry``: several brokers may share a process) that turns the broker's plain
counters and state into metric families at scrape time; nothing on the request paths touches
``prometheus_client``. It runs on the broker's event loop (the HTTP listener's handler), so
it reads a consistent state without locks.
"""

from __future__ import annotations

from prometheus_client.registry import Collector

from odradek.server.metrics.broker_gauges import (
    controller_families,
    log_families,
    replica_manager_families,
    socket_server_families,
)
from odradek.server.metrics.broker_topic_metrics import topic_families
from odradek.server.metrics.consumer_lag import consumer_group_families
from odradek.server.metrics.kafka_exporter import cluster_families, partition_offset_families


class BrokerCollector(Collector):
    def __init__(self, broker, metrics) -> None:
        self.broker = broker
        self.metrics = metrics  # BrokerMetrics: the counters and the event-loop lag

    def collect(self):
        broker, metrics = self.broker, self.metrics
        if broker.metadata is not None:  # topics deleted since the last scrape: their series end
            metrics.topics.retire(broker.metadata_image().topics)
        yield from topic_families(metrics.topics)
        yield from metrics.requests.collect()
        yield from replica_manager_families(broker)
        yield from log_families(broker)
        yield from socket_server_families(broker, metrics.loop_lag.lag_seconds)
        yield from partition_offset_families(broker)
        if broker.metadata is not None:
            yield from controller_families(broker)
            yield from cluster_families(broker)
        yield from consumer_group_families(broker)
        if getattr(broker, "add_partitions_to_txn", None) is not None:  # server/add_partitions_to_txn_manager.py
            yield from broker.add_partitions_to_txn.metric_families()
