"""Keeping the target's topics in step with the source's: the same names, at least the same
partition count (so a record from source partition p can go to target partition p), and the
source's topic configs (MirrorMaker 2's ``MirrorSourceConnector.computeAndCreateTopicPartitions``
and ``syncTopicConfigs``).

``TopicSync.sync()`` runs at the mirror's start and every ``refresh_topics_interval_s``:

1. The source topics to mirror: those whose whole name matches the ``topics`` regex
   (``Whitelist``), internal topics and names starting with ``__`` left out (MirrorMaker 2's
   ``isInternalTopic``), and topics another mirror copies into the source from the target
   (``replication_policy.topics_from``: mirrored back they would go round forever).
2. A source topic missing on the target is created (CreateTopics) with the source's partition
   count, ``replication_factor``, and the configs ``target_configs`` picks from the source's
   DescribeConfigs.
3. A target topic with fewer partitions than its source grows (CreatePartitions).
4. With ``sync_topic_configs``, existing target topics get the source's configs again
   (IncrementalAlterConfigs: SET what differs, DELETE a target override the source does not
   have), as MirrorMaker 2's ``sync.topic.configs.enabled``.

A topic the target refuses (a config it rejects, too few brokers for the replication factor)
is logged and left out until the next refresh tries again; the others go on.
"""

from __future__ import annotations

import logging
import re

from odradek.client.admin import AsyncAdminClient
from odradek.client.admin_types import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from odradek.client.errors import BrokerError
from odradek.client.topic_filter import Whitelist
from odradek.mirror.mirror_config import MirrorConfig
from odradek.mirror.replication_policy import topics_from
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["TopicSync", "target_configs"]

_log = logging.getLogger("odradek.mirror")


def target_configs(entries: dict[str, ConfigEntry], exclude: re.Pattern) -> dict[str, str]:
    """The configs a target topic takes from its source topic's DescribeConfigs entries: those
    set for it rather than defaults (MirrorMaker 2's ``targetConfig``: not DEFAULT_CONFIG, not
    STATIC_BROKER_CONFIG, not read-only or sensitive) and not matched by ``exclude``."""
    return {e.name: e.value for e in entries.values()
            if not e.is_default and e.source != ConfigSource.STATIC_BROKER_CONFIG
            and not e.read_only and not e.is_sensitive and e.value is not None
            and exclude.fullmatch(e.name) is None}


def config_changes(source: dict[str, ConfigEntry], target: dict[str, ConfigEntry],
                   exclude: re.Pattern) -> list[AlterConfigOp]:
    """What brings an existing target topic to its source's configs: SET each copied config
    whose value differs, DELETE a target topic override for a config the source leaves at its
    default (the target's default applies then, as MirrorMaker 2's ``use.defaults.from=target``)."""
    wanted = target_configs(source, exclude)
    ops = [AlterConfigOp(name, value) for name, value in sorted(wanted.items())
           if name not in target or target[name].value != value]
    ops += [AlterConfigOp(name, None, AlterConfigOpType.DELETE) for name, e in sorted(target.items())
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG and name not in wanted
            and exclude.fullmatch(name) is None]
    return ops


