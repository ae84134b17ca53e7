"""Topic administration on the broker: create, delete, add partitions, configure.

Requests are checked the way Kafka checks them (names, partition counts, replication factors,
explicit assignments, configs), replica assignments come from Kafka's algorithm
(``AdminUtils.assignReplicasToBrokers``, in ``controller.assignment``), and the result is
written to the metadata store as Kafka's ``AdminZkClient`` writes them (config and
assignment; a deletion only marks the topic, see ``ClusterMetadata``). The controller does the
rest (leaders, roles, deleting replicas); the request then waits for it
(``delayed_topic_operations``), bounded by its timeout: REQUEST_TIMED_OUT after that, the
change itself standing, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import contextmanager
from dataclasses import dataclass

from odradek.controller.assignment import assign_new_partitions, assign_replicas_to_brokers
from odradek.metadata import errors as merr
from odradek.metadata.topic_batch import create_topics
from odradek.metadata.topic_name import validate_topic_name
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server import message_format_version
from odradek.server.delayed_topic_operations import await_deletion, await_leaders
from odradek.server.replication_quota_manager import FOLLOWER_REPLICAS, LEADER_REPLICAS, check_throttled_replicas
from odradek.server.topic_error import TopicError
from odradek.storage.config import TOPIC_CONFIG_NAMES, LogConfig
from odradek.storage.errors import InvalidConfigError

log = logging.getLogger("odradek.topics")

# How long a creation by Metadata (auto-creation) or FindCoordinator waits for the leaders:
# well within a client's request.timeout.ms (30 s by default); a client not answered by then
# is told LEADER_NOT_AVAILABLE (COORDINATOR_NOT_AVAILABLE) and asks again, as Kafka tells it
# at once.
AUTO_CREATE_WAIT_MS = 10_000


@dataclass(frozen=True)
class TopicPlan:
    """A checked topic creation: what would be (or was) written."""

    name: str
    assignment: dict[int, list[int]]
    configs: dict[str, str]
    topic_id: object = None


class TopicManager:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.metadata = broker.metadata
        # Auto-creations under way, by topic name (creation awaits a metadata write).
        self._auto_creating: dict[str, asyncio.Future] = {}

    # --- create ---------------------------------------------------------------------------
    def plan_topic(self, name: str, num_partitions: int, replication_factor: int,
                   assignments: dict[int, list[int]] | None, configs: dict[str, str]) -> TopicPlan:
        """Check a creation request; raise TopicError with Kafka's error code if it is bad."""
        with _metadata_errors():
            validate_topic_name(name)
        if self.broker.metadata_image().topic(name) is not None:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        self.log_config_for(configs)  # validates
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 "both numPartitions/replicationFactor and replicasAssignments were set")
            return TopicPlan(name, self._check_assignment(assignments), configs)
        n = self.broker.config["num.partitions"] if num_partitions == -1 else num_partitions
        rf = self.broker.config["default.replication.factor"] if replication_factor == -1 else replication_factor
        if n <= 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        _check_partition_count(n)
        if rf <= 0:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        racks = self._broker_racks()
        if rf > len(racks):
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Replication factor: {rf} larger than available brokers: {len(racks)}.")
        with _metadata_errors():
            assignment = assign_replicas_to_brokers(racks, n, rf)
        return TopicPlan(name, {p: list(r) for p, r in assignment.items()}, configs)

    def _broker_racks(self) -> dict[int, str | None]:
        alive = self.broker.metadata.alive_brokers.of(self.broker.metadata_image().brokers)
        return {b.broker_id: b.rack for b in alive.values()}

    def _check_assignment(self, assignments: dict[int, list[int]]) -> dict[int, list[int]]:
        _check_partition_count(len(assignments))
        live = set(self.broker.metadata.alive_brokers.of(self.broker.metadata_image().brokers))
        if sorted(assignments) != list(range(len(assignments))):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1")
        sizes = {len(r) for r in assignments.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "all partitions need the same replica count")
        for p, replicas in assignments.items():
            if len(set(replicas)) != len(replicas):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {p} repeats a broker")
            unknown = [b for b in replicas if b not in live]
            if unknown:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"unknown broker(s) {unknown} for partition {p}")
        return {p: list(r) for p, r in assignments.items()}

    async def create(self, plan: TopicPlan, timeout_ms: int = AUTO_CREATE_WAIT_MS):
        """Write the topic (off the event loop: metadata writes fsync), then wait up to
        ``timeout_ms`` (not at all when not positive, as Kafka) for its leaders; TopicError
        REQUEST_TIMED_OUT when they are not there by then (the topic exists all the same).

        The write is shielded: a request cancelled half-way (its client went away) must not
        leave the creation half done.
        """
        task = asyncio.ensure_future(self._create(plan))
        self.broker.track(task)  # stop() still finishes (cancels) it
        created = await asyncio.shield(task)
        await self.await_leaders(plan.name, plan.assignment, timeout_ms)
        return created

    async def _create(self, plan: TopicPlan):
        with _metadata_errors():
            created = await _off_loop(self.metadata.create_topic, plan.name, plan.assignment, plan.configs)
        log.info("created topic %s with %d partitions", plan.name, len(plan.assignment))
        return created

    async def create_many(self, plans: list[TopicPlan]) -> list:
        """Write the topics of one CreateTopics together (``metadata.topic_batch``: a few
        store round trips for them all, not a few per topic), off the event loop and shielded
        as ``create``; not waiting for leaders. Returns, in order, each topic's created
        assignment or the TopicError that refused it (KAFKA_STORAGE_ERROR for them all when
        the store failed)."""
        task = asyncio.ensure_future(_off_loop(create_topics, self.metadata,
                                               [(p.name, p.assignment, p.configs) for p in plans]))
        self.broker.track(task)
        try:
            with _metadata_errors():
                outcomes = await asyncio.shield(task)
        except TopicError as e:
            return [e] * len(plans)
        results = []
        for plan, outcome in zip(plans, outcomes):
            if isinstance(outcome, merr.MetadataError):
                try:
                    with _metadata_errors():
                        raise outcome
                except TopicError as e:
                    outcome = e
            else:
                log.info("created topic %s with %d partitions", plan.name, len(plan.assignment))
            results.append(outcome)
        return results

    async def await_leaders(self, name: str, partitions, timeout_ms: int) -> None:
        """Wait up to ``timeout_ms`` (not at all when not positive) until ``partitions`` of
        ``name`` have leaders (``delayed_topic_operations.await_leaders``); TopicError
        REQUEST_TIMED_OUT otherwise."""
        if timeout_ms <= 0:
            return
        if not await await_leaders(self.broker, name, partitions, timeout_ms):
            raise TopicError(ErrorCode.REQUEST_TIMED_OUT,
                             f"Topic {name}: not every partition had a leader after {timeout_ms} ms.")

    async def auto_create(self, name: str):
        """Create a topic with the broker defaults (Metadata with auto-creation allowed),
        waiting up to ``AUTO_CREATE_WAIT_MS`` for its leaders.

        Requests that ask for the same new topic while it is being created wait for that one
        creation: a second creation would fail with TOPIC_ALREADY_EXISTS before the topic is
        in the metadata image, and its request would be answered as if the topic did not exist.
        """
        pending = self._auto_creating.get(name)
        if pending is None:
            plan = self.plan_topic(name, -1, -1, None, {})
            pending = asyncio.ensure_future(self.create(plan, AUTO_CREATE_WAIT_MS))
            self._auto_creating[name] = pending
            pending.add_done_callback(lambda _: self._auto_creating.pop(name, None))
        return await asyncio.shield(pending)

    # --- configs ----------------------------------------------------------------------------
    def log_config_for(self, overrides: dict[str, str]) -> LogConfig:
        unknown = [k for k in overrides if k not in TOPIC_CONFIG_NAMES and k not in EXTRA_TOPIC_CONFIGS]
        if unknown:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {unknown[0]}")
        if "min.insync.replicas" in overrides:
            _min_insync_replicas(overrides["min.insync.replicas"])
        if message_format_version.TOPIC_KEY in overrides:
            message_format_version.check(overrides[message_format_version.TOPIC_KEY])
        for name in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
            if name in overrides:
                try:
                    check_throttled_replicas(name, overrides[name])
                except ValueError as e:
                    raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from None
        try:
            return LogConfig.from_properties(overrides, base=self.broker.log_defaults())
        except (InvalidConfigError, ValueError) as e:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from None

    def topic_log_config(self, name: str) -> LogConfig:
        return self.log_config_for(self.metadata.topic_config(name))

    def min_insync_replicas(self, name: str) -> int:
        """The topic's ``min.insync.replicas``: its override, else the broker's (dynamic
        config, then server.properties). Cheap enough for every acks=all produce: the override
        comes from the in-memory image, the broker's value is cached."""
        value = self.broker.metadata_image().topic_config(name).get("min.insync.replicas")
        try:
            return self.broker.default_min_insync_replicas() if value is None else _min_insync_replicas(value)
        except TopicError:  # written to the store by another tool, unchecked: the broker's value
            return self.broker.default_min_insync_replicas()

    def set_topic_config(self, name: str, configs: dict[str, str]) -> None:
        self.log_config_for(configs)
        with _metadata_errors():
            self.metadata.set_topic_config(name, configs)
        self.broker.replica_manager.update_config(name, self.topic_log_config(name))
        self.broker.config_changes.notify("topics/" + name)

    # --- delete and grow ------------------------------------------------------------------
    async def mark_deleted(self, name: str):
        """Mark a topic for deletion (``ClusterMetadata.delete_topic``, the commit point: a
        failed mark deleted nothing); return its id.

        A topic marked deleted serves no data again: the controller stops and deletes its
        replicas (StopReplica) and only then removes its znodes; a mark a crash left behind
        is finished by the next controller, and every broker removes the logs of a marked
        topic at start-up (``finish_deletions``), before it leads anything; a log that could
        not be renamed or checkpointed is dealt with by ``LogManager.delete_logs``' rules.
        """
        assignment = self.broker.metadata_image().topic(name)
        if assignment is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        if not self.broker.config["delete.topic.enable"]:
            raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED)
        with _metadata_errors():
            await _off_loop(self.metadata.delete_topic, name)
        return assignment.topic_id

    async def mark_deleted_many(self, names: list[str]) -> dict:
        """`mark_deleted` for the topics of one DeleteTopics together
        (``ClusterMetadata.delete_topics``: a few store round trips for them all, not three
        per topic); name -> its topic id, or the TopicError that refused it."""
        image, out = self.broker.metadata_image(), {}
        for name in names:
            assignment = image.topic(name)
            if assignment is None:
                out[name] = TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
            elif not self.broker.config["delete.topic.enable"]:
                out[name] = TopicError(ErrorCode.TOPIC_DELETION_DISABLED)
            else:
                out[name] = assignment.topic_id
        wanted = [n for n, v in out.items() if not isinstance(v, TopicError)]
        if wanted:
            try:
                with _metadata_errors():
                    unknown = await _off_loop(self.metadata.delete_topics, wanted)
            except TopicError as e:
                return {**out, **{n: e for n in wanted}}
            for name in unknown:
                out[name] = TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        return out

    async def await_deleted(self, name: str, topic_id, timeout_ms: int) -> None:
        """Wait up to ``timeout_ms`` (not at all when not positive) until the controller has
        deleted the marked topic (TopicError REQUEST_TIMED_OUT otherwise); then its groups'
        committed offsets go."""
        if timeout_ms > 0 and not await await_deletion(self.broker, name, topic_id, timeout_ms):
            raise TopicError(ErrorCode.REQUEST_TIMED_OUT, f"Topic {name} was not deleted after {timeout_ms} ms.")
        if self.broker.group_coordinator is not None:
            self.broker.group_coordinator.on_topics_deleted({name})
        log.info("deleted topic %s", name)

    def finish_deletions(self) -> None:
        """At start-up, before any partition is led: remove every log of a topic the
        metadata no longer has, or has marked deleted (its deletion was cut short: the
        controller finishes it), or of another topic of that name."""
        image = self.broker.metadata_image()

        def is_live(topic: str, topic_id) -> bool:
            assignment = image.topic(topic)
            return (assignment is not None and topic not in image.topics_being_deleted
                    and (topic_id is None or topic_id == assignment.topic_id))

        self.broker.log_manager.delete_stray_logs(is_live)

    async def add_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                             validate_only: bool, timeout_ms: int) -> None:
        """Grow a topic's assignment, then wait up to ``timeout_ms`` for the new partitions'
        leaders (as ``create``)."""
        current = self.broker.metadata_image().topic(name)
        if current is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        have = len(current.partitions)
        if count <= have:
            code = ErrorCode.INVALID_PARTITIONS
            raise TopicError(code, f"Topic currently has {have} partitions, {count} would not be an increase.")
        _check_partition_count(count)
        if assignments:
            if len(assignments) != count - have:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {count - have} but {len(assignments)} assignments provided.")
            new = self._check_assignment({i: list(r) for i, r in enumerate(assignments)})
            new = {have + i: r for i, r in new.items()}
        else:
            with _metadata_errors():
                grown = assign_new_partitions(self._broker_racks(), current.partitions, count)
            new = {p: list(r) for p, r in grown.items()}
        if validate_only:
            return
        with _metadata_errors():
            await _off_loop(self.metadata.add_partitions, name, new)
        await self.await_leaders(name, list(new), timeout_ms)


