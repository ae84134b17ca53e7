"""`RequestBatch` at the scale of many partitions: one LeaderAndIsr, one UpdateMetadata and
one StopReplica per broker per controller event, carrying every partition of the event (as
Kafka's ``ControllerBrokerRequestBatch``), never one request per partition; two of the first
two where the event elects leaders and shrinks other ISRs, the elections' sent first."""

from __future__ import annotations

import uuid
from collections import Counter

from odradek.controller import events as ev
from odradek.controller.assignment import assign_replicas_rack_unaware
from odradek.controller.commands import (
    LeaderAndIsrRequest,
    SetZnode,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from odradek.controller.controller import Controller
from odradek.controller.snapshot import read_snapshot
from odradek.metadata import layout
from odradek.metadata.layout import PartitionState, TopicAssignment
from tests.controller.harness import BROKERS, Cluster

TOPICS, PARTITIONS, RF = 4, 25, 3


def requests_per_broker(requests, kind) -> Counter:
    return Counter(r.broker_id for r in requests if isinstance(r, kind))


def cluster_with_topics() -> Cluster:
    c = Cluster()
    for i in range(TOPICS):
        parts = assign_replicas_rack_unaware(PARTITIONS, RF, BROKERS, fixed_start_index=i)
        c.store.create(layout.topic_path(f"t{i}"),
                       TopicAssignment(f"t{i}", uuid.UUID(int=i + 1), parts).to_json())
    c.run(ev.TopicChange(tuple(c.read_topics())))
    return c


def test_a_topic_change_sends_one_request_of_each_kind_per_broker():
    c = cluster_with_topics()
    every = {(f"t{i}", p) for i in range(TOPICS) for p in range(PARTITIONS)}
    assert set(requests_per_broker(c.requests, LeaderAndIsrRequest).values()) == {1}
    assert set(requests_per_broker(c.requests, UpdateMetadataRequest).values()) == {1}
    assert set(requests_per_broker(c.requests, UpdateMetadataRequest)) == set(BROKERS)
    led = {(s.topic, s.partition) for r in c.sent(LeaderAndIsrRequest) for s in r.partition_states}
    assert led == every
    for request in c.sent(UpdateMetadataRequest):
        assert {(s.topic, s.partition) for s in request.partition_states} == every


def test_a_failover_and_a_broker_failure_batch_per_broker():
    c = cluster_with_topics()
    commands = c.controller.handle(ev.Startup(read_snapshot(c.store, 1000, c.broker_epochs())))
    c.requests = []
    c.execute(commands)
    assert set(requests_per_broker(c.requests, UpdateMetadataRequest).values()) == {1}
    assert len(c.sent(UpdateMetadataRequest)) == len(BROKERS)
    c.kill(1001)
    # the new leaders' requests, then the ISR shrinks' (`RequestBatch._elected_first`)
    assert set(requests_per_broker(c.requests, LeaderAndIsrRequest).values()) == {2}
    assert set(requests_per_broker(c.requests, UpdateMetadataRequest).values()) == {2}
    assert len(c.sent(UpdateMetadataRequest)) == 2 * (len(BROKERS) - 1)
    for broker in set(BROKERS) - {1001}:
        sent = [(s.topic, s.partition) for r in c.sent(LeaderAndIsrRequest, broker) for s in r.partition_states]
        assert len(sent) == len(set(sent))  # each partition once


def test_a_deletion_of_many_topics_sends_one_stop_replica_per_broker():
    c = cluster_with_topics()
    c.run(ev.TopicDeletion(tuple(f"t{i}" for i in range(TOPICS))))
    stops = requests_per_broker(c.requests, StopReplicaRequest)
    assert set(stops) == set(BROKERS) and set(stops.values()) == {1}
    replicas = sum(len(r.partitions) for r in c.sent(StopReplicaRequest))
    assert replicas == TOPICS * PARTITIONS * RF


def test_a_second_state_write_replaces_the_first_and_its_leader_and_isr():
    """`RequestBatch.add_state_write`: the second state, decided from the first's result, is
    written once at the first's expected version; a LeaderAndIsr queued with the first state
    (to a broker the second does not name) then carries the second."""
    c = cluster_with_topics()
    batch, tp = c.controller.batch, ("t0", 0)
    path = layout.partition_state_path(*tp)
    first = PartitionState(1000, 1, (1000, 1001), 1, 4)  # as written: from version 3 to 4
    second = PartitionState(1001, 2, (1001,), 1, 4)
    batch.add_state_write(SetZnode(path, 0, first.to_json(), 3, topic_partition=tp), first)
    batch.add_leader_and_isr([1002, 1003], tp, first, is_new=False)
    queued = batch.add_state_write(SetZnode(path, 0, second.to_json(), 4, topic_partition=tp), second)
    assert batch.writes == [queued] and queued.expected_version == 3
    entry = batch.leader_and_isr[1002][tp]
    assert (entry.leader, entry.leader_epoch, entry.isr, entry.zk_version) == (1001, 2, (1001,), 4)
    assert batch.leader_and_isr[1003][tp] is entry  # still one entry for both (SharedBodies)


def _entries_by_partition(requests) -> dict:
    out: dict = {}
    for r in requests:
        for s in r.partition_states:
            out.setdefault((s.topic, s.partition), []).append(s)
    return out


def test_the_brokers_of_one_event_share_their_leader_and_isr_entries():
    """One entry object per partition for all the brokers (`RequestBatch.add_leader_and_isr`,
    and `add_state_write`'s replacements in a failover): their requests compare equal by
    identity and `request_encoding.SharedBodies` encodes them once."""
    c = cluster_with_topics()
    created = _entries_by_partition(c.sent(LeaderAndIsrRequest))
    assert {len(e) for e in created.values()} == {RF}
    assert all(len({id(s) for s in e}) == 1 for e in created.values())
    commands = c.controller.handle(ev.Startup(read_snapshot(c.store, 1000, c.broker_epochs())))
    c.execute(commands)
    c.requests = []
    c.kill(1001)
    failover = _entries_by_partition(c.sent(LeaderAndIsrRequest))
    assert failover and {len(e) for e in failover.values()} == {RF - 1}  # its replicas left alive
    assert all(len({id(s) for s in e}) == 1 for e in failover.values())


def test_a_failover_writes_the_dead_brokers_new_leaders_before_the_isr_shrinks():
    """A new controller that finds a broker gone (here the old controller, fenced: its znode
    stays) takes it out of every ISR, then elects leaders where it led. Those partitions are
    unavailable until their elections land; the others only lose an ISR member: the elections
    are written first, whatever the partitions' order (`RequestBatch._ordered_writes`)."""
    c = cluster_with_topics()
    every = [(f"t{i}", p) for i in range(TOPICS) for p in range(PARTITIONS)]
    led = {tp for tp in every if c.state(*tp).leader == 1000}
    followed = {tp for tp in every if 1000 in c.state(*tp).isr} - led
    assert led and followed
    c.run(ev.Resign())
    dead = c.live.pop(1000)
    data, version = c.store.get(layout.CONTROLLER_EPOCH)
    c.store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(2), version)
    c.controller = Controller(1001)
    snapshot = read_snapshot(c.store, 1001, {**c.broker_epochs(), 1000: dead.epoch}, False, {1000: dead.epoch})
    commands = c.run(ev.Startup(snapshot))
    written = [w.topic_partition for w in commands if isinstance(w, SetZnode)]
    assert set(written[:len(led)]) == led and set(written[len(led):]) == followed
    # and the new leaders are told before the shrinks are written, not after them all
    first_shrink = next(i for i, w in enumerate(commands) if isinstance(w, SetZnode) and w.topic_partition in followed)
    told = {(s.topic, s.partition) for r in commands[:first_shrink] if isinstance(r, LeaderAndIsrRequest)
            for s in r.partition_states}
    assert told == led
    metadata = {(s.topic, s.partition) for r in commands[:first_shrink] if isinstance(r, UpdateMetadataRequest)
                for s in r.partition_states}
    assert metadata == led
    assert all(c.state(*tp).leader not in (1000, layout.NO_LEADER) for tp in led)
    assert all(1000 not in c.state(*tp).isr for tp in followed)
