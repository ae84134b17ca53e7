"""`Controller`: Kafka's ``KafkaController`` event handling, one event at a time, without I/O.

``commands = controller.handle(event)``: the event (`events`) carries what the edge read; the
controller updates its `ControllerContext` through the partition and replica state machines
and returns the `commands` that make the change durable and known (conditional znode writes
first, then requests to brokers, then replies). The edge runs them in order (see
`commands`); if a write fails on a version it feeds `events.LeaderAndIsrConflict` back (the
controller then goes back to the context it had before the event, adopts the states read
back and handles the event again), or `events.Resign` when another controller took over.

Invariants, after every event (the tests check them after random event sequences):

* one leader per partition per leader epoch: leader epochs never decrease, and every change
  of leader increases it;
* a partition's leader is in its ISR (leader -1, "no leader", excepted);
* every write is conditional on the version the controller read or last wrote, and guarded
  by the version of ``/controller_epoch`` this controller was elected at.

The handlers mirror Kafka's: `on_controller_failover`, `on_broker_startup`,
`on_broker_failure`, `on_broker_log_dir_failure`, `on_new_partition_creation`, `on_topic_deletion`,
`on_controlled_shutdown`, `on_preferred_replica_election`, `on_alter_partition`;
the broker handlers live in `broker_change` (mixed in);
admin-requested elections (ElectLeaders) are `replica_election`;
reassignment is `reassignment.ReassignmentManager`, deletion `topic_deletion`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from functools import singledispatchmethod

from odradek.controller import events as ev
from odradek.controller.broker_change import BrokerChanges
from odradek.controller.commands import (
    AlterPartitionReply,
    AlterPartitionResult,
    Command,
    ControlledShutdownReply,
    DeleteZnode,
    ElectLeadersReply,
    Reply,
    SetZnode,
    TopicPartition,
)
from odradek.controller.controller_context import ControllerContext, ReplicaAssignment
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.controller_context import ReplicaStateName as R
from odradek.controller.leader_election import ElectionStrategy, preferred_leader
from odradek.controller.partition_state_machine import PartitionStateMachine, write_leader_and_isr
from odradek.controller.reassignment import ReassignmentManager, not_controller_reassignment_reply
from odradek.controller.replica_election import ElectionType, elect_leaders
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.controller.request_batch import RequestBatch
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.metadata import layout
from odradek.metadata.layout import ZERO_UUID, PartitionState, TopicAssignment
from odradek.protocol.generated.error_codes import ErrorCode


class Controller(BrokerChanges):
    """The controller of one broker; inactive until `events.Startup`."""

    def __init__(
        self, broker_id: int, *, new_topic_id: Callable[[], uuid.UUID] = layout.new_kafka_uuid
    ) -> None:
        self.broker_id = broker_id
        self.new_topic_id = new_topic_id
        self.active = False
        self.unclean_elections: list[TopicPartition] = []
        """Partitions the last event gave an out-of-sync leader: for the edge to log loudly."""
        self._reset()

    def _reset(self) -> None:
        self.ctx = ControllerContext(controller_id=self.broker_id)
        self.batch = RequestBatch(self.ctx)
        self.partitions = PartitionStateMachine(self.ctx, self.batch)
        self.replicas = ReplicaStateMachine(self.ctx, self.batch)
        self.deletion = TopicDeletionManager(self.ctx, self.batch, self.partitions, self.replicas)
        self.reassignment = ReassignmentManager(
            self.ctx, self.batch, self.partitions, self.replicas, self.deletion
        )
        self._replies: list[Reply] = []
        self._saved: tuple[ControllerContext, ev.ControllerEvent] | None = None

    # -- dispatch -----------------------------------------------------------------------------

    def handle(self, event: ev.ControllerEvent) -> list[Command]:
        """Handle one event; return the commands to execute, in order."""
        self.unclean_elections = []
        if not self.active and not isinstance(event, ev.Startup):
            return self._inactive_reply(event)
        if isinstance(event, ev.LeaderAndIsrConflict):
            self.on_leader_and_isr_conflict(event)
        else:
            self._saved = (self.ctx.copy(), event)
            self._dispatch(event)
        out = self.batch.drain() + self._replies
        self._replies = []
        return out

    def _inactive_reply(self, event: ev.ControllerEvent) -> list[Command]:
        if isinstance(event, ev.AlterPartition):
            return [AlterPartitionReply(event.broker_id, ErrorCode.NOT_CONTROLLER)]
        if isinstance(event, ev.ControlledShutdown):
            return [ControlledShutdownReply(event.broker_id, ErrorCode.NOT_CONTROLLER)]
        if isinstance(event, ev.ElectLeaders):
            return [ElectLeadersReply(self.broker_id, ErrorCode.NOT_CONTROLLER)]
        reply = not_controller_reassignment_reply(event)
        return [] if reply is None else [reply]

    @singledispatchmethod
    def _dispatch(self, event: ev.ControllerEvent) -> None:
        raise TypeError(f"unknown controller event {event!r}")

    @_dispatch.register
    def _(self, event: ev.Startup) -> None:
        self.on_controller_failover(event.snapshot)

    @_dispatch.register
    def _(self, event: ev.Resign) -> None:
        self.active = False
        self._reset()

    @_dispatch.register
    def _(self, event: ev.BrokerChange) -> None:
        self.process_broker_change(event.live_brokers)

    @_dispatch.register
    def _(self, event: ev.BrokerProcessGone) -> None:
        self.on_broker_process_gone(event.broker_id, event.epoch)

    @_dispatch.register
    def _(self, event: ev.TopicChange) -> None:
        self.process_topic_change(event.topics)

    @_dispatch.register
    def _(self, event: ev.PartitionModifications) -> None:
        self.process_partition_modifications(event.topic)

    @_dispatch.register
    def _(self, event: ev.TopicDeletion) -> None:
        self.on_topic_deletion(event.topics)

    @_dispatch.register
    def _(self, event: ev.TopicDeletionStopReplicaResponse) -> None:
        self.deletion.fail_replica_deletion((tp, event.broker_id) for tp in event.failed)
        self.deletion.complete_replica_deletion((tp, event.broker_id) for tp in event.deleted)

    @_dispatch.register
    def _(self, event: ev.IsrChangeNotification) -> None:
        self.on_isr_change(event.states)

    @_dispatch.register
    def _(self, event: ev.LogDirEventNotification) -> None:
        self.on_broker_log_dir_failure(event.broker_ids)

    @_dispatch.register
    def _(self, event: ev.LeaderAndIsrResponseReceived) -> None:
        self.on_leader_and_isr_storage_errors(event.broker_id, event.offline)

    @_dispatch.register
    def _(self, event: ev.AlterPartition) -> None:
        self._replies.append(self.on_alter_partition(event))

    @_dispatch.register
    def _(self, event: ev.ControlledShutdown) -> None:
        self._replies.append(self.on_controlled_shutdown(event.broker_id, event.broker_epoch))

    @_dispatch.register
    def _(self, event: ev.PreferredReplicaElection) -> None:
        self.on_preferred_replica_election(event.partitions)

    @_dispatch.register
    def _(self, event: ev.ElectLeaders) -> None:
        outcomes, unclean = elect_leaders(
            self.ctx, self.partitions, event.partitions, ElectionType(event.election_type)
        )
        self.unclean_elections += unclean
        self._replies.append(ElectLeadersReply(self.broker_id, ErrorCode.NONE, tuple(outcomes)))

    @_dispatch.register
    def _(self, event: ev.PartitionReassignment) -> None:
        self.reassignment.on_zk_reassignment(event.targets)

    @_dispatch.register
    def _(self, event: ev.ApiPartitionReassignment) -> None:
        self._replies.append(self.reassignment.alter_reassignments(event.reassignments))

    @_dispatch.register
    def _(self, event: ev.ListPartitionReassignments) -> None:
        self._replies.append(self.reassignment.list_reassignments(event.partitions))

    # -- failover -----------------------------------------------------------------------------

    def on_controller_failover(self, snapshot: ev.ClusterSnapshot) -> None:
        """Kafka's ``onControllerFailover``: load the context, tell every broker the full
        state, bring replicas and partitions to the states they can be in, resume deletions."""
        self._reset()
        self.active = True
        ctx = self.ctx
        ctx.controller_id, ctx.epoch = snapshot.controller_id, snapshot.epoch
        ctx.epoch_zk_version = snapshot.epoch_zk_version
        ctx.fenced_registrations = dict(snapshot.fenced_registrations)
        ctx.live_brokers = {b.broker_id: b for b in self._unfenced(snapshot.live_brokers)}
        ctx.unclean_topics = set(snapshot.unclean_topics)
        ctx.unclean_default = snapshot.unclean_default
        for topic in snapshot.topics:
            self._add_topic(topic)
        for tp, state in snapshot.partition_states.items():
            if tp in ctx.assignments:
                ctx.leadership[tp] = state
        ctx.topics_to_delete = set(snapshot.topics_to_delete) & ctx.all_topics()
        self.deletion.mark_reassigning_ineligible()
        self.batch.add_update_metadata(ctx.live_or_shutting_down_ids(), ctx.all_partitions())
        self.replicas.initialize()
        online, offline = [], []
        for r in ctx.replica_states:
            (online if ctx.is_replica_online(r[1], True, r[0]) else offline).append(r)
        self.replicas.handle_state_changes(sorted(online), R.ONLINE)
        self.replicas.handle_state_changes(sorted(offline), R.OFFLINE)
        self.partitions.initialize()
        self._trigger_online()
        for tp in self.reassignment.partitions_being_reassigned():
            self.reassignment.maybe_complete(tp, start=True)
        self.deletion.resume()

    def _add_topic(self, topic: TopicAssignment) -> None:
        """Record a topic's id and assignment; a topic written without an id gets one (as
        Kafka 2.8's controller does), written back conditionally."""
        ctx = self.ctx
        topic = ctx.adopted_topics.pop(topic.name, topic)  # fresher: read after a conflict
        topic_id = topic.topic_id
        if topic_id == ZERO_UUID:
            topic_id = self.new_topic_id()
            data = replace(topic, topic_id=topic_id).to_json()
            path = layout.topic_path(topic.name)
            self.batch.add_write(SetZnode(path, ctx.epoch_zk_version, data, topic.zk_version))
            ctx.topic_zk_versions[topic.name] = topic.zk_version + 1
        else:
            ctx.topic_zk_versions[topic.name] = topic.zk_version
        ctx.topic_ids[topic.name] = topic_id
        for partition, replicas in topic.partitions.items():
            ctx.assignments[(topic.name, partition)] = ReplicaAssignment(
                tuple(replicas),
                tuple(topic.adding_replicas.get(partition, ())),
                tuple(topic.removing_replicas.get(partition, ())),
            )

    def _trigger_online(self, topic: str | None = None) -> None:
        results = self.partitions.trigger_online_partition_state_change(topic)
        self.unclean_elections += [
            tp for tp, r in results.items() if getattr(r, "unclean", False)
        ]

    # -- topics -------------------------------------------------------------------------------

    def process_topic_change(self, topics: Iterable[TopicAssignment]) -> None:
        """Kafka's ``processTopicChange``: forget topics gone, create new ones."""
        topics = {t.name: t for t in topics}
        for gone in sorted(self.ctx.all_topics() - set(topics)):
            self.ctx.remove_topic(gone)
        known = self.ctx.all_topics()  # once: it walks every partition
        new = [t for name, t in sorted(topics.items()) if name not in known]
        for topic in new:
            self._add_topic(topic)
        self.on_new_partition_creation(
            [(t.name, p) for t in new for p in sorted(t.partitions)]
        )

    def process_partition_modifications(self, topic: TopicAssignment) -> None:
        """Kafka's ``processPartitionModifications``: create the added partitions."""
        ctx = self.ctx
        if topic.name not in ctx.topic_ids or ctx.is_queued_for_deletion(topic.name):
            return
        added = [p for p in sorted(topic.partitions) if (topic.name, p) not in ctx.assignments]
        for p in added:
            ctx.assignments[(topic.name, p)] = ReplicaAssignment(tuple(topic.partitions[p]))
        ctx.topic_zk_versions[topic.name] = topic.zk_version
        self.on_new_partition_creation([(topic.name, p) for p in added])

    def on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        """Kafka's ``onNewPartitionCreation``: New, NewReplica, Online (first live replica
        leads, live replicas are the ISR), OnlineReplica."""
        if not partitions:
            return
        self.partitions.handle_state_changes(partitions, P.NEW)
        replicas = self.ctx.replicas_for_partitions(partitions)
        self.replicas.handle_state_changes(replicas, R.NEW)
        self.partitions.handle_state_changes(partitions, P.ONLINE, ElectionStrategy.OFFLINE)
        self.replicas.handle_state_changes(replicas, R.ONLINE)

    def on_topic_deletion(self, topics: Iterable[str]) -> None:
        """Kafka's ``processTopicDeletion``: unknown topics just lose their mark."""
        topics = set(topics)
        for unknown in sorted(topics - self.ctx.all_topics()):
            self.batch.add_write(
                DeleteZnode(layout.delete_topic_path(unknown), self.ctx.epoch_zk_version)
            )
        self.deletion.enqueue(sorted(topics & self.ctx.all_topics()))

    # -- ISR changes --------------------------------------------------------------------------

    def on_isr_change(self, states: Mapping[TopicPartition, PartitionState]) -> None:
        """Kafka's ``processIsrChangeNotification``: take the states leaders wrote (newer
        versions only) and tell every broker."""
        ctx, changed = self.ctx, []
        for tp, state in sorted(states.items()):
            old = ctx.leadership.get(tp)
            if tp in ctx.assignments and (old is None or state.zk_version > old.zk_version):
                ctx.leadership[tp] = state
                changed.append(tp)
        self.batch.add_update_metadata(ctx.live_or_shutting_down_ids(), changed)
        for tp in changed:
            self.reassignment.maybe_complete(tp)

    def on_alter_partition(self, event: ev.AlterPartition) -> AlterPartitionReply:
        """Kafka's ``processAlterIsr``: a leader's ISR change, written conditionally on the
        state version the leader holds; the leader epoch stays."""
        ctx = self.ctx
        if ctx.broker_epoch(event.broker_id) != event.broker_epoch:
            return AlterPartitionReply(event.broker_id, ErrorCode.STALE_BROKER_EPOCH)
        results, changed = [], []
        for tp, leader_epoch, isr, zk_version in event.partitions:
            result = self._alter_one(event.broker_id, tp, leader_epoch, tuple(isr), zk_version)
            results.append(result)
            if result.error is ErrorCode.NONE:
                changed.append(tp)
        self.batch.add_update_metadata(ctx.live_or_shutting_down_ids(), changed)
        for tp in changed:
            self.reassignment.maybe_complete(tp)
        return AlterPartitionReply(event.broker_id, ErrorCode.NONE, tuple(results))

    def _alter_one(
        self,
        broker: int,
        tp: TopicPartition,
        leader_epoch: int,
        isr: tuple[int, ...],
        zk_version: int,
    ) -> AlterPartitionResult:
        ctx = self.ctx
        current = ctx.leadership.get(tp)
        # a topic queued but waiting (for a reassignment to finish) keeps its ISR moving,
        # as Kafka's processAlterIsr does; once deletion started the partitions are gone
        if current is None or tp[0] in ctx.topics_deletion_started:
            return AlterPartitionResult(tp[0], tp[1], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if leader_epoch < current.leader_epoch or current.leader != broker:
            return AlterPartitionResult(tp[0], tp[1], ErrorCode.FENCED_LEADER_EPOCH)
        ok = AlterPartitionResult(
            tp[0], tp[1], ErrorCode.NONE, current.leader, current.leader_epoch, current.isr,
            current.zk_version,
        )
        if isr == current.isr:
            return ok
        if zk_version != current.zk_version:
            return AlterPartitionResult(tp[0], tp[1], ErrorCode.INVALID_UPDATE_VERSION)
        if broker not in isr or not set(isr) <= set(ctx.replicas(tp)):
            return AlterPartitionResult(tp[0], tp[1], ErrorCode.INVALID_REQUEST)
        # Kafka's ineligible replicas (KIP-841): a broker that is gone or shutting down does
        # not join an ISR, or a controlled shutdown would see it come back behind its back
        if any(r not in current.isr and not ctx.is_replica_online(r, tp=tp) for r in isr):
            return AlterPartitionResult(tp[0], tp[1], ErrorCode.INELIGIBLE_REPLICA)
        new = replace(current, isr=isr, controller_epoch=ctx.epoch)
        written = write_leader_and_isr(ctx, self.batch, tp, new)
        return replace(ok, isr=written.isr, zk_version=written.zk_version)

    # -- leadership moves ---------------------------------------------------------------------

    def on_controlled_shutdown(
        self, broker_id: int, broker_epoch: int = -1
    ) -> ControlledShutdownReply:
        """Kafka's ``doControlledShutdown``: leaderships move to other live ISR members, the
        broker leaves the ISRs of the partitions it follows (StopReplica, no delete). Replies
        with the replicated partitions it still leads (no other eligible leader); partitions
        with a single replica are not counted, as in Kafka."""
        ctx = self.ctx
        if broker_id not in ctx.live_brokers:
            return ControlledShutdownReply(broker_id, ErrorCode.BROKER_NOT_AVAILABLE)
        if broker_epoch != -1 and broker_epoch != ctx.broker_epoch(broker_id):
            return ControlledShutdownReply(broker_id, ErrorCode.STALE_BROKER_EPOCH)
        ctx.shutting_down.add(broker_id)
        acted_on = [
            tp
            for tp in ctx.partitions_on_broker(broker_id)
            if len(ctx.replicas(tp)) > 1
            and tp in ctx.leadership
            and not ctx.is_queued_for_deletion(tp[0])
        ]
        led = [tp for tp in acted_on if ctx.leadership[tp].leader == broker_id]
        followed = [tp for tp in acted_on if tp not in led]
        self.partitions.handle_state_changes(led, P.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN)
        self.replicas.handle_state_changes([(tp, broker_id) for tp in followed], R.OFFLINE)
        # Kafka's replicatedPartitionsBrokerLeads: a partition without other replicas cannot
        # move, so it does not hold the shutdown back
        remaining = tuple(
            tp for tp in acted_on
            if ctx.leadership[tp].leader == broker_id
        )
        return ControlledShutdownReply(broker_id, ErrorCode.NONE, remaining)

    def on_preferred_replica_election(self, partitions: Iterable[TopicPartition] | None) -> None:
        """Kafka's ``onReplicaElection`` with the preferred strategy, for online partitions
        not led by their preferred replica while it is live and in the ISR."""
        ctx = self.ctx
        candidates = ctx.all_partitions() if partitions is None else sorted(set(partitions))
        eligible = []
        for tp in candidates:
            state = ctx.leadership.get(tp)
            if state is None or ctx.partition_state(tp) is not P.ONLINE:
                continue
            if ctx.is_queued_for_deletion(tp[0]):
                continue
            live = {r for r in ctx.replicas(tp) if ctx.is_replica_online(r, tp=tp)}
            preferred = preferred_leader(ctx.replicas(tp), state.isr, live)
            if preferred is not None and preferred != state.leader:
                eligible.append(tp)
        self.partitions.handle_state_changes(eligible, P.ONLINE, ElectionStrategy.PREFERRED)

    # -- conflicts ----------------------------------------------------------------------------

    def on_leader_and_isr_conflict(self, event: ev.LeaderAndIsrConflict) -> None:
        """A conditional write of the last event's commands failed on its version: decisions
        were taken on stale states. Go back to the context before that event, adopt what the
        store holds now, and handle the event again: as Kafka, which reads the state znodes
        before it decides, would have. Writes of the first try that succeeded are adopted as
        they are, so the second try does not repeat them (elections find their new leaders
        in place, ISR changes find their ISRs)."""
        if self._saved is None:
            return
        before, failed = self._saved
        self.ctx.restore(before)
        if isinstance(failed, ev.Startup):
            snapshot = failed.snapshot
            topics = {t.name: t for t in snapshot.topics} | dict(event.topics)
            failed = ev.Startup(
                replace(
                    snapshot,
                    topics=tuple(topics[n] for n in sorted(topics)),
                    partition_states={**snapshot.partition_states, **event.states},
                )
            )
            self._saved = (before, failed)
        ctx = self.ctx
        for tp, state in event.states.items():
            if tp in ctx.assignments:
                ctx.leadership[tp] = state
            else:
                ctx.adopted_states[tp] = state
        for name, stored in event.topics.items():
            if name in ctx.topic_ids:
                ctx.topic_zk_versions[name] = stored.zk_version
            else:
                ctx.adopted_topics[name] = stored
        self._dispatch(failed)
