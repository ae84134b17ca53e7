"""Topic deletion: Kafka's ``TopicDeletionManager``
(``core/src/main/scala/kafka/controller/TopicDeletionManager.scala``), without I/O.

A topic named under ``/admin/delete_topics`` is queued. While it is queued and eligible (no
replica on a dead broker, no partition being reassigned, no deletion already in flight),
deletion starts:

1. its partitions go Offline then NonExistent, and every live broker gets UpdateMetadata with
   leader `commands.LEADER_DURING_DELETE` for them, so clients stop using them;
2. replicas on live brokers go Offline, then ReplicaDeletionStarted (StopReplica with
   delete); replicas on dead brokers go ReplicaDeletionIneligible and the topic waits;
3. each StopReplica answer moves a replica to ReplicaDeletionSuccessful (or, on error,
   ReplicaDeletionIneligible);
4. when every replica succeeded the replicas become NonExistent, the topic leaves the
   context, and the znodes go: ``/brokers/topics/<t>`` (recursively), ``/config/topics/<t>``,
   then ``/admin/delete_topics/<t>``.

A broker that comes back with replicas of a waiting topic makes it eligible again; its
ineligible replicas go Offline and deletion is retried. A topic queued while any of its
partitions is being reassigned (or whose reassignment starts or resumes while it is queued)
is ineligible until the last of those reassignments completes (Kafka's
``markTopicIneligibleForDeletion`` with "topic reassignment in progress", then
``resumeDeletionForTopics``); it stays queued meanwhile, and its partitions keep their leaders
and ISRs, so the reassignment can finish.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from odradek.controller.commands import DeleteZnode
from odradek.controller.controller_context import (
    ControllerContext,
    PartitionReplica,
)
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.controller_context import ReplicaStateName as R
from odradek.controller.partition_state_machine import PartitionStateMachine
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.controller.request_batch import RequestBatch
from odradek.metadata import layout


@dataclass(eq=False)
class TopicDeletionManager:
    """Drives deletions through the two state machines; see the module docstring."""

    ctx: ControllerContext
    batch: RequestBatch
    psm: PartitionStateMachine
    rsm: ReplicaStateMachine

    def _replicas(self, topic: str) -> list[PartitionReplica]:
        return self.ctx.replicas_for_partitions(self.ctx.partitions_for_topic(topic))

    def _in_state(self, topic: str, state: R) -> list[PartitionReplica]:
        return [r for r in self._replicas(topic) if self.ctx.replica_state(r) is state]

    def enqueue(self, topics: Iterable[str]) -> None:
        """Kafka's ``processTopicDeletion`` and ``enqueueTopicsForDeletion``: a topic with a
        reassignment in progress is queued but ineligible (`mark_reassigning_ineligible`)."""
        self.ctx.topics_to_delete.update(t for t in topics if t in self.ctx.all_topics())
        self.mark_reassigning_ineligible()
        self.resume()

    def mark_ineligible(self, topics: Iterable[str]) -> None:
        """Kafka's ``markTopicIneligibleForDeletion``: queued topics among ``topics`` wait
        until `resume_for` names them; topics not queued are left alone."""
        self.ctx.topics_ineligible_for_deletion |= set(topics) & self.ctx.topics_to_delete

    def mark_reassigning_ineligible(self) -> None:
        """Queued topics with a partition being reassigned wait for the reassignment (Kafka
        halts them so in ``processTopicDeletion`` and, at failover, in
        ``fetchTopicDeletionsInProgress``). Kafka marks before queueing there, which leaves a
        topic queued for the first time eligible; marking after queueing makes every
        deletion wait, as Kafka's comment there intends."""
        self.mark_ineligible(tp[0] for tp in self.ctx.partitions_being_reassigned())

    def resume_for(self, topics: Iterable[str]) -> None:
        """Kafka's ``resumeDeletionForTopics``: the topics may be retried."""
        queued = set(topics) & self.ctx.topics_to_delete
        self.ctx.topics_ineligible_for_deletion -= queued
        if queued:
            self.resume()

    def complete_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        started = [r for r in replicas if self.ctx.replica_state(r) is R.DELETION_STARTED]
        self.rsm.handle_state_changes(started, R.DELETION_SUCCESSFUL)
        self.resume()

    def fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        replicas = [r for r in replicas if r[0][0] in self.ctx.topics_to_delete]
        if not replicas:
            return
        self.rsm.handle_state_changes(replicas, R.DELETION_INELIGIBLE)
        self.ctx.topics_ineligible_for_deletion.update(r[0][0] for r in replicas)
        self.resume()

    def resume(self) -> None:
        """Kafka's ``resumeDeletions``: finish, retry or start each queued topic."""
        eligible = []
        for topic in sorted(self.ctx.topics_to_delete):
            replicas = self._replicas(topic)
            if all(self.ctx.replica_state(r) is R.DELETION_SUCCESSFUL for r in replicas):
                self._complete(topic)
                continue
            if self._in_state(topic, R.DELETION_STARTED):
                continue  # answers still awaited
            if topic in self.ctx.topics_ineligible_for_deletion:
                continue
            ineligible = self._in_state(topic, R.DELETION_INELIGIBLE)
            self.rsm.handle_state_changes(ineligible, R.OFFLINE)
            eligible.append(topic)
        if eligible:
            self._start(eligible)

    def _start(self, topics: list[str]) -> None:
        """Kafka's ``onTopicDeletion`` and ``onPartitionDeletion``."""
        ctx = self.ctx
        unseen = [t for t in topics if t not in ctx.topics_deletion_started]
        partitions = [tp for t in unseen for tp in ctx.partitions_for_topic(t)]
        self.psm.handle_state_changes(partitions, P.OFFLINE)
        self.psm.handle_state_changes(partitions, P.NON_EXISTENT)
        ctx.topics_deletion_started.update(unseen)
        every = [tp for t in topics for tp in ctx.partitions_for_topic(t)]
        self.batch.add_update_metadata(ctx.live_or_shutting_down_ids(), every)
        for topic in topics:
            replicas = self._replicas(topic)
            dead = [r for r in replicas if not ctx.is_replica_online(r[1], True, r[0])]
            retry = [
                r
                for r in replicas
                if r not in dead and ctx.replica_state(r) is not R.DELETION_SUCCESSFUL
            ]
            self.rsm.handle_state_changes(dead, R.DELETION_INELIGIBLE)
            self.rsm.handle_state_changes(retry, R.OFFLINE)
            self.rsm.handle_state_changes(retry, R.DELETION_STARTED)
            if dead:
                ctx.topics_ineligible_for_deletion.add(topic)

    def _complete(self, topic: str) -> None:
        """Kafka's ``completeDeleteTopic``. The topic's znode goes with the partition znodes
        the controller knows under it named (``DeleteZnode.subtree``), so the writer need not
        read the subtree; any other znode there fails the multi, which is then replayed
        reading it."""
        partitions = sorted(p for _, p in self.ctx.partitions_for_topic(topic))
        self.rsm.handle_state_changes(self._in_state(topic, R.DELETION_SUCCESSFUL), R.NON_EXISTENT)
        self.ctx.remove_topic(topic)
        guard = self.ctx.epoch_zk_version
        named = _partition_znodes(topic, partitions) if partitions else ()
        self.batch.add_write(DeleteZnode(layout.topic_path(topic), guard, recursive=True, subtree=named))
        self.batch.add_write(DeleteZnode(layout.topic_config_path(topic), guard))
        self.batch.add_write(DeleteZnode(layout.delete_topic_path(topic), guard))


def _partition_znodes(topic: str, partitions: list[int]) -> tuple[str, ...]:
    """The znodes under ``/brokers/topics/<topic>`` of its ``partitions``, children before
    parents: each ``partitions/<p>/state`` and ``partitions/<p>``, then ``partitions``."""
    out = []
    for p in partitions:
        out += [layout.partition_state_path(topic, p), layout.partition_path(topic, p)]
    return tuple(out) + (layout.partitions_path(topic),)
