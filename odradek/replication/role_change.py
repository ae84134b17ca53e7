"""What a broker decides on the controller's LeaderAndIsr and StopReplica requests: the
checks of Kafka's ``KafkaApis.handleLeaderAndIsrRequest`` / ``ReplicaManager.becomeLeaderOrFollower``
and ``stopReplicas`` (ZooKeeper mode, 2.8), as plain values in and out, no I/O.
``replication/state_change.py`` carries the decisions out.

Whole request, in this order:

1. broker epoch (KIP-380): a request naming an older epoch than this broker's registration
   (the czxid of ``/brokers/ids/<id>``) was meant for an earlier run of this broker, before
   a quick restart: STALE_BROKER_EPOCH. -1 (older controllers; LeaderAndIsr v0-1,
   StopReplica v0, UpdateMetadata v0-4 carry none) is not checked, and a newer one is
   accepted (the controller may learn of the new registration first).
2. controller epoch: older than the highest seen (``ReplicaManager.controller_epoch``):
   STALE_CONTROLLER_EPOCH, a deposed controller's request. Else it becomes the highest seen.

Per partition of a LeaderAndIsr, against the replica held here (``HeldReplica``; a
partition not hosted counts as leader epoch -1):

- a name no topic can have, or a negative partition number (a controller never sends
  them; a stray client might, and names become directory names):
  INVALID_TOPIC_EXCEPTION / UNKNOWN_TOPIC_OR_PARTITION;
- a topic id that differs from the one the replica's log has: INCONSISTENT_TOPIC_ID;
- a leader epoch not newer than the one held: ignored, STALE_CONTROLLER_EPOCH, as Kafka's
  broker answers (an older epoch comes from a controller that lost a race; the same epoch is
  a repeat: the role is taken already);
- a replica list without this broker: UNKNOWN_TOPIC_OR_PARTITION (ignored);
- else the broker leads it when ``leader`` is its id, else follows ``leader``.

Per partition of a StopReplica: a hosted replica is stopped when the request's leader epoch
is newer than the one held, or is a sentinel (-2 ``EPOCH_DURING_DELETE``: the topic is being
deleted, and deletion does not bump epochs; -1: StopReplica v0-2 carry no epoch); an epoch
not newer is FENCED_LEADER_EPOCH (ignored); bad names as for LeaderAndIsr. A partition not hosted is "stopped" too: with
``delete`` its log, if one was left on disk (say, by a deletion while the broker was down),
must still go.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from odradek.controller.commands import LeaderAndIsrPartition
from odradek.metadata.errors import InvalidTopicError
from odradek.metadata.topic_name import validate_topic_name
from odradek.protocol.generated.error_codes import ErrorCode

NO_BROKER_EPOCH = -1  # Kafka's AbstractControlRequest.UNKNOWN_BROKER_EPOCH
NO_EPOCH = -1  # Kafka's LeaderAndIsr.NoEpoch: a StopReplica without epochs (v0-2)
EPOCH_DURING_DELETE = -2  # Kafka's LeaderAndIsr.EpochDuringDelete
NOT_HOSTED_EPOCH = -1  # the leader epoch of a partition this broker does not host

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ControlHeader:
    """The fields every controller-to-broker request carries."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int = NO_BROKER_EPOCH


@dataclass(frozen=True, slots=True)
class StopReplicaPartition:
    """One partition of a StopReplica request, whatever its version."""

    topic: str
    partition: int
    leader_epoch: int = NO_EPOCH
    delete: bool = False

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class HeldReplica:
    """What this broker holds of a partition it hosts: its leader epoch and its log's
    topic id (None when unknown)."""

    leader_epoch: int
    topic_id: uuid.UUID | None = None


Held = Callable[[TopicPartition], "HeldReplica | None"]


@dataclass
class RoleDecision:
    """``errors``: the partitions left as they are, with why (the others are answered NONE
    once their role is taken, or KAFKA_STORAGE_ERROR when their log cannot be had);
    ``leaders`` / ``followers``: the roles to take, in request order."""

    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    leaders: list[LeaderAndIsrPartition] = field(default_factory=list)
    followers: list[LeaderAndIsrPartition] = field(default_factory=list)


