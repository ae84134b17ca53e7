"""Waiting for the controller to carry out a topic change (Kafka's ``DelayedCreatePartitions``
and ``DelayedDeleteTopics``).

The broker only writes what an administrator asks for (``ClusterMetadata``); the controller
then elects the leaders and tells the replicas, or deletes the replicas and the topic's
znodes. CreateTopics, CreatePartitions, auto-creation and DeleteTopics answer once that is
done, or when their time is up:

- created partitions are done when each has a live leader in the metadata image and, where
  that leader is this broker, this broker took the role (at least at that leader epoch), so a
  client sent here by the answer finds its partitions served. A role this broker could not
  take because the partition's log could not be created (a full disk: the role waits in
  ``ReplicaManager.unhosted_roles``) counts as taken: waiting longer would not help, and
  Kafka too answers from the metadata alone (such a partition answers
  NOT_LEADER_OR_FOLLOWER until the log can be created);
- a deleted topic is done when the image no longer has it (by name and id: a topic of the
  same name created since is another topic).

What is waited for changes in two places, the image (ZooKeeper watches and the controller's
requests, on other threads and tasks)
and this broker's roles (LeaderAndIsr), so both are looked at on a short poll (cheap
lookups; the pending set only shrinks) rather than hooked.
"""

from __future__ import annotations

import asyncio

FIRST_POLL_S = 0.001
MAX_POLL_S = 0.02


async def poll_until(done, timeout_ms: int) -> bool:
    """Call ``done()`` until it is true (True) or ``timeout_ms`` passed (False)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    pause = FIRST_POLL_S
    while not done():
        left = deadline - loop.time()
        if left <= 0:
            return False
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, MAX_POLL_S)
    return True


async def await_leaders(broker, name: str, partitions, timeout_ms: int) -> bool:
    """Wait until every partition of ``partitions`` of topic ``name`` has a leader (see the
    module docstring)."""
    pending = set(partitions)
    me = broker.broker_id
    rm = broker.replica_manager

    def done() -> bool:
        image = broker.metadata_image()
        for p in list(pending):
            state = image.partition_state(name, p)
            if state is None or state.leader < 0 or state.leader not in image.brokers:
                continue
            if state.leader == me and not _role_taken(rm, me, name, p, state.leader_epoch):
                continue
            pending.discard(p)
        return not pending

    return await poll_until(done, timeout_ms)


def _role_taken(rm, me: int, name: str, p: int, leader_epoch: int) -> bool:
    """Whether broker ``me`` leads ``name``-``p`` at ``leader_epoch`` or later, or took the
    LeaderAndIsr of that epoch but could not create the log (an unhosted role)."""
    part = rm.get(name, p)
    if part is not None and part.is_leader(me) and part.leader_epoch >= leader_epoch:
        return True
    waiting = rm.unhosted_roles.get((name, p))
    return waiting is not None and waiting.leader_epoch >= leader_epoch


async def await_deletion(broker, name: str, topic_id, timeout_ms: int) -> bool:
    """Wait until topic ``name`` (of ``topic_id``) is gone from the metadata image."""

    def done() -> bool:
        topic = broker.metadata_image().topic(name)
        return topic is None or topic.topic_id != topic_id

    return await poll_until(done, timeout_ms)
