"""`ControllerWatches`, a part of `ControllerService`: the store watches that feed the
controller's event queue (Kafka's ``KafkaControllerZkWatcher``s).

A watch callback runs on the store's thread and only queues a marker (`QueuedItem` of kind
``"watch"``), once while it waits: the event thread reads the store when it takes the marker,
so changes that fire a watch several times before it is read are read once. The cluster-wide
watches are set once (`_install_watches`); a data watch per topic known to the active
controller (`_sync_topic_watches`) reports partitions added to it.

The service provides ``store``, ``controller``, ``active``, ``_queue``, ``_stopped``,
``_markers``, ``_markers_lock``, ``_watches`` and ``_topic_watches``.
"""

from __future__ import annotations

from odradek.controller.queued_item import QueuedItem
from odradek.controller.watched_events import PREFERRED_REPLICA_ELECTION, REASSIGN_PARTITIONS
from odradek.metadata import layout


class ControllerWatches:
    """The watches of `ControllerService` (a mixin: see the module docstring)."""

    def _install_watches(self) -> None:
        store = self.store
        self._watches = [
            store.watch_data(layout.CONTROLLER, lambda _: self._mark("controller")),
            store.watch_children(layout.BROKER_IDS, lambda _: self._mark("brokers")),
            store.watch_children(layout.BROKER_TOPICS, lambda _: self._mark("topics")),
            store.watch_children(layout.DELETE_TOPICS, lambda _: self._mark("delete_topics")),
            store.watch_data(PREFERRED_REPLICA_ELECTION, lambda _: self._mark("preferred")),
            store.watch_data(REASSIGN_PARTITIONS, lambda _: self._mark("reassign")),
            store.watch_children(layout.ISR_CHANGE_NOTIFICATION,
                                 lambda _: self._mark("isr_changes")),
            store.watch_children(layout.LOG_DIR_EVENT_NOTIFICATION,
                                 lambda _: self._mark("log_dir_events")),
        ]

    def _mark(self, key) -> None:
        """A watch fired: queue ``key`` unless it already waits (the reader re-reads all)."""
        if self._stopped:
            return
        with self._markers_lock:
            if key in self._markers:
                return
            self._markers.add(key)
        self._queue.put(QueuedItem("watch", key))

    def _cancel_topic_watches(self) -> None:
        for handle in self._topic_watches.values():
            handle.cancel()
        self._topic_watches = {}

    def _sync_topic_watches(self) -> None:
        """A data watch per topic known to the controller (for partitions added)."""
        # every topic the controller knows has an id (O(topics), not O(partitions))
        topics = set(self.controller.ctx.topic_ids) if self.active else set()
        for name in set(self._topic_watches) - topics:
            self._topic_watches.pop(name).cancel()
        new = sorted(topics - set(self._topic_watches))
        # pipelined (`MetadataStore.watch_data_many`): a new controller's 300 topics one
        # round trip each took seconds behind the failover's own state changes
        handles = self.store.watch_data_many(
            [(layout.topic_path(n), lambda _, n=n: self._mark(("topic", n))) for n in new])
        self._topic_watches.update(zip(new, handles))