@dataclass
class StopDecision:
    """``errors``: the partitions left as they are, with why; ``stop``: the partitions to
    stop, each with whether to delete its log, in request order."""

    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    stop: dict[TopicPartition, bool] = field(default_factory=dict)


def check_control_request(header: ControlHeader, highest_controller_epoch: int, broker_epoch: int) -> ErrorCode:
    """The whole-request checks (the module's 1 and 2): NONE, STALE_BROKER_EPOCH or
    STALE_CONTROLLER_EPOCH. ``broker_epoch``: this broker's, -1 when not registered yet."""
    if header.broker_epoch != NO_BROKER_EPOCH and header.broker_epoch < broker_epoch:
        return ErrorCode.STALE_BROKER_EPOCH
    if header.controller_epoch < highest_controller_epoch:
        return ErrorCode.STALE_CONTROLLER_EPOCH
    return ErrorCode.NONE


def decide_roles(broker_id: int, states: Iterable[LeaderAndIsrPartition], held: Held) -> RoleDecision:
    """The roles to take for a LeaderAndIsr's partition ``states`` (see the module), given
    ``held(key)``: the replica hosted here, or None. A partition named twice: the first wins."""
    decision = RoleDecision()
    seen: set[TopicPartition] = set()
    bad_topics = _BadTopics()  # a request names each of its topics for many partitions
    for state in states:
        key = (state.topic, state.partition)
        if key in seen:
            continue
        seen.add(key)
        bad = bad_topics.of(state.topic) or (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if key[1] < 0 else None)
        if bad is not None:
            decision.errors[key] = bad
            continue
        replica = held(key)
        current = replica.leader_epoch if replica is not None else NOT_HOSTED_EPOCH
        if (replica is not None and state.topic_id is not None and replica.topic_id is not None
                and state.topic_id != replica.topic_id):
            decision.errors[key] = ErrorCode.INCONSISTENT_TOPIC_ID
        elif state.leader_epoch <= current:
            decision.errors[key] = ErrorCode.STALE_CONTROLLER_EPOCH
        elif broker_id not in state.replicas:
            decision.errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif state.leader == broker_id:
            decision.leaders.append(state)
        else:
            decision.followers.append(state)
    return decision


def decide_stops(partitions: Iterable[StopReplicaPartition], held: Held) -> StopDecision:
    """The partitions of a StopReplica to stop (see the module), given ``held(key)``.
    A partition named twice: the first wins."""
    decision = StopDecision()
    for part in partitions:
        key = part.key
        if key in decision.stop or key in decision.errors:
            continue
        bad = _bad_partition(key)
        if bad is not None:
            decision.errors[key] = bad
            continue
        replica = held(key)
        if (replica is None or part.leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH)
                or part.leader_epoch > replica.leader_epoch):
            decision.stop[key] = part.delete
        else:
            decision.errors[key] = ErrorCode.FENCED_LEADER_EPOCH
    return decision


class _BadTopics:
    """Each topic name checked once (`validate_topic_name`): a 10,000-partition
    LeaderAndIsr names 100 topics."""

    def __init__(self) -> None:
        self._checked: dict[str, ErrorCode | None] = {}

    def of(self, topic: str) -> ErrorCode | None:
        """INVALID_TOPIC_EXCEPTION for a name no topic can have, else None."""
        try:
            return self._checked[topic]
        except KeyError:
            pass
        try:
            validate_topic_name(topic)
            bad = None
        except InvalidTopicError:
            bad = ErrorCode.INVALID_TOPIC_EXCEPTION
        self._checked[topic] = bad
        return bad


def _bad_partition(key: TopicPartition) -> ErrorCode | None:
    try:
        validate_topic_name(key[0])
    except InvalidTopicError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if key[1] < 0 else None


def initial_fetch_offset(log_end_offset: int, high_watermark: int, latest_epoch: int | None) -> int:
    """Where a new follower starts fetching (Kafka's ``ReplicaManager.initialFetchOffset``):
    its log end offset when its log knows a leader epoch (the fetcher first finds, by epoch,
    where its log diverges from the leader's and truncates there), else its high watermark
    (without epochs, only what was committed is known to be the leader's too)."""
    return log_end_offset if latest_epoch is not None else high_watermark
