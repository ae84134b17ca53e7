"""`MetadataCache`: keeps a `MetadataImage` in step with the store through watches.

Watches set (all persistent; see `store`):

* children of ``/brokers/ids`` and data of each ``/brokers/ids/<id>``: the live brokers;
* children of ``/brokers/topics``; per topic, data of ``/brokers/topics/<t>``, of
  ``/config/topics/<t>`` and, unless the states come from the controller (below), of each
  ``.../partitions/<p>/state``;
* data of ``/controller``; children of ``/admin/delete_topics``.

Every watch callback re-reads what it covers and swaps in a new image (copy-on-write); a
partition-state watch hands its partition to the cache's background thread
(`BackgroundRefresher`), which re-reads all the states queued meanwhile with one
`MetadataStore.get_many` (a failover changes thousands). Each refresh reads the store and
swaps the image under one lock, so refreshes are serialised and a later refresh always read
later data: callbacks arriving late or twice are harmless. A watch is set *before* the first
read of its path, so no change falls between the two.

A cluster broker's cache takes partition states from the controller instead
(``states_from_controller``, as Kafka's brokers do; `take_controller_states`, from UpdateMetadata
and LeaderAndIsr): it reads a partition's state once, when it learns of the partition, and
sets no watch on it (see ``metadata/controller_states.py`` for the merge). A request naming
partitions whose assignments the cache has not read yet (a topic just created) has the
background thread read the topic list and those assignments at once, as a Kafka broker learns
of topics from the controller: a client told of the topic by one broker finds it on the next,
without waiting for the topic list's watch.

Writers (`ClusterMetadata`) call the same refresh methods right after their own writes, so a
broker reads its own writes even where the store reports changes asynchronously (ZooKeeper).

Listeners added with `add_listener` are called with each new image, on the thread that saw the
change and with the cache's lock held: they must not block (hand the image to your own thread
or event loop, e.g. with ``loop.call_soon_threadsafe``).
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from collections.abc import Callable, Iterable
from dataclasses import replace
from types import MappingProxyType

from odradek.metadata import layout
from odradek.metadata.background_refresher import BackgroundRefresher
from odradek.metadata.controller_states import ControllerState, with_controller_states
from odradek.metadata.errors import MalformedMetadataError, NoNodeError
from odradek.metadata.image import EMPTY_IMAGE, MetadataImage, with_entry, without_entry
from odradek.metadata.layout import BrokerInfo, PartitionState, TopicAssignment
from odradek.metadata.store import MetadataStore, WatchHandle
from odradek.metadata.znode_reads import parse_config, parse_state, parse_topic

log = logging.getLogger(__name__)


class _Unwatched:
    """The handle of a partition state known but not watched (``states_from_controller``)."""

    def cancel(self) -> None:
        pass


_UNWATCHED = _Unwatched()


class MetadataCache:
    """The watch-driven image of one store; `image` is the current `MetadataImage`.

    ``states_from_controller``: partition states are not watched but taken from the
    controller's requests (`take_controller_states`); see the module docstring."""

    def __init__(self, store: MetadataStore, *, states_from_controller: bool = False) -> None:
        self.store = store
        self.states_from_controller = states_from_controller
        # Controller states of topics not learned yet: topic name -> (topic id, partition) ->
        # the newest state, merged in when the topic is (see controller_states.py); at most one
        # per partition of each incarnation, however many requests come. Guarded by ``_lock``.
        self._early_states: dict[str, dict[tuple, ControllerState]] = {}
        self.image: MetadataImage = EMPTY_IMAGE
        self._lock = threading.RLock()
        self._listeners: list[Callable[[MetadataImage], None]] = []
        self._watches: list[WatchHandle] = []
        self._broker_watches: dict[int, WatchHandle] = {}
        self._topic_watches: dict[str, list[WatchHandle]] = {}
        self._state_watches: dict[str, dict[int, WatchHandle]] = {}
        self._closed = False
        # Inside ``batch()``, partition-state changes are collected here and published once
        # per topic at the end: a topic created with n partitions fires n state watches, and
        # applying each with a copy of the topic's state map would cost O(n^2).
        self._batch_depth = 0
        self._dirty_states: dict[str, set[int]] = {}
        # Store reads that must not run on the caller's thread: fired state watches (the
        # store's callback thread) and topics the controller named before we read them.
        self._background = BackgroundRefresher(self._refresh_fired, self._learn_topics)

    def start(self) -> None:
        """Set the top-level watches and load everything."""
        with self._lock:
            self._watches += [
                self.store.watch_children(layout.BROKER_IDS, lambda _: self.refresh_brokers()),
                self.store.watch_children(layout.BROKER_TOPICS, lambda _: self.refresh_topics()),
                self.store.watch_data(layout.CONTROLLER, lambda _: self.refresh_controller()),
                self.store.watch_children(layout.DELETE_TOPICS, lambda _: self.refresh_deletions()),
            ]
            self.refresh_brokers()
            self.refresh_topics()
            self.refresh_controller()
            self.refresh_deletions()

    def add_listener(self, listener: Callable[[MetadataImage], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def close(self) -> None:
        """Cancel every watch; the image stays readable. Idempotent."""
        with self._lock:
            self._closed = True
            handles = list(self._watches) + list(self._broker_watches.values())
            for topic_handles in self._topic_watches.values():
                handles += topic_handles
            for states in self._state_watches.values():
                handles += states.values()
            for handle in handles:
                handle.cancel()
            self._watches.clear()
            self._broker_watches.clear()
            self._topic_watches.clear()
            self._state_watches.clear()
        self._background.close()

    def _publish(self, image: MetadataImage) -> None:
        self.image = image
        for listener in self._listeners:
            try:
                listener(image)
            except Exception:
                log.exception("metadata listener failed")

    # -- cluster-wide ------------------------------------------------------------------------

    def set_cluster_id(self, cluster_id: str) -> None:
        with self._lock:
            if self.image.cluster_id != cluster_id:
                self._publish(replace(self.image, cluster_id=cluster_id))

    def refresh_controller(self) -> None:
        with self._lock:
            controller = layout.NO_LEADER
            data = self._read(layout.CONTROLLER)
            if data is not None:
                try:
                    controller = layout.decode_controller(data[0])
                except MalformedMetadataError:
                    log.warning("ignoring a malformed %s", layout.CONTROLLER)
            if controller != self.image.controller_id:
                self._publish(replace(self.image, controller_id=controller))

    def refresh_deletions(self) -> None:
        with self._lock:
            names = frozenset(self._children(layout.DELETE_TOPICS))
            if names != self.image.topics_being_deleted:
                self._publish(replace(self.image, topics_being_deleted=names))

    def _read(self, path: str) -> tuple[bytes, int] | None:
        if self._closed:
            return None
        try:
            return self.store.get(path)
        except NoNodeError:
            return None

    def _children(self, path: str) -> list[str]:
        if self._closed:
            return []
        try:
            return self.store.children(path)
        except NoNodeError:
            return []

    # -- brokers -----------------------------------------------------------------------------

    def refresh_brokers(self) -> None:
        with self._lock:
            ids = {int(n) for n in self._children(layout.BROKER_IDS) if n.isdigit()}
            for gone in set(self._broker_watches) - ids:
                self._broker_watches.pop(gone).cancel()
            for broker_id in sorted(ids - set(self._broker_watches)):
                if not self._closed:
                    self._broker_watches[broker_id] = self.store.watch_data(
                        layout.broker_path(broker_id),
                        lambda _, b=broker_id: self.refresh_broker(b),
                    )
            brokers = {}
            for broker_id in sorted(ids):
                info = self._read_broker(broker_id)
                if info is not None:
                    brokers[broker_id] = info
            if brokers != dict(self.image.brokers):
                self._publish(replace(self.image, brokers=MappingProxyType(brokers)))

    def refresh_broker(self, broker_id: int) -> None:
        with self._lock:
            info = self._read_broker(broker_id)
            if info is None:
                brokers = without_entry(self.image.brokers, broker_id)
            elif self.image.brokers.get(broker_id) != info:
                brokers = with_entry(self.image.brokers, broker_id, info)
            else:
                return
            if brokers is not self.image.brokers:
                self._publish(replace(self.image, brokers=brokers))

    def _read_broker(self, broker_id: int) -> BrokerInfo | None:
        found = self._read(layout.broker_path(broker_id))
        if found is None:
            return None
        try:
            return BrokerInfo.from_json(broker_id, found[0])
        except MalformedMetadataError:
            log.warning("ignoring the malformed registration of broker %d", broker_id)
            return None

    # -- topics ------------------------------------------------------------------------------

    def refresh_topics(self) -> None:
        """Follow the topic list: watch new topics, forget deleted ones.

        The new topics are taken together (a CreateTopics of 100 topics is one change of the
        list): the watches of their assignments and configs set at once, those znodes read
        with one `MetadataStore.get_many`, then the states of all their partitions watched
        and read at once, and one image published for them all."""
        with self._lock:
            names = set(self._children(layout.BROKER_TOPICS))
            for gone in set(self._topic_watches) - names:
                for handle in self._topic_watches.pop(gone):
                    handle.cancel()
                self._drop_topic(gone)
            new = [] if self._closed else sorted(names - set(self._topic_watches))
            if not new:
                return
            watches = []
            for name in new:
                watches += [
                    (layout.topic_path(name), lambda _, t=name: self.refresh_topic(t)),
                    (layout.topic_config_path(name), lambda _, t=name: self.refresh_topic_config(t)),
                ]
            # every watch set before any read (see the module docstring)
            handles = self.store.watch_data_many(watches)
            found = self.store.get_many([path for path, _ in watches])
            topics, configs = {}, {}
            for i, name in enumerate(new):
                self._topic_watches[name] = handles[2 * i:2 * i + 2]
                topic = parse_topic(name, found[2 * i])
                if topic is not None:  # gone meanwhile: the list's watch drops it
                    topics[name] = topic
                    configs[name] = parse_config(name, found[2 * i + 1])
            if topics:
                states = self._new_states(list(topics.values()), keep=True)
                self._publish_topics(topics, states, configs)

    def refresh_topic(self, name: str) -> None:
        """Re-read a topic's assignment and config, and the states of partitions new to us."""
        with self._lock:
            topic = parse_topic(name, self._read(layout.topic_path(name)))
            if topic is None:
                self._drop_topic(name)
                return
            old = self.image.topics.get(name)
            reborn = old is not None and old.topic_id != topic.topic_id
            if reborn:  # deleted and created again between two looks: forget the old one
                for handle in self._state_watches.pop(name, {}).values():
                    handle.cancel()
            states = self._new_states([topic], keep=not reborn)
            config = parse_config(name, self._read(layout.topic_config_path(name)))
            self._publish_topics({name: topic}, states, {name: config},
                                 forgotten_id=old.topic_id if reborn else None)

    def _publish_topics(
        self,
        topics: dict[str, TopicAssignment],
        states: dict[str, MappingProxyType],
        configs: dict[str, MappingProxyType],
        forgotten_id=None,
    ) -> None:
        """One new image with ``topics``, their partition ``states`` and ``configs`` (and
        without the topic id ``forgotten_id``, a topic created again under the same name), the
        controller's states of those topics that came before them merged in."""
        image = self.image
        early = [s for name in topics for s in self._early_states.pop(name, {}).values()]
        topic_ids = dict(image.topic_ids)
        if forgotten_id is not None:
            topic_ids.pop(forgotten_id, None)
        topic_ids.update(
            (t.topic_id, name) for name, t in topics.items() if t.topic_id != layout.ZERO_UUID
        )
        image = replace(
            image,
            topics=MappingProxyType({**image.topics, **topics}),
            topic_ids=MappingProxyType(topic_ids),
            partition_states=MappingProxyType({**image.partition_states, **states}),
            topic_configs=MappingProxyType({**image.topic_configs, **configs}),
        )
        leftover: list[ControllerState] = []  # of an assignment still newer than this one
        self._publish(with_controller_states(image, early, leftover) or image)
        self._keep_early(leftover)

    def _new_states(
        self, topics: list[TopicAssignment], keep: bool
    ) -> dict[str, MappingProxyType]:
        """Per topic, its partition states: those known ``keep``-t, and those of partitions
        not yet watched, whose watches are set and then read, all topics' at once (a topic of
        10,000 partitions, or 100 new topics of 100, is two pipelined batches, not 20,000
        round trips)."""
        out, new = {}, []
        for topic in topics:
            watched = self._state_watches.setdefault(topic.name, {})
            known = self.image.partition_states.get(topic.name, {}) if keep else {}
            out[topic.name] = {p: s for p, s in known.items() if p in topic.partitions}
            if not self._closed:
                new += [(topic.name, p) for p in topic.partitions if p not in watched]
        if new:
            paths = [layout.partition_state_path(t, p) for t, p in new]
            if self.states_from_controller:
                handles = [_UNWATCHED] * len(new)
            else:
                handles = self.store.watch_data_many([
                    (path, lambda _, t=t, p=p: self._state_fired(t, p))
                    for path, (t, p) in zip(paths, new)
                ])
            for (t, p), handle in zip(new, handles):
                self._state_watches[t][p] = handle
            for (t, p), found in zip(new, self.store.get_many(paths)):
                state = parse_state(t, p, found)
                if state is not None:
                    out[t][p] = state
        return {name: MappingProxyType(states) for name, states in out.items()}

    def take_controller_states(self, states: Iterable[ControllerState]) -> None:
        """Take the newer of the partition states a controller request carried (see
        ``metadata/controller_states.py``), publishing one image for all of them."""
        with self._lock:
            early: list[ControllerState] = []
            image = with_controller_states(self.image, states, early)
            self._keep_early(early)
            if image is not None:
                self._publish(image)
        if early:  # learn those topics now, not when the topic list's watch comes
            self._background.topics_named({s.topic for s in early})

    def _learn_topics(self, names: set[str]) -> None:
        """Read the topic list, and the assignments of ``names`` already known whose early
        states it did not take (partitions added, or the topic created again): on the
        background thread, for the controller's states of assignments not read yet."""
        with self._lock:
            if not names <= self.image.topics.keys():  # the list is read only for a topic not known
                self.refresh_topics()
            for name in sorted(names):
                if name in self._early_states and name in self.image.topics:
                    self.refresh_topic(name)

    def _keep_early(self, states: list[ControllerState]) -> None:
        """Keep ``states``, of assignments not read yet, the newest per partition and topic id."""
        for state in states:
            kept = self._early_states.setdefault(state.topic, {})
            key = (state.topic_id, state.partition)
            if key not in kept or kept[key].state.zk_version < state.state.zk_version:
                kept[key] = state

    @contextmanager
    def batch(self):
        """Collect partition-state refreshes and publish them once, when the block ends."""
        with self._lock:
            self._batch_depth += 1
            try:
                yield
            finally:
                self._batch_depth -= 1
                if self._batch_depth == 0:
                    dirty, self._dirty_states = self._dirty_states, {}
                    self._refresh_many(dirty)

    def refresh_partition_state(self, topic: str, partition: int) -> None:
        """Re-read one state now (a writer reading its own write)."""
        self._refresh_fired({topic: {partition}})

    def _state_fired(self, topic: str, partition: int) -> None:
        """A state watch fired (on the store's thread): queue the partition for the
        background thread. A store whose callbacks run in the writer's thread (embedded) is
        refreshed at once: its writers see their writes."""
        if self.store.watches_in_writer_thread:
            self._refresh_fired({topic: {partition}})
        else:
            self._background.state_fired(topic, partition)

    def _refresh_fired(self, fired: dict[str, set[int]]) -> None:
        with self._lock:
            if self._batch_depth:
                for topic, partitions in fired.items():
                    self._dirty_states.setdefault(topic, set()).update(partitions)
                return
            self._refresh_many(fired)

    def _refresh_many(self, dirty: dict[str, set[int]]) -> None:
        """Re-read the states of ``dirty`` (topic -> partitions) with one `get_many` and
        publish one new image per topic whose states changed. Call with ``_lock`` held."""
        wanted = [(t, p) for t, ps in dirty.items() if t in self.image.topics for p in sorted(ps)]
        if not wanted or self._closed:
            return
        found = self.store.get_many([layout.partition_state_path(t, p) for t, p in wanted])
        per_topic: dict[str, dict[int, PartitionState | None]] = {}
        for (topic, partition), read in zip(wanted, found):
            per_topic.setdefault(topic, {})[partition] = parse_state(topic, partition, read)
        for topic, states in per_topic.items():
            self._refresh_states(topic, states)

    def _refresh_states(self, topic: str, read: dict[int, PartitionState | None]) -> None:
        """Publish one new image with the states just ``read`` of ``topic``'s partitions."""
        if topic not in self.image.topics:
            return
        current = self.image.partition_states.get(topic, MappingProxyType({}))
        changed: dict[int, PartitionState | None] = {}
        for partition, state in read.items():
            old = current.get(partition)
            if state is None:
                if old is not None:
                    changed[partition] = None
            elif old != state or old.zk_version != state.zk_version:
                changed[partition] = state
        if not changed:
            return
        states = dict(current)
        for partition, state in changed.items():
            if state is None:
                states.pop(partition, None)
            else:
                states[partition] = state
        image = self.image
        self._publish(
            replace(
                image,
                partition_states=with_entry(image.partition_states, topic, MappingProxyType(states)),
            )
        )

    def refresh_topic_config(self, name: str) -> None:
        with self._lock:
            if name not in self.image.topics:
                return
            config = self._read_config(name)
            if dict(self.image.topic_config(name)) != dict(config):
                image = self.image
                self._publish(
                    replace(image, topic_configs=with_entry(image.topic_configs, name, config))
                )

    def _read_config(self, name: str) -> MappingProxyType:
        return parse_config(name, self._read(layout.topic_config_path(name)))

    def _drop_topic(self, name: str) -> None:
        for handle in self._state_watches.pop(name, {}).values():
            handle.cancel()
        image = self.image
        old = image.topics.get(name)
        if old is None:
            return
        self._publish(
            replace(
                image,
                topics=without_entry(image.topics, name),
                topic_ids=without_entry(image.topic_ids, old.topic_id),
                partition_states=without_entry(image.partition_states, name),
                topic_configs=without_entry(image.topic_configs, name),
            )
        )
