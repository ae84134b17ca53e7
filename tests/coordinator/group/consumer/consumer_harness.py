"""A shard driven by hand for KIP-848 consumer groups: fake clock, in-memory log, a metadata
image the test changes (topics created, grown, deleted)."""

from __future__ import annotations

import uuid
from dataclasses import replace

from odradek.coordinator.group.consumer.consumer_group_heartbeat import HeartbeatRequest
from odradek.coordinator.group.group_config import GroupConfig
from odradek.coordinator.group.group_coordinator_shard import GroupCoordinatorShard
from odradek.metadata.image import MetadataImage
from odradek.metadata.layout import TopicAssignment
from tests.coordinator.group.harness import CONFIG, ShardHarness

CONSUMER_CONFIG = replace(CONFIG, consumer_session_timeout_ms=1000, consumer_heartbeat_interval_ms=100)


class ConsumerShardHarness(ShardHarness):
    def __init__(self, config: GroupConfig = CONSUMER_CONFIG) -> None:
        super().__init__(config)
        self.image = MetadataImage()
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.shard = GroupCoordinatorShard(0, config, self.clock, lambda: self.image)

    def topic(self, name: str, partitions: int) -> uuid.UUID:
        """Create ``name`` (or give it ``partitions`` partitions)."""
        topic_id = self.topic_ids.setdefault(name, uuid.uuid4())
        topics = dict(self.image.topics)
        topics[name] = TopicAssignment(name, topic_id, {p: (1,) for p in range(partitions)})
        ids = {**self.image.topic_ids, topic_id: name}
        self.image = MetadataImage(topics=topics, topic_ids=ids)
        return topic_id

    def delete_topic(self, name: str) -> None:
        topics = {k: v for k, v in self.image.topics.items() if k != name}
        self.image = MetadataImage(topics=topics, topic_ids={v.topic_id: k for k, v in topics.items()})

    def heartbeat(self, group: str, member_id: str, epoch: int, topics=None, owned=None, **fields):
        """One ConsumerGroupHeartbeat; a join (epoch 0) sends the full request by default."""
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 5000)
            owned = {} if owned is None else owned
        req = HeartbeatRequest(group, member_id, epoch, subscribed_topic_names=None if topics is None else tuple(topics),
                               owned=owned, client_id="c", client_host="/127.0.0.1", **fields)
        return self.apply(self.shard.consumer_group_heartbeat(req))

    def group(self, group_id: str):
        return self.shard.consumer.group(group_id)


class Member:
    """A well-behaved client: owns what it was given, revokes at once on its next heartbeat."""

    def __init__(self, h: ConsumerShardHarness, group: str, topics, member_id: str | None = None, **fields) -> None:
        self.h, self.group, self.topics, self.fields = h, group, list(topics), fields
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = 0
        self.owned: dict = {}
        self.last = None

    def beat(self, full: bool = False):
        # Every heartbeat carries its principal's DESCRIBE check, as the handler gives it.
        fields = self.fields if self.epoch == 0 else {k: v for k, v in self.fields.items() if k == "describable"}
        r = self.h.heartbeat(self.group, self.member_id, self.epoch, self.topics if self.epoch == 0 or full else None,
                             self.owned, **fields)
        self.last = r
        if r.error == 0:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = {t: frozenset(ps) for t, ps in r.assignment.items()}
        return r

    def leave(self, epoch: int = -1):
        return self.h.heartbeat(self.group, self.member_id, epoch, **self.fields if epoch == -2 else {})

    def partitions(self) -> set:
        return {(t, p) for t, ps in self.owned.items() for p in ps}
