"""A controller driven against an in-memory `EmbeddedStore`: events in, commands executed the
way the edge will (writes applied in order, requests collected per broker), and the
invariants checked after every event."""

from __future__ import annotations

import itertools
import uuid

from odradek.controller import events as ev
from odradek.controller.assignment import assign_replicas_rack_unaware
from odradek.controller.commands import (
    BrokerRequest,
    LeaderAndIsrRequest,
    LiveBroker,
    Reply,
    StopReplicaRequest,
    UpdateMetadataRequest,
    ZnodeWrite,
    written_partitions,
    written_topics,
)
from odradek.controller.controller import Controller
from odradek.controller.snapshot import read_snapshot
from odradek.metadata import layout
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.errors import BadVersionError, NodeExistsError, StoreUnavailableError
from odradek.metadata.layout import NO_LEADER, BrokerInfo, Endpoint, PartitionState, TopicAssignment

BROKERS = [1000, 1001, 1002, 1003, 1004]


def broker(broker_id: int, epoch: int = 0) -> LiveBroker:
    info = BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id % 1000),))
    return LiveBroker(broker_id, epoch, info)


def worked_example_topic(name: str = "topicA") -> TopicAssignment:
    """topicA: 10 partitions, RF 2, on 1000-1004 with start index 0 and shift 3."""
    parts = assign_replicas_rack_unaware(10, 2, BROKERS, fixed_start_index=0, replica_shift=3)
    return TopicAssignment(name, uuid.UUID(int=42), parts)


