"""``TransactionMarkerChannel.write_markers``' rounds, with the wire replaced by a script:
grouping per leader, retries, partitions that are gone, fencing, and stopping."""

from __future__ import annotations

import asyncio
import uuid

from odradek.coordinator.transaction.marker_channel import TransactionMarkerChannel
from odradek.metadata.image import MetadataImage
from odradek.metadata.layout import PartitionState, TopicAssignment
from odradek.protocol.generated.error_codes import ErrorCode as E


class FakeBroker:
    broker_id = 1

    def __init__(self, leaders: dict) -> None:
        self.leaders = leaders  # (topic, partition) -> leader

    def metadata_image(self) -> MetadataImage:
        topics, states = {}, {}
        for (t, p), leader in self.leaders.items():
            n = max(q for (u, q) in self.leaders if u == t) + 1
            topics[t] = TopicAssignment(t, uuid.uuid5(uuid.NAMESPACE_DNS, t), {i: (1, 2) for i in range(n)})
            states.setdefault(t, {})[p] = PartitionState(leader, 0, (1, 2), 1)
        return MetadataImage(topics=topics, partition_states=states)


class ScriptedChannel(TransactionMarkerChannel):
    """Answers from ``script[(leader, tp)]``: a list of errors, one per attempt (the last repeats)."""

    def __init__(self, broker, script) -> None:
        super().__init__(broker, retry_backoff_s=0.001)
        self.script = script
        self.sent: list[tuple[int, list]] = []

    async def _send(self, leader, producer_id, producer_epoch, commit, coordinator_epoch, tps):
        self.sent.append((leader, sorted(tps)))
        out = {}
        for tp in tps:
            answers = self.script.get((leader, tp), [E.NONE])
            out[tp] = answers.pop(0) if len(answers) > 1 else answers[0]
        return out


def run(channel, partitions, still_valid=lambda: True):
    done = []
    ok = asyncio.run(channel.write_markers(7, 0, True, 3, partitions, still_valid, done.append))
    return ok, done


def test_one_request_per_leader_per_round_and_retries_until_done():
    broker = FakeBroker({("a", 0): 1, ("a", 1): 2, ("b", 0): 1})
    channel = ScriptedChannel(broker, {(2, ("a", 1)): [E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS, E.NONE]})
    ok, done = run(channel, {("a", 0), ("a", 1), ("b", 0)})
    assert ok and sorted(done) == [("a", 0), ("a", 1), ("b", 0)]
    assert channel.sent[:2] == [(1, [("a", 0), ("b", 0)]), (2, [("a", 1)])]
    assert channel.sent[2:] == [(2, [("a", 1)]), (2, [("a", 1)])]


def test_the_leader_is_looked_up_again_each_round():
    broker = FakeBroker({("a", 0): 1})
    channel = ScriptedChannel(broker, {(1, ("a", 0)): [E.NOT_LEADER_OR_FOLLOWER]})
    original = channel._send

    async def moving(leader, *args):
        broker.leaders[("a", 0)] = 3  # the leadership moved after the first answer
        return await original(leader, *args)

    channel._send = moving
    ok, _ = run(channel, {("a", 0)})
    assert ok and [leader for leader, _ in channel.sent] == [1, 3]


def test_deleted_partitions_need_no_marker_and_an_older_epoch_is_counted_written():
    broker = FakeBroker({("a", 0): 1})
    channel = ScriptedChannel(broker, {(1, ("a", 0)): [E.INVALID_PRODUCER_EPOCH]})
    ok, done = run(channel, {("a", 0), ("gone", 0), ("a", 9)})
    assert ok and sorted(done) == [("a", 0), ("a", 9), ("gone", 0)]
    assert channel.sent == [(1, [("a", 0)])]


def test_a_fenced_coordinator_stops():
    broker = FakeBroker({("a", 0): 1, ("a", 1): 1})
    channel = ScriptedChannel(broker, {(1, ("a", 1)): [E.TRANSACTION_COORDINATOR_FENCED]})
    ok, _ = run(channel, {("a", 0), ("a", 1)})
    assert not ok


def test_stops_once_no_longer_valid_or_closed():
    broker = FakeBroker({("a", 0): 1})
    channel = ScriptedChannel(broker, {(1, ("a", 0)): [E.NOT_LEADER_OR_FOLLOWER]})
    rounds = iter([True, True, False])
    ok, done = run(channel, {("a", 0)}, still_valid=lambda: next(rounds))
    assert not ok and done == [] and len(channel.sent) == 2
    channel.close()
    assert run(channel, {("a", 0)}) == (False, [])