class TopicSync:
    def __init__(self, source: AsyncAdminClient, target: AsyncAdminClient, config: MirrorConfig,
                 target_cluster_id: str | None = None) -> None:
        self.source = source
        self.target = target
        self.config = config
        self.target_cluster_id = target_cluster_id
        self._looped: set[str] = set()  # topics left out as mirrored from the target (warned once)
        self.filter = Whitelist(config.topics)
        self.exclude = re.compile("|".join(f"(?:{p})" for p in config.config_properties_exclude) or "(?!)")

    def mirrored(self, topic: str, is_internal: bool) -> bool:
        return self.filter.is_topic_allowed(topic, is_internal) and not topic.startswith("__")

    async def sync(self) -> dict[str, int]:
        """Bring the target in step; return ``{topic: source partition count}`` of the topics
        the target is ready for (it has the topic with at least that many partitions)."""
        source = {name: d.partitions for name, d in (await self.source.describe_topics()).items()
                  if self.mirrored(name, d.is_internal)}
        self._leave_out_looped(source, await topics_from(self.source, self.target_cluster_id))
        counts = {name: len(parts) for name, parts in source.items() if parts}
        target = {name: len(d.partitions) for name, d in (await self.target.describe_topics()).items()}
        new = sorted(t for t in counts if t not in target)
        grown = {t: n for t, n in counts.items() if t in target and target[t] < n}
        failed = set()
        if new:
            failed |= await self._create(new, counts)
        if grown:
            failed |= await self._grow(grown)
        if self.config.sync_topic_configs:
            await self._sync_configs(sorted(t for t in counts if t in target and t not in failed))
        return {t: n for t, n in counts.items() if t not in failed}

    def _leave_out_looped(self, source: dict, looped: dict[str, str]) -> None:
        for topic, group in sorted(looped.items()):
            if source.pop(topic, None) is not None and topic not in self._looped:
                _log.warning("topic %s is left out: on the source it is a mirror of the target's topic %s "
                             "(group %s commits its positions there), copied back it would go round forever",
                             topic, topic, group)
        self._looped = set(looped)

    async def _create(self, topics: list[str], counts: dict[str, int]) -> set[str]:
        configs = await self._describe(self.source, topics)
        new = [NewTopic(t, counts[t], self.config.replication_factor,
                        configs=target_configs(configs.get(t, {}), self.exclude)) for t in topics]
        failed = await self._settled("create topic", lambda: self.target.create_topics(new), ErrorCode.TOPIC_ALREADY_EXISTS)
        for t in new:
            if t.name not in failed:
                _log.info("created topic %s on the target: %d partitions, configs %s",
                          t.name, t.num_partitions, t.configs or "(none)")
        return failed

    async def _grow(self, grown: dict[str, int]) -> set[str]:
        # INVALID_PARTITIONS: another mirror (or a user) grew it meanwhile; the next refresh checks.
        failed = await self._settled("add partitions to", lambda: self.target.create_partitions(
            {t: NewPartitions(n) for t, n in grown.items()}), ErrorCode.INVALID_PARTITIONS)
        for t, n in grown.items():
            if t not in failed:
                _log.info("grew topic %s on the target to %d partitions", t, n)
        return failed

    async def _sync_configs(self, topics: list[str]) -> None:
        if not topics:
            return
        source = await self._describe(self.source, topics)
        target = await self._describe(self.target, topics)
        changes = {ConfigResource(ResourceType.TOPIC, t): ops for t in topics
                   if t in source and t in target and (ops := config_changes(source[t], target[t], self.exclude))}
        if not changes:
            return
        await self._settled("sync the configs of", lambda: self.target.incremental_alter_configs(changes))
        for resource, ops in changes.items():
            _log.info("synced configs of topic %s on the target: %s", resource.name,
                      ", ".join(f"{op.name}={op.value}" if op.op == AlterConfigOpType.SET else f"-{op.name}"
                                for op in ops))

    async def _describe(self, admin: AsyncAdminClient, topics: list[str]) -> dict[str, dict[str, ConfigEntry]]:
        """Topic configs by topic; a topic that vanished meanwhile is left out."""
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        try:
            found = await admin.describe_configs(resources)
        except BrokerError:
            found = {}
            for r in resources:  # one at a time: keep the answers of the others
                try:
                    found.update(await admin.describe_configs([r]))
                except BrokerError as e:
                    _log.warning("could not describe the configs of topic %s: %s", r.name, e)
        return {r.name: entries for r, entries in found.items()}

    @staticmethod
    async def _settled(what: str, call, fine: int | None = None) -> set[str]:
        """Run an admin call over several topics; the topics it failed for (logged), less
        those whose error is ``fine``."""
        try:
            await call()
        except BrokerError as e:
            failed = set()
            for subject, error in (e.errors or {None: e}).items():
                name = getattr(subject, "name", subject)
                if getattr(error, "code", None) == fine:
                    continue
                _log.warning("could not %s topic %s on the target: %s", what, name, error)
                failed.add(name)
            return failed
        return set()
