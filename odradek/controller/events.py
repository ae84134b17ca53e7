"""The controller's events (Kafka's ``ControllerEvent`` subclasses in ``ControllerState`` /
``KafkaController.scala``), as values carrying what the edge read from the store.

The edge turns store watches and broker requests into these and hands them, one at a time,
to `controller.Controller.handle`. Each carries the data it is about (the new live broker
set, the topics now under ``/brokers/topics``, ...), read by the edge, so the controller never
reads the store itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.controller.commands import LiveBroker, TopicPartition
from odradek.metadata.layout import PartitionState, TopicAssignment


@dataclass(frozen=True)
class ClusterSnapshot:
    """What a newly elected controller reads (Kafka's ``initializeControllerContext``):
    its epoch and the version of ``/controller_epoch`` it wrote, live brokers, topics with
    their assignments, partition states (with their znode versions), topics under
    ``/admin/delete_topics``, and topics with ``unclean.leader.election.enable=true``; and
    ``fenced_registrations`` (broker id: epoch), registrations whose process this broker found
    gone before it took the seat (the controller it watched, `controller_liveness`): failed at
    once, as `BrokerProcessGone` would fail them, not left to a second event."""

    controller_id: int
    epoch: int
    epoch_zk_version: int
    live_brokers: tuple[LiveBroker, ...] = ()
    topics: tuple[TopicAssignment, ...] = ()
    partition_states: Mapping[TopicPartition, PartitionState] = field(default_factory=dict)
    topics_to_delete: frozenset[str] = frozenset()
    unclean_topics: frozenset[str] = frozenset()
    unclean_default: bool = False
    fenced_registrations: Mapping[int, int] = field(default_factory=dict)


class ControllerEvent:
    """Base of the events."""


@dataclass(frozen=True)
class Startup(ControllerEvent):
    """This broker won the election (``/controller`` created, ``/controller_epoch`` bumped):
    Kafka's ``onControllerFailover`` from ``snapshot``."""

    snapshot: ClusterSnapshot


@dataclass(frozen=True)
class Resign(ControllerEvent):
    """Another broker is controller now (or a write met a newer controller epoch)."""


@dataclass(frozen=True)
class BrokerChange(ControllerEvent):
    """The children of ``/brokers/ids`` changed: ``live_brokers`` is the new live set. A
    broker whose epoch changed restarted (Kafka's "bounced" brokers)."""

    live_brokers: tuple[LiveBroker, ...]


@dataclass(frozen=True)
class BrokerProcessGone(ControllerEvent):
    """The registration of ``broker_id`` at ``epoch`` has no process behind it any more: its
    endpoint refused connections twice (`broker_liveness`), while its znode waits for the
    session to expire. Handled as that broker's failure, and the registration is fenced until
    the broker registers again (`broker_change.BrokerChanges.on_broker_process_gone`)."""

    broker_id: int
    epoch: int


@dataclass(frozen=True)
class TopicChange(ControllerEvent):
    """The children of ``/brokers/topics`` changed: every topic now there."""

    topics: tuple[TopicAssignment, ...]


@dataclass(frozen=True)
class PartitionModifications(ControllerEvent):
    """``/brokers/topics/<t>`` changed (partitions were added): its new assignment."""

    topic: TopicAssignment


@dataclass(frozen=True)
class TopicDeletion(ControllerEvent):
    """The children of ``/admin/delete_topics``: topics to delete."""

    topics: tuple[str, ...]


@dataclass(frozen=True)
class TopicDeletionStopReplicaResponse(ControllerEvent):
    """A broker answered a StopReplica with delete: the partitions it deleted and those
    that failed."""

    broker_id: int
    deleted: tuple[TopicPartition, ...] = ()
    failed: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class IsrChangeNotification(ControllerEvent):
    """Leaders changed ISRs in the store themselves (``/isr_change_notification``): the
    partition states now there, as the edge read them."""

    states: Mapping[TopicPartition, PartitionState]


@dataclass(frozen=True)
class LogDirEventNotification(ControllerEvent):
    """Brokers wrote ``/log_dir_event_notification/log_dir_event_<n>`` (a log directory of
    theirs failed): the brokers, as the edge read them (each notification deleted once read)."""

    broker_ids: tuple[int, ...]


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived(ControllerEvent):
    """A broker answered a LeaderAndIsr with KAFKA_STORAGE_ERROR for ``offline`` partitions
    (Kafka's ``LeaderAndIsrResponseReceived``, which the edge raises only for those)."""

    broker_id: int
    offline: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class AlterPartition(ControllerEvent):
    """A leader asks for a new ISR (Kafka's AlterIsr / AlterPartition): per partition the
    leader epoch and state version it holds and the ISR it wants."""

    broker_id: int
    broker_epoch: int
    partitions: tuple[tuple[TopicPartition, int, tuple[int, ...], int], ...]
    """``(partition, leader_epoch, new_isr, zk_version)`` entries."""


@dataclass(frozen=True)
class ControlledShutdown(ControllerEvent):
    """Broker ``broker_id`` asks to shut down: move its leaderships away first."""

    broker_id: int
    broker_epoch: int = -1


@dataclass(frozen=True)
class PreferredReplicaElection(ControllerEvent):
    """Move leadership back to the preferred replicas of ``partitions`` (None: all), as
    ``auto.leader.rebalance.enable`` and ``kafka-leader-election.sh`` do."""

    partitions: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True)
class ElectLeaders(ControllerEvent):
    """An administrator's election (the ElectLeaders API, Kafka's ``ReplicaLeaderElection``
    triggered by the admin client): ``election_type`` 0 PREFERRED or 1 UNCLEAN, for
    ``partitions`` (None: all). Answered with a `commands.ElectLeadersReply`."""

    partitions: tuple[TopicPartition, ...] | None
    election_type: int = 0


@dataclass(frozen=True)
class PartitionReassignment(ControllerEvent):
    """``/admin/reassign_partitions`` holds these targets (Kafka's ``ZkPartitionReassignment``):
    target replicas per partition, the preferred first."""

    targets: Mapping[TopicPartition, tuple[int, ...]]


@dataclass(frozen=True)
class ApiPartitionReassignment(ControllerEvent):
    """AlterPartitionReassignments: target replicas per partition, None to cancel the
    partition's reassignment in progress."""

    reassignments: Mapping[TopicPartition, tuple[int, ...] | None]


@dataclass(frozen=True)
class ListPartitionReassignments(ControllerEvent):
    """ListPartitionReassignments of ``partitions`` (None: every one in progress)."""

    partitions: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True)
class LeaderAndIsrConflict(ControllerEvent):
    """A conditional write failed on its version: the states now in the store of every
    partition written by the failed command list (`commands.written_partitions`), and the
    topic znodes it set (`commands.written_topics`), as read back."""

    states: Mapping[TopicPartition, PartitionState]
    topics: Mapping[str, TopicAssignment] = field(default_factory=dict)

