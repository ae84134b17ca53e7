"""Dynamic config changes reaching every broker: Kafka's ``/config/changes`` notifications.

A broker that stores a topic's or a broker's dynamic configs (AlterConfigs) then creates a
sequential znode ``/config/changes/config_change_<n>`` holding
``{"version":2,"entity_path":"topics/<t>"}`` (or ``brokers/<id>``, ``brokers/<default>``, and
for client quotas ``users/<u>``, ``users/<u>/clients/<c>``, ``clients/<c>``),
as Kafka's ``AdminZkClient.changeConfigs`` does. Every broker watches the children of
``/config/changes`` and, for each notification newer than the last it processed, re-reads the
entity's configs from the store and applies them (``ConfigChangeListener``): a topic's to its
partitions' logs, a broker's (its own id or ``<default>``) to the broker's effective config.
So a change made through any broker applies on all of them, as in Kafka. Applying is
idempotent: the broker that made the change applies it at once and again on its own
notification.

Notifications older than the newest `KEEP_NOTIFICATIONS` are deleted by the broker that
writes a new one (Kafka deletes them by age, 15 minutes; the store keeps no creation time).
At start a broker applies once each entity that the notifications already there name (it
has just read every config, but a change may have been written meanwhile), then follows.
"""

from __future__ import annotations

import json
import logging

from odradek.metadata import layout
from odradek.metadata.errors import MetadataError, NoNodeError
from odradek.server import client_quota_configs

log = logging.getLogger("odradek.config")

KEEP_NOTIFICATIONS = 100
_NAME = layout.CONFIG_CHANGE_PREFIX.rsplit("/", 1)[1]


def sequence_of(name: str) -> int | None:
    """The sequence number of a notification's znode name, or None for another name."""
    if not name.startswith(_NAME) or not name[len(_NAME):].isdigit():
        return None
    return int(name[len(_NAME):])


def entity_of(data: bytes) -> tuple[str, str] | None:
    """``(kind, name)`` of a notification (``("topics", "t")``, ``("brokers", "1")``), or None
    for a malformed one."""
    try:
        path = json.loads(data)["entity_path"]
        kind, _, name = path.partition("/")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return (kind, name) if kind in ("topics", "brokers", "users", "clients") and name else None


class ConfigChangeListener:
    """Watches ``/config/changes`` for ``broker`` and applies what the notifications name."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.store = broker.metadata.store
        self.last_seen = -1
        self._watch = None

    def start(self) -> None:
        """Follow new notifications, and apply the entities that those already there name
        once each, as Kafka's listener does at start: one written while this broker was
        reading its configs would otherwise be missed until its entity changes again."""
        loop = self.broker.loop
        self._watch = self.store.watch_children(
            layout.CONFIG_CHANGES, lambda _: loop.call_soon_threadsafe(self.process))
        self.process()

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()

    def notify(self, entity_path: str) -> None:
        """Announce a change of ``entity_path`` (``topics/<t>``, ``brokers/<id>``) to every
        broker, and delete old notifications. Runs off the event loop (a store write)."""
        self.store.create(layout.CONFIG_CHANGE_PREFIX, layout.encode_config_change(entity_path),
                          sequential=True, make_parents=True)
        names = self._pending_names(every=True)
        for _, name in names[:-KEEP_NOTIFICATIONS]:
            try:
                self.store.delete(f"{layout.CONFIG_CHANGES}/{name}")
            except (NoNodeError, MetadataError):
                pass

    def _pending_names(self, every: bool = False) -> list[tuple[int, str]]:
        try:
            children = self.store.children(layout.CONFIG_CHANGES)
        except NoNodeError:
            return []
        found = sorted((seq, name) for name in children if (seq := sequence_of(name)) is not None)
        return found if every else [(s, n) for s, n in found if s > self.last_seen]

    def process(self) -> None:
        """Apply every notification newer than the last processed (on the event loop)."""
        if self.broker.stopping:
            return
        applied: set[tuple[str, str]] = set()  # applying re-reads the entity: once is enough
        for seq, name in self._pending_names():
            self.last_seen = seq
            try:
                data, _ = self.store.get(f"{layout.CONFIG_CHANGES}/{name}")
            except NoNodeError:
                continue  # deleted meanwhile: too old to matter
            entity = entity_of(data)
            if entity is None:
                log.warning("ignoring the malformed config change notification %s", name)
                continue
            if entity in applied:
                continue
            applied.add(entity)
            try:
                self._apply(*entity)
            except Exception:  # one bad config must not stop the notifications after it
                log.exception("could not apply the config change of %s/%s", *entity)

    def _apply(self, kind: str, name: str) -> None:
        broker = self.broker
        if kind == "topics":
            if broker.metadata_image().topic(name) is not None:
                broker.metadata.cache.refresh_topic_config(name)
                broker.replica_manager.update_config(name, broker.topics.topic_log_config(name))
                log.info("applied the dynamic configs of topic %s", name)
        elif kind in ("users", "clients"):
            self._apply_quotas(f"{kind}/{name}")
        elif name == layout.broker_config_entity(None) or name == str(broker.broker_id):
            broker.reload_dynamic_broker_config()
            log.info("applied the dynamic broker configs of %s", name)

    def _apply_quotas(self, path: str) -> None:
        """Re-read one client quota entity (``users/<u>``, ``users/<u>/clients/<c>``,
        ``clients/<c>``; server/client_quota_configs.py)."""
        entity = client_quota_configs.entity_of_path(path)
        if entity is None:
            log.warning("ignoring the config change of an unknown quota entity %s", path)
            return
        quotas = client_quota_configs.quotas_of(client_quota_configs.read_config(self.store, path))
        self.broker.client_quotas.update(entity, quotas)
        log.info("applied the client quotas of %s", path)
