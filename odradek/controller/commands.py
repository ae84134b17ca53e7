"""What the controller asks the outside world to do: conditional znode writes and requests
to brokers, as small frozen values. The state machines never do I/O; they return these.

Executing a list of commands is one loop, in order::

    for command in commands:
        if isinstance(command, ZnodeWrite):
            command.apply(store)        # one multi: CheckOp on /controller_epoch, then the write
        elif isinstance(command, BrokerRequest):
            send(command.broker_id, command)    # LeaderAndIsr / UpdateMetadata / StopReplica
        else:
            reply(command)              # the answer to a ControlledShutdown or AlterPartition

Every write is a ``multi`` of a `CheckOp` on ``/controller_epoch`` at the version this
controller read when it was elected (Kafka's ``epochZkVersion``), then the write itself,
conditional on the version the controller last read or wrote for that znode. So a deposed
controller cannot overwrite anything a newer controller wrote, and no controller overwrites a
partition state it has not seen. A `BadVersionError` therefore means one of two things, told
apart by reading the version of ``/controller_epoch``: another controller was elected (stop,
resign: `events.Resign`), or a znode changed underneath (stop; read the current states of
the partitions named by the writes of this list, `written_partitions`, and the topic znodes
it sets, `written_topics`; hand them to the controller as an `events.LeaderAndIsrConflict`
event, whose commands replace the rest of this list). A `NodeExistsError` from creating a
partition state is the same kind of conflict. ``tests/controller/harness.py`` (`execute`)
does exactly this. In every case the requests after the failed write are not sent: brokers
only ever hear of leader epochs that are durable in the store.

All the writes of one event come before its requests (Kafka's ``ControllerBrokerRequestBatch``
is sent after the znode writes of a state change), and within one event the writes to one
znode are chained: each expects the version the previous one produced (ZooKeeper adds exactly
one per set).

Requests name brokers by id; the executor resolves them to connections on the inter-broker
listener. Per broker the order is LeaderAndIsr, UpdateMetadata, StopReplica, as Kafka sends.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.metadata import layout
from odradek.metadata.layout import BrokerInfo
from odradek.metadata.errors import NodeExistsError, NoNodeError
from odradek.metadata.store import CheckOp, CreateOp, DeleteOp, MetadataStore, SetOp, join_path
from odradek.protocol.generated.error_codes import ErrorCode

TopicPartition = tuple[str, int]

LEADER_DURING_DELETE = -2
"""Kafka's ``LeaderAndIsr.LeaderDuringDelete``: the leader sent in UpdateMetadata for the
partitions of a topic being deleted, so clients stop using them."""

EPOCH_DURING_DELETE = -2
"""Kafka's ``LeaderAndIsr.EpochDuringDelete``: the leader epoch of a StopReplica with delete,
which a broker accepts whatever epoch it has."""


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A registered broker; ``epoch`` is its registration's epoch (Kafka uses the czxid of
    ``/brokers/ids/<id>``): requests carry it so a re-registered broker ignores old ones.
    ``info`` (endpoints, rack) is what UpdateMetadata tells the other brokers."""

    broker_id: int
    epoch: int = 0
    info: BrokerInfo | None = None


