"""What a mirror is told: the two clusters, which topics, and the names and intervals that
MirrorMaker 2 has (``MirrorSourceConfig``, ``MirrorConnectorConfig``), in one frozen value.

Names follow MirrorMaker 2's properties where it has one:

=================================  =====================================  ==========
``MirrorConfig``                   MirrorMaker 2                          default
=================================  =====================================  ==========
``topics``                         ``topics`` (a regex, commas for "|")   (required)
``refresh_topics_interval_s``      ``refresh.topics.interval.seconds``    600
``sync_topic_configs``             ``sync.topic.configs.enabled``         False
``replication_factor``             ``replication.factor``                 -1 (broker default)
``config_properties_exclude``      ``config.properties.exclude``          as Kafka's
=================================  =====================================  ==========

``sync_topic_configs`` is off by default here (MirrorMaker 2 has it on): a new target topic
always gets the source's configs; the flag also keeps existing target topics in step.

Exactly once (MirrorMaker 2's ``exactly.once.support``): the target is written by one
transactional producer whose ``transactional.id`` is ``transactional_id_prefix + group_id``,
and the source positions are committed in its transactions as offsets of the consumer group
``group_id`` *on the target cluster*. Two mirrors with the same group id fence each other;
a mirror with another group id starts over from the source's earliest offsets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CONFIG_PROPERTIES_EXCLUDE", "MirrorConfig"]

# Kafka's DefaultConfigPropertyFilter.CONFIG_PROPERTIES_EXCLUDE_DEFAULT: configs that belong to
# the cluster a topic lives on (throttles, timestamp rules, availability) rather than to its data.
CONFIG_PROPERTIES_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)


@dataclass(frozen=True, slots=True)
class MirrorConfig:
    """One mirror from ``source`` to ``target`` (bootstrap servers, ``HOST:PORT[,...]``).

    ``commit_interval_ms``: how long one transaction collects records before it commits
    (records and source positions together); shorter means fresher read_committed readers on
    the target, longer means fewer transaction markers and coordinator round trips.
    ``reporting_interval_ms``: how often the lag is logged. ``consumer_config`` and
    ``producer_config`` are extra keyword arguments of the source ``AsyncConsumer`` and target
    ``AsyncProducer`` (their isolation level, offset reset and transactional id are the
    mirror's own and cannot be overridden).
    """

    source: str
    target: str
    topics: str
    group_id: str = "odradek-mirror"
    transactional_id_prefix: str = "odradek-mirror-"
    sync_topic_configs: bool = False
    refresh_topics_interval_s: float = 600.0
    commit_interval_ms: int = 500
    reporting_interval_ms: int = 5000
    replication_factor: int = -1
    config_properties_exclude: tuple[str, ...] = CONFIG_PROPERTIES_EXCLUDE
    max_poll_records: int = 5000
    consumer_config: dict = field(default_factory=dict)
    producer_config: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ValueError("group_id must not be empty")
        for name in ("refresh_topics_interval_s", "commit_interval_ms", "reporting_interval_ms", "max_poll_records"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.replication_factor == 0 or self.replication_factor < -1:
            raise ValueError("replication_factor must be positive, or -1 for the target broker's default")

    @property
    def transactional_id(self) -> str:
        return self.transactional_id_prefix + self.group_id
