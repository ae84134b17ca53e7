"""`RequestBatch`: the commands of one controller event, as Kafka's
``ControllerBrokerRequestBatch`` gathers them (``ControllerChannelManager.scala``).

The state machines add znode writes (in the order they must run) and per-broker requests;
`drain` returns the writes, then for each broker (by id) its LeaderAndIsr, UpdateMetadata
and StopReplica; except that the requests about partitions given new leaders go out right
after those writes, before the writes that only shrink ISRs (`_elected_first`). Within a batch:

* LeaderAndIsr: one entry per (broker, partition), the latest added wins, ``is_new`` is kept
  once set (Kafka ORs it); adding one also queues the partition in UpdateMetadata for every
  live broker, as Kafka does;
* UpdateMetadata partition states are taken from the context when the batch is drained, so
  they are the latest; partitions of topics being deleted are sent with leader
  `LEADER_DURING_DELETE`; partitions with no leader and ISR yet are left out;
* StopReplica: one entry per (broker, partition), delete once set stays set;
* partition state writes (`add_state_write`): a second state decided for a partition from the
  first one's result (a failover first takes a dead broker out of the ISRs, then elects new
  leaders for the partitions it led) replaces the first write where it stands, expecting the
  first one's version, so the znode is written once (10,000 writes instead of 13,300 at
  10,000 partitions);
* the state writes that change a partition's leader go before those that only change its
  ISR (`_ordered_writes`);
* requests go only to live (or shutting-down) brokers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from dataclasses import replace

from odradek.controller.commands import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    BrokerRequest,
    Command,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    SetZnode,
    TopicPartition,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
    ZnodeWrite,
)
from odradek.controller.controller_context import ControllerContext
from odradek.metadata.layout import PartitionState


class RequestBatch:
    """Commands gathered while one event is handled; see the module docstring."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self._reset()

    def _reset(self) -> None:
        self.writes: list[ZnodeWrite] = []
        self._queued_if_missing: set[ZnodeWrite] = set()  # the exists_ok creates in `writes`
        self._state_writes: dict[TopicPartition, int] = {}  # partition -> its SetZnode's index
        # partition -> [its leader before this batch, the leader its queued write sets]
        self._leaders: dict[TopicPartition, list[int | None]] = {}
        self.leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartition]] = {}
        self.update_metadata: dict[int, set[TopicPartition]] = {}
        self.stop_replica: dict[int, dict[TopicPartition, StopReplicaPartition]] = {}

    def is_empty(self) -> bool:
        return not (self.writes or self.leader_and_isr or self.update_metadata or self.stop_replica)

    def add_write(self, write: ZnodeWrite) -> None:
        """Queue a write; a create-if-missing already queued is not queued twice."""
        if getattr(write, "exists_ok", False):
            # a set, not a scan of `writes`: a topic of n partitions queues its partitions
            # znode n times, and scanning made creating 1,000 partitions take 15 s
            if write in self._queued_if_missing:
                return
            self._queued_if_missing.add(write)
        self.writes.append(write)

    def add_state_write(self, write: SetZnode, state: PartitionState) -> SetZnode:
        """Queue the conditional write of ``state`` (``write``, for ``write.topic_partition``)
        and return the write as queued. When this batch already holds one for the partition
        whose result ``write`` expects (its ``expected_version`` one less), that one is
        replaced by ``write`` at its place and with its expected version: the znode goes from
        the version the first expected straight to ``state``, one version up, not two. The
        LeaderAndIsr entries queued with the replaced state carry ``state`` instead, so every
        queued entry names a state the znode holds at the entry's version."""
        tp = write.topic_partition
        index = self._state_writes.get(tp)
        if index is None or self.writes[index].expected_version + 1 != write.expected_version:
            before = self.ctx.leadership.get(tp)
            self._leaders.setdefault(tp, [None if before is None else before.leader, None])[1] = state.leader
            self._state_writes[tp] = len(self.writes)
            self.writes.append(write)
            return write
        write = replace(write, expected_version=self.writes[index].expected_version)
        self.writes[index] = write
        self._leaders[tp][1] = state.leader
        # id(entry) -> (entry, its replacement): brokers that shared an entry share its
        # replacement (see add_leader_and_isr); the entry is kept so that its id stays its own
        replaced: dict[int, tuple[LeaderAndIsrPartition, LeaderAndIsrPartition]] = {}
        for per_broker in self.leader_and_isr.values():
            entry = per_broker.get(tp)
            if entry is not None and entry.zk_version == write.expected_version + 1:
                if id(entry) not in replaced:
                    replaced[id(entry)] = (entry, replace(
                        entry, controller_epoch=state.controller_epoch, leader=state.leader,
                        leader_epoch=state.leader_epoch, isr=tuple(state.isr),
                    ))
                per_broker[tp] = replaced[id(entry)][1]
        return write

    def add_leader_and_isr(
        self, brokers: Iterable[int], tp: TopicPartition, state: PartitionState, is_new: bool
    ) -> None:
        """Kafka's ``addLeaderAndIsrRequestForBrokers``. The brokers share one entry object
        (one per ``is_new`` value): their requests then compare equal by identity, and the
        channel encodes them once (`request_encoding.SharedBodies`)."""
        assignment = self.ctx.assignments[tp]
        entries: dict[bool, LeaderAndIsrPartition] = {}
        for broker in brokers:
            if broker < 0:
                continue
            per_broker = self.leader_and_isr.setdefault(broker, {})
            old = per_broker.get(tp)
            new = is_new or (old is not None and old.is_new)
            entry = entries.get(new)
            if entry is None:
                entry = entries[new] = LeaderAndIsrPartition(
                    tp[0],
                    tp[1],
                    state.controller_epoch,
                    state.leader,
                    state.leader_epoch,
                    tuple(state.isr),
                    state.zk_version,
                    assignment.replicas,
                    assignment.adding,
                    assignment.removing,
                    new,
                )
            per_broker[tp] = entry
        self.add_update_metadata(self.ctx.live_or_shutting_down_ids(), [tp])

    def add_update_metadata(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> None:
        """Kafka's ``addUpdateMetadataRequestForBrokers``: no partitions still sends the
        broker list."""
        partitions = list(partitions)
        for broker in brokers:
            self.update_metadata.setdefault(broker, set()).update(partitions)

    def add_stop_replica(self, brokers: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        """Kafka's ``addStopReplicaRequestForBrokers``."""
        state = self.ctx.leadership.get(tp)
        if delete:
            epoch = EPOCH_DURING_DELETE
        else:
            epoch = state.leader_epoch if state else -1
        for broker in brokers:
            per_broker = self.stop_replica.setdefault(broker, {})
            old = per_broker.get(tp)
            keep_delete = delete or (old is not None and old.delete_partition)
            per_broker[tp] = StopReplicaPartition(
                tp[0], tp[1], EPOCH_DURING_DELETE if keep_delete else epoch, keep_delete
            )

    # -- emission -----------------------------------------------------------------------------

    def drain(self) -> list[Command]:
        """All commands, writes first; the batch is empty afterwards. When leader-changing
        state writes come before other writes (`_ordered_writes`), the requests about those
        partitions go right after them, ahead of the other writes (`_elected_first`)."""
        writes = self._ordered_writes()
        states: dict[TopicPartition, UpdateMetadataPartition | None] = {}
        out: list[Command] = []
        cut = self._elected_first(writes)
        if cut:
            out += writes[:cut]
            out += self._requests(states, {w.partition for w in writes[:cut]})
            writes = writes[cut:]
        out += writes
        out += self._requests(states, None)
        self._reset()
        return out

    def _elected_first(self, writes: list[ZnodeWrite]) -> int:
        """How many of ``writes`` to send the requests of before the rest: up to the last
        leader-changing state write when other writes follow it, else 0. A failover at
        30,000 partitions writes 10,000 elections, then 20,000 ISR shrinks; the new leaders
        need not wait for the shrinks, as in Kafka, where each state machine step sends its
        requests when it ends. A partition's state is written once per batch, so the
        requests of those partitions already carry their final states."""
        cut = 0
        for index, write in enumerate(writes):
            tp = write.partition
            if tp is not None and tp in self._leaders and self._leaders[tp][0] != self._leaders[tp][1]:
                cut = index + 1
        return cut if cut < len(writes) else 0

    def _requests(self, states: dict, partitions: set[TopicPartition] | None) -> list[BrokerRequest]:
        """The requests to every live target broker, by id, about ``partitions`` only (None:
        all that are left, StopReplica included), taken out of the batch."""
        live = self.ctx.live_or_shutting_down_ids()
        targets = set(self.leader_and_isr) | set(self.update_metadata)
        if partitions is None:
            targets |= set(self.stop_replica)
        out: list[BrokerRequest] = []
        for broker in sorted(targets & live):
            out += self._requests_for(broker, states, partitions)
        return out

    def _ordered_writes(self) -> list[ZnodeWrite]:
        """The writes in their order, except that within each run of partition state writes
        those that change the partition's leader come first: a partition without a leader
        is unavailable until its write lands, one losing an ISR member is not (a failover at
        30,000 partitions writes 10,000 elections and 20,000 ISR shrinks). Each run holds
        one write per partition (a partition's earlier, unreplaced write ends a run) and no
        other write, so no write moves past one it depends on."""
        last = {index: tp for tp, index in self._state_writes.items()}
        ordered: list[ZnodeWrite] = []
        run: list[int] = []
        for index, write in enumerate(self.writes + [None]):
            if index in last:
                run.append(index)
                continue
            moved = [i for i in run if self._leaders[last[i]][0] != self._leaders[last[i]][1]]
            ordered += [self.writes[i] for i in moved]
            if moved:
                moved_set = set(moved)
                run = [i for i in run if i not in moved_set]
            ordered += [self.writes[i] for i in run]
            run = []
            if write is not None:
                ordered.append(write)
        return ordered

    def _header(self, broker: int) -> tuple[int, int, int, int]:
        ctx = self.ctx
        return (broker, ctx.controller_id, ctx.epoch, ctx.broker_epoch(broker))

    def _topic_ids(self, topics: Iterable[str]) -> tuple[tuple[str, uuid.UUID], ...]:
        ids = self.ctx.topic_ids
        return tuple((t, ids[t]) for t in sorted(set(topics)) if t in ids)

    def _requests_for(
        self, broker: int, states: dict[TopicPartition, UpdateMetadataPartition | None],
        partitions: set[TopicPartition] | None = None,
    ) -> list[BrokerRequest]:
        """The requests to ``broker`` (about ``partitions`` only, if given; see `_requests`);
        ``states`` memoises the UpdateMetadata partition states across the brokers of one
        drain (every live broker gets the same ones)."""
        ctx, out = self.ctx, []
        header = self._header(broker)
        entries = self._take(self.leader_and_isr, broker, partitions)
        if entries:
            entries = tuple(v for _, v in sorted(entries.items()))
            leader_ids = {s.leader for s in entries}
            leaders = tuple(ctx.live_brokers[b] for b in sorted(leader_ids & set(ctx.live_brokers)))
            out.append(
                LeaderAndIsrRequest(
                    *header, entries, leaders, self._topic_ids(s.topic for s in entries)
                )
            )
        metadata = self._take(self.update_metadata, broker, partitions)
        if metadata is not None and (metadata or partitions is None):
            parts = []
            for tp in sorted(metadata):
                if tp not in states:
                    states[tp] = self._metadata_state(tp)
                if states[tp] is not None:
                    parts.append(states[tp])
            brokers = tuple(ctx.live_brokers[b] for b in sorted(ctx.live_brokers))
            out.append(
                UpdateMetadataRequest(
                    *header, tuple(parts), brokers, self._topic_ids(s.topic for s in parts)
                )
            )
        if partitions is None and broker in self.stop_replica:
            parts = tuple(v for _, v in sorted(self.stop_replica[broker].items()))
            out.append(StopReplicaRequest(*header, parts))
        return out

    @staticmethod
    def _take(per_broker: dict, broker: int, partitions: set[TopicPartition] | None):
        """``per_broker[broker]`` (a dict or set keyed by partition) less ``partitions``,
        whose part is returned (all of it, and the entry removed, for None); None when the
        broker has no entry."""
        held = per_broker.get(broker)
        if held is None or partitions is None:
            per_broker.pop(broker, None)
            return held
        if isinstance(held, dict):
            taken = {tp: held.pop(tp) for tp in partitions if tp in held}
        else:
            taken = held & partitions
            held -= taken
        if taken and not held:  # all of it sent now: nothing, not an empty request, later
            del per_broker[broker]
        return taken

    def _metadata_state(self, tp: TopicPartition) -> UpdateMetadataPartition | None:
        state = self.ctx.leadership.get(tp)
        if state is None or tp not in self.ctx.assignments:
            return None
        deleting = self.ctx.is_queued_for_deletion(tp[0])
        return UpdateMetadataPartition(
            tp[0],
            tp[1],
            state.controller_epoch,
            LEADER_DURING_DELETE if deleting else state.leader,
            state.leader_epoch,
            tuple(state.isr),
            state.zk_version,
            self.ctx.replicas(tp),
            self.ctx.offline_replicas(tp),
        )