# -- znode writes -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZnodeWrite:
    """Base of the writes: ``epoch_zk_version`` guards each with the controller epoch znode.

    ``partition`` names the partition whose state the write sets (None for other znodes), so
    that an executor that meets a conflict knows which states to read back.
    """

    path: str
    epoch_zk_version: int

    def guard(self) -> CheckOp:
        return CheckOp(layout.CONTROLLER_EPOCH, self.epoch_zk_version)

    @property
    def partition(self) -> TopicPartition | None:
        return None

    def apply(self, store: MetadataStore) -> None:  # pragma: no cover - overridden
        """Perform the write as one guarded ``multi``; raises `BadVersionError` when the
        guard or the expected version fails (see the module docstring)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class CreateZnode(ZnodeWrite):
    """Create ``path`` with ``data``. With ``exists_ok`` an existing znode is fine (the
    parents ``/brokers/topics/<t>/partitions[/<p>]`` of a partition state)."""

    data: bytes = b""
    exists_ok: bool = False
    topic_partition: TopicPartition | None = None

    @property
    def partition(self) -> TopicPartition | None:
        return self.topic_partition

    def apply(self, store: MetadataStore) -> None:
        try:
            store.multi([self.guard(), CreateOp(self.path, self.data)])
        except NodeExistsError:
            if not self.exists_ok:
                raise


@dataclass(frozen=True, slots=True)
class SetZnode(ZnodeWrite):
    """Replace the data of ``path`` if it is still at ``expected_version``."""

    data: bytes = b""
    expected_version: int = -1
    topic_partition: TopicPartition | None = None

    @property
    def partition(self) -> TopicPartition | None:
        return self.topic_partition

    def apply(self, store: MetadataStore) -> None:
        store.multi([self.guard(), SetOp(self.path, self.data, self.expected_version)])


@dataclass(frozen=True, slots=True)
class SetExistingZnode(ZnodeWrite):
    """Replace the data of ``path`` whatever its version, if it still exists: for an admin
    znode the controller only tidies (``/admin/reassign_partitions``), which an operator may
    have removed meanwhile; never a conflict."""

    data: bytes = b""

    def apply(self, store: MetadataStore) -> None:
        try:
            store.multi([self.guard(), SetOp(self.path, self.data, -1)])
        except NoNodeError:
            pass


@dataclass(frozen=True, slots=True)
class DeleteZnode(ZnodeWrite):
    """Delete ``path`` (with ``recursive``, its whole subtree, deepest first, in the same
    guarded ``multi``); a znode already gone is fine.

    ``subtree``: for a recursive delete, the znodes under ``path`` the controller knows of
    (a deleted topic's partitions and their states), children before parents. `ZnodeWriter`
    then plans their deletes without reading the subtree level by level (20,000 reads for
    a topic deletion of 10,000 partitions); a multi that meets a znode not named (NotEmpty)
    or one named but gone (NoNode) fails whole, and the write is replayed by itself with
    `apply`, which reads the subtree as it is."""

    recursive: bool = False
    subtree: tuple[str, ...] = ()

    def apply(self, store: MetadataStore) -> None:
        paths = _subtree(store, self.path) if self.recursive else [self.path]
        if store.exists(self.path) is None:
            return
        try:
            store.multi([self.guard()] + [DeleteOp(p) for p in paths])
        except NoNodeError:
            pass


def written_partitions(commands: list) -> list[TopicPartition]:
    """The partitions whose state znodes ``commands`` write: what an executor reads back for
    `events.LeaderAndIsrConflict` after a write failed on its version."""
    return sorted({c.partition for c in commands if isinstance(c, ZnodeWrite) and c.partition})


def written_topics(commands: list) -> list[str]:
    """The topics whose assignment znodes ``commands`` set (ids, reassignments): their
    versions are read back for `events.LeaderAndIsrConflict` too."""
    prefix = layout.BROKER_TOPICS + "/"
    return sorted(
        {
            c.path[len(prefix):]
            for c in commands
            if isinstance(c, SetZnode) and c.path.startswith(prefix)
            and "/" not in c.path[len(prefix):]
        }
    )


def _subtree(store: MetadataStore, path: str) -> list[str]:
    """``path`` and everything under it, children before parents."""
    try:
        names = store.children(path)
    except NoNodeError:
        return []
    out: list[str] = []
    for name in names:
        out += _subtree(store, join_path(path, name))
    return out + [path]


# -- requests to brokers ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartition:
    """One partition of a LeaderAndIsr request (``LeaderAndIsrPartitionState``), whatever its
    version: what the controller sends, and what the broker decides its role on
    (``replication/role_change.py``). ``zk_version`` is the state znode's version (the wire's
    ``partition_epoch``); ``topic_id`` is None where the partition does not carry it (the
    controller's requests keep topic ids apart, in ``LeaderAndIsrRequest.topic_ids``; a
    request of v0-4 has none)."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    topic_id: uuid.UUID | None = None

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class UpdateMetadataPartition:
    """One partition of an UpdateMetadata request (``UpdateMetadataPartitionState``)."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class StopReplicaPartition:
    """One partition of a StopReplica request; ``leader_epoch`` is `EPOCH_DURING_DELETE`
    when deleting, else the controller's current leader epoch of the partition."""

    topic: str
    partition: int
    leader_epoch: int
    delete_partition: bool


