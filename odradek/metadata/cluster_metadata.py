"""`ClusterMetadata`: the broker's one door to cluster metadata (synchronous).

Reads come from the watch-driven `MetadataCache` (`snapshot()` returns an immutable
`MetadataImage`), so the hot paths never touch the store; writes go to the store in Kafka's
znode layout (`layout`) and then refresh the cache, so a caller reads its own writes.

Topic administration writes what Kafka's ``AdminZkClient`` writes, and nothing a controller
owns: creation the config ``/config/topics/<t>`` and the assignment ``/brokers/topics/<t>``
(version 3, with the topic id); adding partitions the grown assignment; deletion only the mark
``/admin/delete_topics/<t>``. The controller (``odradek.controller``) reacts to those znodes:
it writes the partition states (leader, ISR, epochs), tells the replicas their roles, and for a
deletion stops and deletes the replicas and then removes the topic's znodes and the mark.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping

from odradek.metadata import layout
from odradek.metadata.errors import (
    BadVersionError,
    BrokerIdInUseError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidTopicError,
    NodeExistsError,
    NoNodeError,
    TopicExistsError,
    UnknownTopicError,
)
from odradek.metadata.image import MetadataImage
from odradek.metadata.layout import BrokerInfo, PartitionState, TopicAssignment
from odradek.metadata.metadata_cache import MetadataCache
from odradek.metadata.alive_brokers import AliveBrokers
from odradek.metadata.offline_replicas import OfflineReplicas
from odradek.metadata.store import CreateOp, MetadataStore, Op, SetOp
from odradek.metadata.topic_name import collision_key, has_collision_chars, validate_topic_name
from odradek.metadata.topic_validation import validate_configs, validate_replica_assignment

log = logging.getLogger(__name__)

_CAS_RETRIES = 5
_MARKS_PER_MULTI = 1000  # deletion marks per multi: empty znodes, ~50 KB of paths


class ClusterMetadata:
    """Cluster metadata over a `MetadataStore`; see the module docstring."""

    def __init__(self, store: MetadataStore, *, clock: Callable[[], float] = time.time,
                 states_from_controller: bool = False) -> None:
        self.store = store
        self._clock = clock
        self._registered: BrokerInfo | None = None
        # Kafka's broker epoch: the creation id (czxid) of our registration znode; a new
        # registration (a new session) gets a greater one. -1 while not registered.
        self.broker_epoch = -1
        # Serialises registering (at start, and again on each new session, from the store's
        # thread), so the epoch kept is that of the registration made last.
        self._registration_lock = threading.Lock()
        self._closed = False
        # How broker configs are stored: ``to_persistent(dict) -> dict`` before a write,
        # ``from_persistent(dict) -> dict`` after a read (server/dynamic_broker_config.py's
        # DynamicPasswords encodes passwords on ZooKeeper); None: as they are.
        self.broker_config_codec = None
        self.ensure_paths()
        self.cache = MetadataCache(store, states_from_controller=states_from_controller)
        self.cache.start()
        self.offline_replicas = OfflineReplicas()
        """What the controller's UpdateMetadata says is offline (failed log directories
        included, which the store does not hold)."""
        self.alive_brokers = AliveBrokers()
        """The brokers the controller's UpdateMetadata lists: what clients are told of."""
        store.add_session_listener(self._on_new_session)

    def ensure_paths(self) -> None:
        """Create Kafka's persistent top-level znodes that are missing (retried by the store
        across a lost ZooKeeper session, so a broker starting meanwhile goes on)."""
        for path in layout.PERSISTENT_PATHS:
            if self.store.exists(path) is None:
                self.store.ensure_path(path)

    def close(self) -> None:
        """Stop following the store (the store itself stays open)."""
        self._closed = True
        self.cache.close()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- reads (from the cache) --------------------------------------------------------------

    def snapshot(self) -> MetadataImage:
        return self.cache.image

    def add_listener(self, listener: Callable[[MetadataImage], None]) -> None:
        """Call ``listener(image)`` after each change; see `MetadataCache` for the rules."""
        self.cache.add_listener(listener)

    def brokers(self) -> list[BrokerInfo]:
        image = self.cache.image
        return [image.brokers[b] for b in sorted(image.brokers)]

    def topics(self) -> dict[str, TopicAssignment]:
        return dict(self.cache.image.topics)

    def topic(self, name: str) -> TopicAssignment | None:
        return self.cache.image.topic(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicAssignment | None:
        return self.cache.image.topic_by_id(topic_id)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.cache.image.partition_state(topic, partition)

    def controller_id(self) -> int:
        return self.cache.image.controller_id

    # -- cluster id and brokers --------------------------------------------------------------

    def cluster_id(self) -> str:
        """The cluster's id, generated and stored at ``/cluster/id`` by the first broker."""
        known = self.cache.image.cluster_id
        if known is not None:
            return known
        try:
            data = self.store.get(layout.CLUSTER_ID)[0]
        except NoNodeError:
            fresh = layout.uuid_to_kafka(layout.new_kafka_uuid())
            # Kept only if no broker stored one first; read back either way, so the id is the
            # stored one even when a retried create found its own earlier attempt.
            self.store.ensure_path(layout.CLUSTER_ID, layout.encode_cluster_id(fresh))
            data = self.store.get(layout.CLUSTER_ID)[0]
        cluster_id = layout.decode_cluster_id(data)
        self.cache.set_cluster_id(cluster_id)
        return cluster_id

    def register_broker(self, info: BrokerInfo) -> None:
        """Register this broker (ephemeral, so it vanishes with the session), as Kafka's
        ``KafkaZkClient.registerBroker``: a checked create, retried by the store across a lost
        session, so a broker whose session is replaced while it starts still registers; the
        broker epoch is the creation id of the znode that create settled on.

        Raises BrokerIdInUseError if another session holds the id (a registration this
        session already holds is kept), StoreUnavailableError if ZooKeeper does not come back.
        Re-registered automatically when the store opens a new session.
        """
        with self._registration_lock:
            # Set first: a new session opened during the create registers again (it waits for
            # the lock, and its checked create then finds the znode ours, or makes it).
            previous, self._registered = self._registered, info
            try:
                self._create_registration(info)
            except NodeExistsError:
                self._registered = previous
                raise BrokerIdInUseError(
                    f"broker id {info.broker_id} is registered by a live broker"
                ) from None
            except BaseException:
                self._registered = previous
                raise
        self.cache.refresh_brokers()

    def _create_registration(self, info: BrokerInfo) -> None:
        """The checked create of ``info``'s znode; the broker epoch is its creation id."""
        self.broker_epoch = self.store.create_checked_ephemeral(
            layout.broker_path(info.broker_id), info.to_json(self._now_ms())
        )

    def update_broker(self, info: BrokerInfo) -> None:
        """Rewrite this broker's registration in place (its endpoints changed at run time), as
        Kafka's ``KafkaZkClient.updateBrokerInfo``: the node stays, so nobody sees the broker
        leave."""
        self.store.set(layout.broker_path(info.broker_id), info.to_json(self._now_ms()))
        self._registered = info
        self.cache.refresh_brokers()

    def unregister_broker(self, broker_id: int) -> None:
        with self._registration_lock:
            if self._registered is not None and self._registered.broker_id == broker_id:
                self._registered = None
        try:
            self.store.delete(layout.broker_path(broker_id))
        except NoNodeError:
            pass
        self.cache.refresh_brokers()

    def _on_new_session(self) -> None:
        """Register again in the store's new session (Kafka re-registers on session
        initialisation). Runs on the store's thread; a failure is logged by the store."""
        with self._registration_lock:
            info = self._registered
            if info is None or self._closed:
                return
            try:
                self._create_registration(info)
            except NodeExistsError:
                log.error("broker id %d was taken by another broker while this one's ZooKeeper "
                          "session was lost: not registered", info.broker_id)
                return
        self.cache.refresh_brokers()

    # -- controller --------------------------------------------------------------------------

    def controller_epoch(self) -> tuple[int, int]:
        """``(epoch, zk_version)`` of ``/controller_epoch``; ``(0, -1)`` before any election."""
        try:
            data, version = self.store.get(layout.CONTROLLER_EPOCH)
        except NoNodeError:
            return 0, -1
        return layout.decode_controller_epoch(data), version

    def try_become_controller(self, broker_id: int) -> int | None:
        """Claim ``/controller`` (ephemeral) and bump the controller epoch in one `multi`.

        Returns the new epoch, or None if another broker is controller.
        """
        for _ in range(_CAS_RETRIES):
            epoch, version = self.controller_epoch()
            if version < 0:
                try:
                    self.store.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(0))
                except NodeExistsError:
                    pass
                continue
            claim = layout.encode_controller(broker_id, self._now_ms())
            bump = layout.encode_controller_epoch(epoch + 1)
            try:
                self.store.multi(
                    [
                        CreateOp(layout.CONTROLLER, claim, ephemeral=True),
                        SetOp(layout.CONTROLLER_EPOCH, bump, version),
                    ]
                )
            except NodeExistsError:
                self.cache.refresh_controller()
                return None
            except BadVersionError:
                continue
            self.cache.refresh_controller()
            return epoch + 1
        return None

    def resign_controller(self, broker_id: int) -> None:
        """Delete ``/controller`` if it names ``broker_id``."""
        try:
            data, version = self.store.get(layout.CONTROLLER)
            if layout.decode_controller(data) == broker_id:
                self.store.delete(layout.CONTROLLER, version)
        except (NoNodeError, BadVersionError):
            pass
        self.cache.refresh_controller()

    # -- topics ------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        assignment: Mapping[int, list[int] | tuple[int, ...]],
        configs: Mapping[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> TopicAssignment:
        """Create a topic with a complete replica assignment: its config and assignment
        znodes, in one ``multi`` (the controller gives its partitions their states).

        Raises InvalidTopicError (bad name, or a '.'/'_' collision with an existing topic),
        TopicExistsError (the name, or ``topic_id``, is taken, or the topic is being deleted),
        InvalidReplicaAssignmentError, InvalidPartitionsError, InvalidConfigError.
        """
        validate_topic_name(name)
        replicas = validate_replica_assignment(assignment)
        config = validate_configs(configs)
        topic = TopicAssignment(name, self._check_new_topic(name, topic_id), replicas)
        config_path = layout.topic_config_path(name)
        config_op: Op = (
            CreateOp(config_path, layout.encode_config(config))
            if self.store.exists(config_path) is None
            else SetOp(config_path, layout.encode_config(config))
        )
        try:
            self.store.multi([config_op, CreateOp(layout.topic_path(name), topic.to_json())])
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{name}' already exists.") from None
        self.cache.refresh_topics()
        self.cache.refresh_topic(name)
        return self.cache.image.topic(name) or topic

    def _check_new_topic(self, name: str, topic_id: uuid.UUID | None) -> uuid.UUID:
        """Refuse a taken, doomed or colliding name, or a taken id; return the id to use."""
        existing = self.store.children(layout.BROKER_TOPICS)
        if name in existing:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        if self.store.exists(layout.delete_topic_path(name)) is not None:
            raise TopicExistsError(f"Topic '{name}' is marked for deletion.")
        if has_collision_chars(name):
            clash = [t for t in existing if collision_key(t) == collision_key(name)]
            if clash:
                raise InvalidTopicError(
                    f"Topic '{name}' collides with existing topics: {', '.join(clash)}"
                )
        if topic_id is None:
            return layout.new_kafka_uuid()
        if topic_id == layout.ZERO_UUID or self.cache.image.topic_by_id(topic_id) is not None:
            raise TopicExistsError(f"topic id {layout.uuid_to_kafka(topic_id)} is not available")
        return topic_id

    def add_partitions(
        self, name: str, new: Mapping[int, list[int] | tuple[int, ...]]
    ) -> TopicAssignment:
        """Add partitions (numbered on from the current count) with the topic's replication
        factor: the assignment grows, compare-and-set (the controller gives the new partitions
        their states). Raises UnknownTopicError, InvalidPartitionsError, InvalidReplicaAssignmentError.
        """
        for _ in range(_CAS_RETRIES):
            try:
                data, version = self.store.get(layout.topic_path(name))
            except NoNodeError:
                raise UnknownTopicError(f"Topic '{name}' does not exist.") from None
            current = TopicAssignment.from_json(name, data, version)
            if not new:
                raise InvalidPartitionsError("no partitions to add")
            added = validate_replica_assignment(new, first_partition=len(current.partitions))
            rf = current.replication_factor
            odd = {p: len(r) for p, r in added.items() if len(r) != rf}
            if odd:
                raise InvalidReplicaAssignmentError(
                    f"Inconsistent replication factor between partitions, partition 0 has {rf} "
                    f"while partitions {sorted(odd)} have replication factors "
                    f"{sorted(set(odd.values()))}"
                )
            updated = TopicAssignment(
                name,
                current.topic_id,
                {**current.partitions, **added},
                current.adding_replicas,
                current.removing_replicas,
            )
            try:
                self.store.set(layout.topic_path(name), updated.to_json(), version)
            except BadVersionError:
                continue  # the assignment changed under us: look again
            self.cache.refresh_topic(name)
            return self.cache.image.topic(name) or updated
        raise InvalidPartitionsError(f"topic '{name}' kept changing while adding partitions")

    def delete_topic(self, name: str) -> None:
        """Mark a topic for deletion (``/admin/delete_topics/<t>``; marking twice is harmless).
        The controller does the rest; until it has, the topic stays in the image, listed in
        ``topics_being_deleted``. Raises UnknownTopicError."""
        if self.store.exists(layout.topic_path(name)) is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        try:
            self.store.create(layout.delete_topic_path(name), make_parents=True)
        except NodeExistsError:
            pass
        self.cache.refresh_deletions()

    def delete_topics(self, names: list[str]) -> list[str]:
        """`delete_topic` for many topics together (a DeleteTopics of 100 topics): the
        topics' and their marks' znodes read with one `MetadataStore.get_many`, the missing
        marks created in multis of at most `_MARKS_PER_MULTI`, one refresh. Returns the names
        with no topic (not marked). A multi refused because a mark appeared meanwhile is
        done again one topic at a time (`delete_topic`)."""
        names = list(dict.fromkeys(names))
        found = self.store.get_many(
            [layout.topic_path(n) for n in names] + [layout.delete_topic_path(n) for n in names]
        )
        topics, marks = found[:len(names)], found[len(names):]
        unknown = [n for n, topic in zip(names, topics) if topic is None]
        wanted = [n for n, topic, mark in zip(names, topics, marks) if topic and mark is None]
        if wanted:
            self.store.ensure_path(layout.DELETE_TOPICS)
        for start in range(0, len(wanted), _MARKS_PER_MULTI):
            chunk = wanted[start:start + _MARKS_PER_MULTI]
            try:
                self.store.multi([CreateOp(layout.delete_topic_path(n)) for n in chunk])
            except (NodeExistsError, NoNodeError):
                for name in chunk:
                    try:
                        self.delete_topic(name)
                    except UnknownTopicError:
                        unknown.append(name)
        self.cache.refresh_deletions()
        return unknown

    def set_partition_state(
        self, topic: str, partition: int, state: PartitionState, expected_version: int
    ) -> PartitionState:
        """Write a partition's state if its znode is at ``expected_version`` (-1: any, and
        create it if missing). Returns the state with its new ``zk_version``.

        Raises BadVersionError when someone else wrote it first, UnknownTopicError.
        """
        path = layout.partition_state_path(topic, partition)
        try:
            version = self.store.set(path, state.to_json(), expected_version)
        except NoNodeError:
            if expected_version != -1:
                raise BadVersionError(
                    f"{path} does not exist (expected version {expected_version})"
                ) from None
            if self.store.exists(layout.topic_path(topic)) is None:
                raise UnknownTopicError(f"Topic '{topic}' does not exist.") from None
            self.store.create(path, state.to_json(), make_parents=True)
            version = 0
        self.cache.refresh_partition_state(topic, partition)
        return PartitionState(
            state.leader, state.leader_epoch, state.isr, state.controller_epoch, version
        )

    # -- configs -----------------------------------------------------------------------------

    def topic_config(self, name: str) -> dict[str, str]:
        image = self.cache.image
        if name in image.topics:
            return dict(image.topic_config(name))
        return self._read_config(layout.topic_config_path(name))

    def set_topic_config(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace a topic's config overrides. Raises UnknownTopicError, InvalidConfigError."""
        config = validate_configs(configs)
        if self.store.exists(layout.topic_path(name)) is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        self._write_config(layout.topic_config_path(name), config)
        self.cache.refresh_topic_config(name)

    def broker_config(self, broker_id: int | None) -> dict[str, str]:
        """A broker's dynamic config overrides; None means the cluster-wide ``<default>``
        (decoded by ``broker_config_codec``)."""
        stored = self._read_config(layout.broker_config_path(broker_id))
        return stored if self.broker_config_codec is None else self.broker_config_codec.from_persistent(stored)

    def set_broker_config(self, broker_id: int | None, configs: Mapping[str, str]) -> None:
        config = validate_configs(configs)
        if self.broker_config_codec is not None:
            config = self.broker_config_codec.to_persistent(config)
        self._write_config(layout.broker_config_path(broker_id), config)

    def _read_config(self, path: str) -> dict[str, str]:
        try:
            return layout.decode_config(self.store.get(path)[0], path)
        except NoNodeError:
            return {}

    def _write_config(self, path: str, config: dict[str, str]) -> None:
        data = layout.encode_config(config)
        try:
            self.store.set(path, data)
        except NoNodeError:
            try:
                self.store.create(path, data, make_parents=True)
            except NodeExistsError:
                self.store.set(path, data)
