"""The metrics read from the broker's state when scraped: nothing is counted for them on any
request path. Names as the Prometheus JMX exporter's usual Kafka rules spell Kafka's MBeans
(lower case, ``<domain>_<type>_<name>``; a meter's count gets ``_total``).

- ``kafka_server_replicamanager_*`` (Kafka's ``ReplicaManager``): ``partitioncount`` (partitions
  with a replica here), ``leadercount`` (led here), ``underreplicatedpartitions`` (led here, ISR
  smaller than the replica set), ``isrshrinks_total`` / ``isrexpands_total`` (ISR changes of
  partitions led here once the controller's state held them: ``ReplicaManager.count_isr_change``).
- ``kafka_controller_kafkacontroller_activecontrollercount``: 1 on the active controller, else 0
  (their sum over a cluster is 1); ``..._offlinepartitionscount``: on the active controller, the
  partitions whose leader is none or not a live broker in its metadata image (0 elsewhere, as
  in Kafka); topics being deleted are left out. From the counts the active controller's event
  thread publishes after each event (`controller.controller_metrics`, 0 elsewhere):
  ``..._globaltopiccount``, ``..._globalpartitioncount``,
  ``..._preferredreplicaimbalancecount``, ``..._topicstodeletecount``,
  ``..._replicastodeletecount``, ``..._topicsineligibletodeletecount``,
  ``..._replicasineligibletodeletecount``.
- ``kafka_log_log_size`` / ``_logendoffset`` / ``_logstartoffset`` ``{topic, partition}``:
  every log this broker holds (leader or follower).
- ``kafka_server_socketservermetrics_connection_count{listener}``: open client connections.
- ``kafka_network_requestchannel_requestqueuesize``: requests received and not yet answered,
  over every connection (odradek handles a request as soon as its frame is complete, so what
  Kafka's RequestQueueSize counts, requests waiting for a handler thread, is here the requests
  waiting for their response: long polls, acks=all produces, responses behind them in order).
  Frames still unread in a paused connection's buffer are not counted.
- ``odradek_eventloop_lag_seconds``: how late the broker's event loop last woke a timer
  (``event_loop_lag``); no Kafka equivalent.
"""

from __future__ import annotations

from collections import Counter

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.controller.controller_metrics import INACTIVE


def replica_manager_families(broker) -> list:
    partitions = list(broker.replica_manager.partitions.values()) if broker.replica_manager is not None else []
    me = broker.broker_id
    led = [p for p in partitions if p.leader_id == me]
    families = [
        _gauge("kafka_server_replicamanager_partitioncount", "Partitions with a replica on this broker",
               len(partitions)),
        _gauge("kafka_server_replicamanager_leadercount", "Partitions led by this broker", len(led)),
        _gauge("kafka_server_replicamanager_underreplicatedpartitions",
               "Partitions led by this broker whose ISR is smaller than their replica set",
               sum(1 for p in led if len(p.isr) < len(p.replicas))),
    ]
    rm = broker.replica_manager
    for name, attr, what in (("isrshrinks", "isr_shrinks", "shrinks"), ("isrexpands", "isr_expands", "expansions")):
        family = CounterMetricFamily(f"kafka_server_replicamanager_{name}",
                                     f"ISR {what} of partitions led by this broker")
        family.add_metric([], getattr(rm, attr, 0) if rm is not None else 0)
        families.append(family)
    return families


def controller_families(broker) -> list:
    service = broker.controller_service
    active = service is not None and service.active
    offline = _offline_partitions(broker.metadata_image()) if active else 0
    counts = service.metrics if active else INACTIVE
    return [
        _gauge("kafka_controller_kafkacontroller_activecontrollercount",
               "1 on the cluster's active controller, else 0", 1 if active else 0),
        _gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
               "Partitions without a live leader (reported by the active controller)", offline),
        *(_gauge(f"kafka_controller_kafkacontroller_{name}", f"{what} (reported by the active controller)",
                 getattr(counts, attr)) for name, attr, what in _CONTROLLER_COUNTS),
    ]


# (gauge name, ControllerMetrics field, what it counts)
_CONTROLLER_COUNTS = (
    ("globaltopiccount", "global_topic_count", "Topics in the cluster"),
    ("globalpartitioncount", "global_partition_count", "Partitions in the cluster with a leadership state"),
    ("preferredreplicaimbalancecount", "preferred_replica_imbalance_count",
     "Partitions not led by their preferred replica"),
    ("topicstodeletecount", "topics_to_delete_count", "Topics queued for deletion"),
    ("replicastodeletecount", "replicas_to_delete_count", "Replicas of topics queued for deletion not deleted yet"),
    ("topicsineligibletodeletecount", "topics_ineligible_to_delete_count",
     "Topics queued for deletion whose deletion cannot proceed now"),
    ("replicasineligibletodeletecount", "replicas_ineligible_to_delete_count",
     "Replicas of topics queued for deletion that cannot be deleted now"),
)


def _offline_partitions(image) -> int:
    live = image.brokers
    offline = 0
    for name, assignment in image.topics.items():
        if name in image.topics_being_deleted:
            continue
        states = image.partition_states.get(name, {})
        for index in assignment.partitions:
            state = states.get(index)
            if state is None or state.leader not in live:
                offline += 1
    return offline


def log_families(broker) -> list:
    labels = ["topic", "partition"]
    size = GaugeMetricFamily("kafka_log_log_size", "Bytes in the partition's log segments", labels=labels)
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "The partition log's end offset", labels=labels)
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "The partition log's start offset", labels=labels)
    rm = broker.replica_manager
    for (topic, index), part in sorted(rm.partitions.items()) if rm is not None else ():
        log = part.log
        key = [topic, str(index)]
        size.add_metric(key, log.size)
        end.add_metric(key, log.log_end_offset)
        start.add_metric(key, log.log_start_offset)
    return [size, end, start]


def socket_server_families(broker, loop_lag_seconds: float) -> list:
    connections = GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                                    "Open client connections, per listener", labels=["listener"])
    per_listener = Counter(c.listener_name for c in broker.connections)
    for name in sorted(set(per_listener) | set(broker.bound)):
        connections.add_metric([name], per_listener.get(name, 0))
    return [
        connections,
        _gauge("kafka_network_requestchannel_requestqueuesize",
               "Requests received and not answered yet, over all connections",
               sum(len(c.pending) for c in broker.connections)),
        _gauge("odradek_eventloop_lag_seconds", "How late the broker's event loop last woke a timer",
               loop_lag_seconds),
    ]


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
