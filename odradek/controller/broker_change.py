"""``BrokerChanges``: the controller's handling of brokers joining, leaving and failing (a
mixin of ``Controller``, kept apart because it is one concept: Kafka's ``processBrokerChange``
and what follows from it, ``onBrokerStartup``, ``onBrokerFailure``, ``onBrokerLogDirFailure``
and ``onReplicasBecomeOffline``), and the failure of a broker whose process is gone before its
session expires (`events.BrokerProcessGone`, from `broker_liveness`).

It has no state of its own: it uses the controller's ``ctx`` (`ControllerContext`), request
``batch``, ``partitions`` and ``replicas`` state machines, ``reassignment`` and ``deletion``
managers and ``_trigger_online``; see ``controller`` for the invariants every event keeps.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.controller.commands import LiveBroker, TopicPartition
from odradek.controller.controller_context import PartitionReplica
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.controller_context import ReplicaStateName as R


class BrokerChanges:
    """Broker membership handlers of ``Controller`` (a mixin: no state of its own)."""

    def process_broker_change(self, live: Iterable[LiveBroker]) -> None:
        """Kafka's ``processBrokerChange``: new, dead and bounced (re-registered) brokers."""
        ctx = self.ctx
        current = {b.broker_id: b for b in self._unfenced(live)}
        new = sorted(set(current) - set(ctx.live_brokers))
        dead = sorted(set(ctx.live_brokers) - set(current))
        bounced = sorted(
            b
            for b in set(current) & set(ctx.live_brokers)
            if current[b].epoch != ctx.live_brokers[b].epoch
        )
        for broker in bounced + dead:
            del ctx.live_brokers[broker]
        if bounced:
            self.on_broker_failure(bounced)
        for broker in new + bounced:
            ctx.live_brokers[broker] = current[broker]
        for broker in set(current) - set(new) - set(bounced):
            ctx.live_brokers[broker] = current[broker]  # registration details may change
        if new or bounced:
            self.on_broker_startup(sorted(new + bounced))
        if dead:
            self.on_broker_failure(dead)

    def _unfenced(self, live: Iterable[LiveBroker]) -> list[LiveBroker]:
        """``live`` without the registrations whose process is gone; a fence ends when its
        znode does (the session expired) or the broker registers anew (a new epoch)."""
        fenced = self.ctx.fenced_registrations
        live = list(live)
        present = {b.broker_id: b.epoch for b in live}
        for broker_id, epoch in list(fenced.items()):
            if present.get(broker_id) != epoch:
                del fenced[broker_id]
        return [b for b in live if fenced.get(b.broker_id) != b.epoch]

    def on_broker_process_gone(self, broker_id: int, epoch: int) -> None:
        """`events.BrokerProcessGone`: the broker's registration at ``epoch`` fails now, as
        `process_broker_change` would fail it once its znode vanished (which then finds it
        gone already: nothing more), and stays fenced until then or a new registration. A
        stale report (another epoch, or a broker not live) changes nothing."""
        ctx = self.ctx
        if ctx.broker_epoch(broker_id) != epoch:
            return
        ctx.fenced_registrations[broker_id] = epoch
        del ctx.live_brokers[broker_id]
        self.on_broker_failure([broker_id])

    def on_broker_startup(self, new_brokers: list[int]) -> None:
        """Kafka's ``onBrokerStartup``: metadata to everyone, the new brokers' replicas
        online, elections for offline partitions, deletions that may resume."""
        ctx = self.ctx
        ctx.forget_offline_dirs(new_brokers)
        existing = ctx.live_or_shutting_down_ids() - set(new_brokers)
        self.batch.add_update_metadata(existing, [])
        with_leaders = [
            tp for tp in ctx.all_partitions()
            if tp in ctx.leadership and not ctx.is_queued_for_deletion(tp[0])
        ]
        self.batch.add_update_metadata(new_brokers, with_leaders)
        replicas = ctx.replicas_on_brokers(set(new_brokers))
        self.replicas.handle_state_changes(replicas, R.ONLINE)
        self._trigger_online()
        for tp in self.reassignment.partitions_being_reassigned():
            if set(ctx.assignments[tp].target_replicas) & set(new_brokers):
                self.reassignment.maybe_complete(tp, start=True)
        self.deletion.resume_for({tp[0] for tp, _ in replicas})

    def on_broker_failure(self, dead_brokers: list[int]) -> None:
        """Kafka's ``onBrokerFailure``: their replicas go offline."""
        self.ctx.shutting_down.difference_update(dead_brokers)
        self.ctx.forget_offline_dirs(dead_brokers)
        self.on_replicas_become_offline(self.ctx.replicas_on_brokers(set(dead_brokers)))

    def on_broker_log_dir_failure(self, broker_ids: Iterable[int]) -> None:
        """Kafka's ``onBrokerLogDirFailure``: a LeaderAndIsr for every replica of those
        brokers, whose answers tell which replicas are in the failed directories
        (`on_leader_and_isr_storage_errors`)."""
        ctx = self.ctx
        brokers = set(broker_ids) & set(ctx.live_brokers)
        ctx.log_dir_failed_brokers |= brokers
        self.replicas.handle_state_changes(ctx.replicas_on_brokers(brokers), R.ONLINE)

    def on_leader_and_isr_storage_errors(self, broker_id: int, offline: Iterable[TopicPartition]) -> None:
        """Kafka's ``processLeaderAndIsrResponseReceived``: replicas a broker with a failed
        log directory answered KAFKA_STORAGE_ERROR for are offline from now on (until it
        restarts); those newly so lose their leadership and ISR places."""
        ctx = self.ctx
        if broker_id not in ctx.live_brokers or broker_id not in ctx.log_dir_failed_brokers:
            return
        previous = ctx.replicas_on_offline_dirs.get(broker_id, frozenset())
        new = {tp for tp in offline if tp in ctx.assignments} - previous
        if new:
            ctx.replicas_on_offline_dirs[broker_id] = previous | new
            self.on_replicas_become_offline(sorted((tp, broker_id) for tp in new))

    def on_replicas_become_offline(self, replicas: list[PartitionReplica]) -> None:
        """Kafka's ``onReplicasBecomeOffline``: partitions that lost their leader go Offline
        and are elected anew from their live ISR; the replicas go Offline (leaving ISRs)."""
        ctx = self.ctx
        for_deletion = [r for r in replicas if ctx.is_queued_for_deletion(r[0][0])]
        others = [r for r in replicas if r not in for_deletion]
        lost_leader = ctx.partitions_with_offline_leader()
        self.partitions.handle_state_changes(lost_leader, P.OFFLINE)
        self._trigger_online()
        self.replicas.handle_state_changes(others, R.OFFLINE)
        if for_deletion:
            self.deletion.fail_replica_deletion(for_deletion)
        if not lost_leader:
            self.batch.add_update_metadata(ctx.live_or_shutting_down_ids(), [])