@dataclass(frozen=True, slots=True)
class BrokerRequest:
    """Header fields of every controller request: to ``broker_id`` (whose registration epoch
    is ``broker_epoch``) from controller ``controller_id`` at ``controller_epoch``."""

    broker_id: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest(BrokerRequest):
    """The partitions ``broker_id`` replicates; ``live_leaders`` are the registrations of
    their leaders; ``topic_ids`` maps each topic named to its id."""

    partition_states: tuple[LeaderAndIsrPartition, ...] = ()
    live_leaders: tuple[LiveBroker, ...] = ()
    topic_ids: tuple[tuple[str, uuid.UUID], ...] = ()


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest(BrokerRequest):
    """Every live broker's registration and the partitions whose state changed."""

    partition_states: tuple[UpdateMetadataPartition, ...] = ()
    live_brokers: tuple[LiveBroker, ...] = ()
    topic_ids: tuple[tuple[str, uuid.UUID], ...] = ()


@dataclass(frozen=True, slots=True)
class StopReplicaRequest(BrokerRequest):
    """Partitions ``broker_id`` must stop replicating (and, with delete, remove)."""

    partitions: tuple[StopReplicaPartition, ...] = ()



# -- answers to brokers' requests -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to a request a broker made to the controller, sent after the writes it
    depends on succeeded."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class ControlledShutdownReply(Reply):
    """``remaining``: partitions the broker still leads (it retries until none are left);
    ``error`` an `ErrorCode` (NONE, STALE_BROKER_EPOCH, BROKER_NOT_AVAILABLE)."""

    error: ErrorCode = ErrorCode.NONE
    remaining: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    """One partition of an AlterPartition answer: the state now in force, or an error."""

    topic: str
    partition: int
    error: ErrorCode
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    zk_version: int = -1


@dataclass(frozen=True, slots=True)
class AlterPartitionReply(Reply):
    """``error`` for the whole request (NOT_CONTROLLER, STALE_BROKER_EPOCH) or NONE with a
    result per partition."""

    error: ErrorCode = ErrorCode.NONE
    partitions: tuple[AlterPartitionResult, ...] = ()


@dataclass(frozen=True, slots=True)
class ElectionOutcome:
    """One partition of an ElectLeaders answer: ``error`` (NONE when elected) and its message,
    and the leader elected (-1 when none was)."""

    topic: str
    partition: int
    error: ErrorCode
    message: str | None = None
    leader: int = -1


@dataclass(frozen=True, slots=True)
class ElectLeadersReply(Reply):
    """The outcome of an admin-requested election (`replica_election`): ``error``
    NOT_CONTROLLER (this broker is not the controller) or NONE with an outcome per partition."""

    error: ErrorCode = ErrorCode.NONE
    partitions: tuple[ElectionOutcome, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsReply(Reply):
    """``error`` for the whole request (NOT_CONTROLLER) or NONE with ``(partition, error,
    message)`` per partition asked about."""

    error: ErrorCode = ErrorCode.NONE
    results: tuple[tuple[TopicPartition, ErrorCode, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsReply(Reply):
    """``error`` for the whole request (NOT_CONTROLLER) or NONE with ``(partition, replicas,
    adding, removing)`` per partition being reassigned."""

    error: ErrorCode = ErrorCode.NONE
    reassignments: tuple[tuple[TopicPartition, tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...] = ()


Command = ZnodeWrite | BrokerRequest | Reply