# A topic's assignment lives in one znode, and ZooKeeper (and the embedded store, which keeps
# its semantics) refuses znodes over 1 MiB: at about 20 bytes per partition
# ("12345":[1001,1002,1003],) that is near 50,000 partitions. Refusing more up front gives a
# clear error instead of a failed write after minutes of assignment work.
MAX_PARTITIONS_PER_TOPIC = 50_000


def _check_partition_count(n: int) -> None:
    if n > MAX_PARTITIONS_PER_TOPIC:
        raise TopicError(ErrorCode.INVALID_PARTITIONS,
                         f"{n} partitions exceed the {MAX_PARTITIONS_PER_TOPIC} one topic's metadata can hold")


async def _off_loop(fn, *args):
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


_ERRORS = [
    (merr.TopicExistsError, ErrorCode.TOPIC_ALREADY_EXISTS),
    (merr.InvalidTopicError, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (merr.UnknownTopicError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (merr.InvalidPartitionsError, ErrorCode.INVALID_PARTITIONS),
    (merr.InvalidReplicationFactorError, ErrorCode.INVALID_REPLICATION_FACTOR),
    (merr.InvalidReplicaAssignmentError, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (merr.InvalidConfigError, ErrorCode.INVALID_CONFIG),
]


def _min_insync_replicas(value: str) -> int:
    """Parse a topic's ``min.insync.replicas`` (an int of at least 1, as Kafka requires)."""
    try:
        parsed = int(value)
    except (TypeError, ValueError):
        parsed = 0
    if parsed < 1:
        raise TopicError(ErrorCode.INVALID_CONFIG,
                         f"Invalid value {value} for configuration min.insync.replicas: Value must be at least 1")
    return parsed


@contextmanager
def _metadata_errors():
    """Translate the metadata layer's errors into Kafka error codes at this boundary; a
    write the embedded store's disk refused (its journal then holds nothing of it) is
    KAFKA_STORAGE_ERROR."""
    try:
        yield
    except OSError as e:
        raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"metadata write failed: {e}") from None
    except merr.MetadataError as e:
        for kind, code in _ERRORS:
            if isinstance(e, kind):
                raise TopicError(code, str(e)) from None
        raise


# Topic configs Kafka defines that odradek accepts and reports but that do not change how the
# log behaves (replication and message-format settings handled elsewhere or not applicable).
EXTRA_TOPIC_CONFIGS = {
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "preallocate": "false",
    "message.downconversion.enable": "true",
    message_format_version.TOPIC_KEY: message_format_version.DEFAULT,
    "follower.replication.throttled.replicas": "",
    "leader.replication.throttled.replicas": "",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
    "remote.storage.enable": "false",
}
