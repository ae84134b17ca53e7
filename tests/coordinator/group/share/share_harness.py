"""A shard driven by hand for KIP-932 share groups: fake clock, in-memory log, a metadata image
the test changes (the consumer groups' harness), and a share-consumer stand-in."""

from __future__ import annotations

import uuid
from dataclasses import replace

from odradek.coordinator.group.share.share_group_heartbeat import ShareHeartbeatRequest
from tests.coordinator.group.consumer.consumer_harness import CONSUMER_CONFIG, ConsumerShardHarness

SHARE_CONFIG = replace(CONSUMER_CONFIG, share_session_timeout_ms=1000, share_heartbeat_interval_ms=100, share_max_size=10)


class ShareShardHarness(ConsumerShardHarness):
    def __init__(self, config=SHARE_CONFIG) -> None:
        super().__init__(config)

    def share_heartbeat(self, group: str, member_id: str, epoch: int, topics=None, **fields):
        req = ShareHeartbeatRequest(group, member_id, epoch, subscribed_topic_names=None if topics is None
                                    else tuple(topics), client_id="c", client_host="/127.0.0.1", **fields)
        return self.apply(self.shard.share_group_heartbeat(req))

    def share_group(self, group_id: str):
        return self.shard.share.group(group_id)


class ShareMember:
    """A share consumer: joins at epoch 0 with its own id, heartbeats with its epoch, takes the
    assignment whenever one comes."""

    def __init__(self, h: ShareShardHarness, group: str, topics) -> None:
        self.h, self.group, self.topics = h, group, list(topics)
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.assigned: dict = {}

    def beat(self):
        r = self.h.share_heartbeat(self.group, self.member_id, self.epoch, self.topics if self.epoch == 0 else None)
        if r.error == 0:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.assigned = dict(r.assignment)
        return r

    def leave(self):
        return self.h.share_heartbeat(self.group, self.member_id, -1)

    def partitions(self) -> set:
        return {(t, p) for t, ps in self.assigned.items() for p in ps}
