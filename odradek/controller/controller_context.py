"""`ControllerContext`: everything the controller knows, as Kafka's ``ControllerContext``.

It is a cache of the store plus the controller's own bookkeeping; it changes only through the
state machines (`partition_state_machine`, `replica_state_machine`) and `controller.Controller`,
which also emit the writes that make each change durable. It holds:

* the controller's epoch and the version of ``/controller_epoch`` it read when elected
  (``epoch_zk_version``, the guard of every write);
* live brokers: id -> `LiveBroker` (registration and broker epoch), and the brokers in a
  controlled shutdown (still live, no longer eligible as leaders);
* topics: ids and replica assignments (`TopicAssignment`, with adding/removing replicas);
* per partition: its `PartitionStateName` and its leader and ISR (`layout.PartitionState`,
  whose ``zk_version`` is the version of the state znode the controller last read or wrote);
* per replica (partition, broker): its `ReplicaStateName`;
* topics queued for deletion, those whose deletion started, and topics ineligible for it;
* per broker, the replicas in its failed log directories (Kafka's ``replicasOnOfflineDirs``):
  offline though the broker lives, learnt from its LeaderAndIsr answers (KAFKA_STORAGE_ERROR)
  once it reported a failed log directory, forgotten when it restarts or dies.

Invariants kept by the code that changes the context (and checked by the tests):

* a partition's leader, when there is one, is in its ISR;
* a partition state's ``leader_epoch`` only increases, so there is one leader per leader epoch;
* ``zk_version`` is the version the next conditional write of that znode expects.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.controller.commands import LiveBroker, TopicPartition
from odradek.metadata.layout import PartitionState, TopicAssignment

PartitionReplica = tuple[TopicPartition, int]
"""A replica: ``((topic, partition), broker_id)`` (Kafka's ``PartitionAndReplica``)."""


class PartitionStateName(enum.Enum):
    """Kafka's partition states (``PartitionStateMachine.scala``)."""

    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaStateName(enum.Enum):
    """Kafka's replica states (``ReplicaStateMachine.scala``)."""

    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas, the preferred leader first, and a reassignment in progress
    (Kafka's ``ReplicaAssignment``): ``replicas`` then holds the union of old and new."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def without(self, replica: int) -> ReplicaAssignment:
        def drop(rs: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(r for r in rs if r != replica)

        return ReplicaAssignment(drop(self.replicas), drop(self.adding), drop(self.removing))


class TopicIndexedDict(dict):
    """A dict keyed by partition (``(topic, partition)``) or replica (``((topic, partition),
    broker)``) that also keeps, per topic, the set of its keys (`keys_of`): what one topic
    holds is found without walking every partition of the cluster (a deletion of 100 topics
    at 30,000 partitions asked it millions of times). Plain dict otherwise; the index is kept
    by every way of adding or removing a key."""

    __slots__ = ("by_topic",)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()
        if len(args) == 1 and not kwargs and isinstance(args[0], TopicIndexedDict):
            # a copy (`ControllerContext.copy`, before every event): at C speed, not one
            # __setitem__ per key (90,000 replica states at 30,000 partitions)
            dict.update(self, args[0])
            self.by_topic = {topic: set(keys) for topic, keys in args[0].by_topic.items()}
            return
        self.by_topic: dict[str, set] = {}
        self.update(*args, **kwargs)

    @staticmethod
    def _topic(key) -> str:
        first = key[0]
        return first if isinstance(first, str) else first[0]

    def _forget(self, key) -> None:
        topic = self._topic(key)
        keys = self.by_topic[topic]
        keys.discard(key)
        if not keys:
            del self.by_topic[topic]

    def __setitem__(self, key, value) -> None:
        if key not in self:
            self.by_topic.setdefault(self._topic(key), set()).add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        self._forget(key)

    def pop(self, key, *default):
        if key in self:
            self._forget(key)
        return super().pop(key, *default)

    def popitem(self):
        key, value = super().popitem()
        self._forget(key)
        return key, value

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        super().clear()
        self.by_topic.clear()

    def copy(self) -> TopicIndexedDict:
        return type(self)(self)

    def keys_of(self, topic: str) -> frozenset:
        """The keys of ``topic`` (a snapshot: safe to iterate while changing the dict)."""
        return frozenset(self.by_topic.get(topic, ()))


_INDEXED = ("assignments", "replica_states")


@dataclass
class ControllerContext:
    """The controller's view; see the module docstring."""

    controller_id: int = -1
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, LiveBroker] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    fenced_registrations: dict[int, int] = field(default_factory=dict)
    """Broker -> the epoch of a registration whose process is gone (`events.BrokerProcessGone`):
    not live while that znode lasts (`broker_change`)."""
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    assignments: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    topic_zk_versions: dict[str, int] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionStateName] = field(default_factory=dict)
    leadership: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[PartitionReplica, ReplicaStateName] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    topics_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    adopted_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    """State znodes that exist for partitions not known yet (read back after a conflict)."""
    adopted_topics: dict[str, TopicAssignment] = field(default_factory=dict)
    """Topic znodes read back after a conflict, for topics not known yet."""
    unclean_topics: set[str] = field(default_factory=set)
    unclean_default: bool = False
    zk_reassignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    """What ``/admin/reassign_partitions`` asks for and is not done yet (`reassignment`)."""
    replicas_on_offline_dirs: dict[int, frozenset[TopicPartition]] = field(default_factory=dict)
    """Broker -> its replicas in failed log directories (frozensets: ``copy`` is shallow)."""
    log_dir_failed_brokers: set[int] = field(default_factory=set)
    """Brokers that reported a failed log directory since they registered: their LeaderAndIsr
    answers' KAFKA_STORAGE_ERROR mark replicas offline. (Other brokers answer it for a log a
    full disk could not create, and take the role once it can: not an offline replica.)"""

    def __setattr__(self, name: str, value) -> None:
        # the per-topic index follows whatever dict is assigned (tests assign plain ones)
        if name in _INDEXED and not isinstance(value, TopicIndexedDict):
            value = TopicIndexedDict(value)
        object.__setattr__(self, name, value)

    def copy(self) -> ControllerContext:
        """An independent copy: every container is copied, the values in them are immutable
        (frozen dataclasses, enums, ints), so this is O(entries) without a deep copy."""
        fields = {
            name: (type(value)(value) if isinstance(value, (dict, set)) else value)
            for name, value in self.__dict__.items()
        }
        return ControllerContext(**fields)

    def restore(self, other: ControllerContext) -> None:
        """Become a copy of ``other`` (in place: the state machines keep this object)."""
        self.__dict__.update(other.copy().__dict__)

    # -- brokers ------------------------------------------------------------------------------

    def live_broker_ids(self) -> set[int]:
        """Live brokers not shutting down: the ones a leader may be chosen from."""
        return set(self.live_brokers) - self.shutting_down

    def live_or_shutting_down_ids(self) -> set[int]:
        return set(self.live_brokers)

    def is_replica_online(
        self, broker_id: int, include_shutting_down: bool = False, tp: TopicPartition | None = None
    ) -> bool:
        """Kafka's ``isReplicaOnline``: the broker is live (and not shutting down, unless
        ``include_shutting_down``) and, given ``tp``, that replica is not in one of its failed
        log directories."""
        if tp is not None and tp in self.replicas_on_offline_dirs.get(broker_id, ()):
            return False
        if include_shutting_down:
            return broker_id in self.live_brokers
        return broker_id in self.live_brokers and broker_id not in self.shutting_down

    def forget_offline_dirs(self, brokers: Iterable[int]) -> None:
        """A broker that restarted or died: its log directories are loaded afresh."""
        for broker in brokers:
            self.replicas_on_offline_dirs.pop(broker, None)
            self.log_dir_failed_brokers.discard(broker)

    def broker_epoch(self, broker_id: int) -> int:
        broker = self.live_brokers.get(broker_id)
        return broker.epoch if broker else -1

    # -- topics and partitions ----------------------------------------------------------------

    def all_partitions(self) -> list[TopicPartition]:
        return sorted(self.assignments)

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return sorted(self.assignments.keys_of(topic))

    def all_topics(self) -> set[str]:
        return set(self.assignments.by_topic) | set(self.topic_ids)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self.assignments.get(tp)
        return assignment.replicas if assignment else ()

    def replicas_for_partitions(
        self, partitions: Iterable[TopicPartition]
    ) -> list[PartitionReplica]:
        return [(tp, r) for tp in partitions for r in self.replicas(tp)]

    def replicas_on_brokers(self, brokers: set[int]) -> list[PartitionReplica]:
        return [(tp, r) for tp in self.all_partitions() for r in self.replicas(tp) if r in brokers]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def partition_state(self, tp: TopicPartition) -> PartitionStateName:
        return self.partition_states.get(tp, PartitionStateName.NON_EXISTENT)

    def replica_state(self, replica: PartitionReplica) -> ReplicaStateName:
        return self.replica_states.get(replica, ReplicaStateName.NON_EXISTENT)

    def partitions_in_states(
        self, states: set[PartitionStateName], topic: str | None = None
    ) -> list[TopicPartition]:
        partitions = self.all_partitions() if topic is None else self.partitions_for_topic(topic)
        return [tp for tp in partitions if self.partition_state(tp) in states]

    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        """Partitions not yet offline whose leader is gone (Kafka's
        ``partitionsWithOfflineLeader``), topics being deleted excepted."""
        out = []
        for tp, state in sorted(self.leadership.items()):
            if self.partition_state(tp) is PartitionStateName.OFFLINE:
                continue
            if tp[0] in self.topics_to_delete:
                continue
            if not self.is_replica_online(state.leader, include_shutting_down=True, tp=tp):
                out.append(tp)
        return out

    def partitions_being_reassigned(self) -> list[TopicPartition]:
        """Partitions with adding or removing replicas (Kafka's
        ``partitionsBeingReassigned``)."""
        return [tp for tp, a in sorted(self.assignments.items()) if a.is_being_reassigned]

    def offline_replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        """The replicas UpdateMetadata calls offline: as in Kafka's
        ``addUpdateMetadataRequestForBrokers``, a broker in controlled shutdown counts as
        offline, as do dead brokers and replicas in failed log directories."""
        return tuple(r for r in self.replicas(tp) if not self.is_replica_online(r, tp=tp))

    def unclean_enabled(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` for ``topic`` (topic config or broker default)."""
        return self.unclean_default or topic in self.unclean_topics

    def is_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_delete

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic entirely (Kafka's ``removeTopic``)."""
        for tp in self.partitions_for_topic(topic):
            self.assignments.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.leadership.pop(tp, None)
        for replica in self.replica_states.keys_of(topic):
            del self.replica_states[replica]
        self.topic_ids.pop(topic, None)
        self.topic_zk_versions.pop(topic, None)
        self.topics_to_delete.discard(topic)
        self.topics_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