class Cluster:
    """A store, a controller at epoch 1, and what the brokers were sent."""

    def __init__(self, brokers=BROKERS, controller_id: int = 1000, unclean: bool = False) -> None:
        self.store = EmbeddedStore()
        for path in layout.PERSISTENT_PATHS:
            self.store.create(path, make_parents=True)
        self.store.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(0))
        self.store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(1))
        self.epochs = itertools.count(1)
        self.live = {b: broker(b, next(self.epochs)) for b in brokers}
        for b in self.live.values():
            self.store.create(layout.broker_path(b.broker_id), b.info.to_json(0))
        self.controller = Controller(controller_id)
        self.unclean = unclean
        self.requests: list[BrokerRequest] = []
        self.replies: list[Reply] = []
        self.history: dict[tuple[str, int], dict[int, int]] = {}  # tp -> epoch -> leader
        self.conflicts = 0
        self.writes_left: int | None = None
        """Writes that still land; then the store is unreachable (None: always reachable)."""
        self.write_failures = 0
        self.announced: dict[tuple[str, int], dict[int, int]] = {}  # the same, as sent
        snapshot = read_snapshot(self.store, controller_id, self.broker_epochs(), unclean)
        self.run(ev.Startup(snapshot))

    @property
    def ctx(self):
        return self.controller.ctx

    def broker_epochs(self) -> dict[int, int]:
        return {b.broker_id: b.epoch for b in self.live.values()}

    def run(self, event: ev.ControllerEvent) -> list:
        commands = self.controller.handle(event)
        self.requests, self.replies = [], []
        if self.execute(commands):
            self.check_invariants()
        return commands

    def execute(self, commands: list) -> bool:
        """Run ``commands`` as the edge will: on a version conflict stop, read back what the
        list writes and hand it to the controller (False: this list was cut short). A newer
        controller epoch raises `BadVersionError` (the edge would resign). A write that meets
        an unreachable store (`writes_left` spent) makes the controller resign, as the edge's
        `ControllerService` does: nothing after it runs (False)."""
        for command in commands:
            if isinstance(command, ZnodeWrite):
                try:
                    self._apply(command)
                except StoreUnavailableError:
                    self.write_failures += 1
                    self.controller.handle(ev.Resign())
                    return False
                except (BadVersionError, NodeExistsError):
                    if self.store.get(layout.CONTROLLER_EPOCH)[1] != command.epoch_zk_version:
                        raise
                    self.conflicts += 1
                    self.run(self.conflict_event(commands))
                    return False
            elif isinstance(command, BrokerRequest):
                self.requests.append(command)
            else:
                self.replies.append(command)
        return True

    def _apply(self, write: ZnodeWrite) -> None:
        if self.writes_left is not None:
            if self.writes_left <= 0:
                raise StoreUnavailableError("the store is unreachable (harness)")
            self.writes_left -= 1
        write.apply(self.store)

    def conflict_event(self, commands: list) -> ev.LeaderAndIsrConflict:
        states = {}
        for tp in written_partitions(commands):
            if self.store.exists(layout.partition_state_path(*tp)) is not None:
                states[tp] = self.state(*tp)
        topics = {t.name: t for t in self.read_topics() if t.name in written_topics(commands)}
        return ev.LeaderAndIsrConflict(states, topics)

    # -- cluster operations -------------------------------------------------------------------

    def create_topic(self, topic: TopicAssignment) -> list:
        self.store.create(layout.topic_path(topic.name), topic.to_json())
        topics = tuple(self.read_topics())
        return self.run(ev.TopicChange(topics))

    def read_topics(self):
        from odradek.controller.snapshot import read_topics

        return read_topics(self.store)

    def kill(self, broker_id: int) -> list:
        del self.live[broker_id]
        self.store.delete(layout.broker_path(broker_id))
        return self.run(ev.BrokerChange(tuple(self.live.values())))

    def start(self, broker_id: int) -> list:
        self.live[broker_id] = broker(broker_id, next(self.epochs))
        self.store.create(layout.broker_path(broker_id), self.live[broker_id].info.to_json(0))
        return self.run(ev.BrokerChange(tuple(self.live.values())))

    def shutdown(self, broker_id: int):
        self.run(ev.ControlledShutdown(broker_id, self.live[broker_id].epoch))
        return self.replies[0] if self.replies else None  # None: cut short by a conflict

    # -- what happened ------------------------------------------------------------------------

    def state(self, topic: str, partition: int) -> PartitionState:
        data, version = self.store.get(layout.partition_state_path(topic, partition))
        return PartitionState.from_json(data, version)

    def sent(self, kind: type, broker_id: int | None = None) -> list:
        return [
            r for r in self.requests
            if isinstance(r, kind) and (broker_id is None or r.broker_id == broker_id)
        ]

    def leader_and_isr(self, broker_id: int) -> dict:
        out = {}
        for request in self.sent(LeaderAndIsrRequest, broker_id):
            out.update({(p.topic, p.partition): p for p in request.partition_states})
        return out

    def stop_replica(self, broker_id: int) -> dict:
        out = {}
        for request in self.sent(StopReplicaRequest, broker_id):
            out.update({(p.topic, p.partition): p for p in request.partitions})
        return out

    def check_invariants(self) -> None:
        """The store and the controller agree; leaders are in ISRs; one leader per epoch (in
        the store and in every LeaderAndIsr ever sent), epochs never go back; requests only
        to live brokers, at the current epochs."""
        ctx = self.ctx
        if not self.controller.active:
            return
        for tp, cached in ctx.leadership.items():
            stored = self.state(*tp)
            # a newer version was written by a leader itself (an ISR change): the controller
            # hears of it by notification, or meets it as a conflict on its next write
            assert stored.zk_version >= cached.zk_version, (tp, stored, cached)
            if stored.zk_version == cached.zk_version:
                assert stored == cached, (tp, stored, cached)
            assert stored.leader == NO_LEADER or stored.leader in stored.isr, stored
            assert set(stored.isr) <= set(ctx.replicas(tp)), (tp, stored)
            leaders = self.history.setdefault(tp, {})
            assert leaders.get(stored.leader_epoch, stored.leader) == stored.leader, (tp, leaders)
            assert stored.leader_epoch >= max(leaders, default=-1), (tp, leaders, stored)
            leaders[stored.leader_epoch] = stored.leader
        for request in self.requests:
            assert request.broker_id in self.live, request
            assert request.broker_epoch == self.live[request.broker_id].epoch
            assert request.controller_epoch == ctx.epoch
            if isinstance(request, LeaderAndIsrRequest):
                for p in request.partition_states:
                    assert p.leader == NO_LEADER or p.leader in p.isr, p
                    told = self.announced.setdefault((p.topic, p.partition), {})
                    assert told.setdefault(p.leader_epoch, p.leader) == p.leader, (p, told)
        for request in self.sent(UpdateMetadataRequest):
            assert {b.broker_id for b in request.live_brokers} == set(self.live)
