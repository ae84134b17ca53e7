"""The KIP-848 member's asyncio edge (client/consumer_group_membership.py) against a scripted
coordinator (tests/client/fake_broker.py): the order of commit, revocation and assignment, the
acknowledgement, fencing, leaving, commits carrying the member epoch, coordinator moves."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.client import AsyncConsumer, CommitFailedError, TopicPartition
from odradek.client.cluster import ClusterClient
from odradek.client.consumer_group_membership import ConsumerGroupMembership
from odradek.client.coordinator import GroupCoordinatorClient
from odradek.client.errors import BrokerError, UnsupportedVersionError
from odradek.client.member_config import MembershipConfig
from odradek.client.topic_filter import TopicList, Whitelist
from odradek.protocol.api_keys import SUPPORTED
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.consumer_group_heartbeat_response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.find_coordinator_response import (
    Coordinator,
    FindCoordinatorResponse,
)
from odradek.protocol.generated.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

from .fake_broker import TOPIC_IDS, FakeBroker, metadata_response
from .helpers import run

VERSIONS = {**SUPPORTED, ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1)}


class Coordinator848:
    """A scripted coordinator: ``answers`` is a list of callables ``(request) -> response``
    taken in order for the heartbeats; then every heartbeat gets the last epoch, no change."""

    def __init__(self, topics: dict[str, list[int]], answers: list, commit_codes=()) -> None:
        self.topics = topics
        self.answers = list(answers)
        self.commit_codes = list(commit_codes)
        self.heartbeats: list = []
        self.commits: list = []
        self.events: list = []  # shared with the member's seams and listener
        self.epoch = 0
        self.broker: FakeBroker | None = None

    async def start(self) -> Coordinator848:
        self.broker = await FakeBroker(1, self.handle, VERSIONS).start()
        return self

    def handle(self, fake, header, body):
        key = header.request_api_key
        if key == ApiKey.METADATA:
            return metadata_response([fake], {t: leaders for t, leaders in self.topics.items()})
        if key == ApiKey.FIND_COORDINATOR:
            return FindCoordinatorResponse(node_id=1, host="127.0.0.1", port=fake.port, coordinators=[
                Coordinator(body.coordinator_keys[0], 1, "127.0.0.1", fake.port)] if header.request_api_version >= 4 else [])
        if key == ApiKey.OFFSET_COMMIT:
            self.commits.append(body)
            code = self.commit_codes.pop(0) if self.commit_codes else 0
            self.events.append(("commit", body.generation_id_or_member_epoch, code))
            return OffsetCommitResponse(topics=[OffsetCommitResponseTopic(t.name, [
                OffsetCommitResponsePartition(p.partition_index, code) for p in t.partitions]) for t in body.topics])
        if key == ApiKey.CONSUMER_GROUP_HEARTBEAT:
            self.heartbeats.append(body)
            response = self.answers.pop(0)(body) if self.answers else hb(self.epoch)
            if response.error_code == 0 and body.member_epoch >= 0:
                self.epoch = response.member_epoch
            return response
        raise AssertionError(f"unexpected API {key}")


def hb(epoch: int, assignment: dict | None = None, code: int = 0):
    if code:
        return ConsumerGroupHeartbeatResponse(error_code=code)
    return ConsumerGroupHeartbeatResponse(
        member_epoch=epoch, heartbeat_interval_ms=20, assignment=None if assignment is None else Assignment(
            [TopicPartitions(TOPIC_IDS.setdefault(t, uuid.uuid4()), ps) for t, ps in assignment.items()]))


class Listener:
    def __init__(self, events: list) -> None:
        self.events = events

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", sorted(revoked)))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", sorted(assigned)))

    def on_partitions_lost(self, lost):
        self.events.append(("lost", sorted(lost)))


async def member(coordinator: Coordinator848, topic_filter=None, **config):
    cluster = ClusterClient(coordinator.broker.bootstrap, retry_backoff_ms=10)
    await cluster.start()
    assigned: set = set()

    def assign(partitions):
        assigned.clear()
        assigned.update(partitions)

    membership = ConsumerGroupMembership(
        GroupCoordinatorClient(cluster, "g"), MembershipConfig(**config), assign=assign,
        consumed=lambda: {tp: 7 for tp in assigned}, wake=lambda: None)
    membership.subscribe(topic_filter or TopicList(["t", "u"]), Listener(coordinator.events))
    return cluster, membership


async def poll_until(membership, condition, limit: float = 10.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not condition():
        assert loop.time() < deadline, "condition not reached"
        await membership.poll(loop.time())
        await asyncio.sleep(0.005)


def tps(*pairs):
    return [TopicPartition(t, p) for t, p in pairs]


def test_assignment_revokes_first_commits_and_acknowledges_then_fencing_rejoins_and_close_leaves():
    async def main():
        c = await Coordinator848({"t": [1, 1, 1], "u": [1]}, [
            lambda r: hb(1, {"t": [0, 1, 2]}),
            lambda r: hb(2, {"t": [0], "u": [0]}),
        ]).start()
        cluster, m = await member(c)
        try:
            await poll_until(m, lambda: len(c.heartbeats) >= 2 and c.heartbeats[-1].topic_partitions)
            assert c.events == [("assigned", tps(("t", 0), ("t", 1), ("t", 2)))]
            join, ack = c.heartbeats[0], c.heartbeats[1]
            assert (join.member_epoch, join.subscribed_topic_names, join.topic_partitions) == (0, ["t", "u"], [])
            assert len(join.member_id) == 22 and ack.member_id == join.member_id
            assert [(tp.topic_id, tp.partitions) for tp in ack.topic_partitions] == [(TOPIC_IDS["t"], [0, 1, 2])]
            c.events.clear()
            await poll_until(m, lambda: m.assigned == frozenset(tps(("t", 0), ("u", 0)))
                             and m.heartbeat.state == "STABLE")
            # Commit (auto commit) before the revocation, then revoked, then the added ones.
            assert c.events == [("commit", 2, 0), ("revoked", tps(("t", 1), ("t", 2))),
                                ("assigned", tps(("u", 0)))]
            owned = {(tp.topic_id, tuple(tp.partitions)) for tp in c.heartbeats[-1].topic_partitions}
            assert owned == {(TOPIC_IDS["t"], (0,)), (TOPIC_IDS["u"], (0,))}
            # Fenced: everything lost (no commit), rejoin at epoch 0 with the same member id.
            c.events.clear()
            c.answers = [lambda r: hb(0, code=ErrorCode.FENCED_MEMBER_EPOCH), lambda r: hb(5, {"t": [2]})]
            await poll_until(m, lambda: m.assigned == frozenset(tps(("t", 2))))
            assert c.events == [("lost", tps(("t", 0), ("u", 0))), ("assigned", tps(("t", 2)))]
            rejoin = next(r for r in c.heartbeats if r.member_epoch == 0 and r is not join)
            assert (rejoin.member_id, rejoin.topic_partitions) == (join.member_id, [])
            c.events.clear()
            await m.close()
            assert c.events == [("commit", 5, 0), ("revoked", tps(("t", 2)))]
            assert (c.heartbeats[-1].member_epoch, c.heartbeats[-1].member_id) == (-1, join.member_id)
        finally:
            await m.close()
            await cluster.close()
            await c.broker.close()

    run(main())


def test_a_static_member_leaves_with_epoch_minus_2():
    async def main():
        c = await Coordinator848({"t": [1]}, [lambda r: hb(1, {"t": [0]})]).start()
        cluster, m = await member(c, TopicList(["t"]), group_instance_id="i-1")
        try:
            await poll_until(m, lambda: m.assigned)
            await m.close()
            assert (c.heartbeats[0].instance_id, c.heartbeats[-1].member_epoch) == ("i-1", -2)
        finally:
            await cluster.close()
            await c.broker.close()

    run(main())


def test_commits_carry_the_epoch_and_a_refused_one_raises_commit_failed():
    async def main():
        c = await Coordinator848({"t": [1]}, [lambda r: hb(4, {"t": [0]})],
                                 commit_codes=[0, ErrorCode.STALE_MEMBER_EPOCH]).start()
        cluster, m = await member(c, TopicList(["t"]), enable_auto_commit=False)
        try:
            with pytest.raises(CommitFailedError):  # not a member yet
                await m.commit({TopicPartition("t", 0): 1})
            await poll_until(m, lambda: m.assigned)
            await m.commit({TopicPartition("t", 0): 1})
            assert (c.commits[0].generation_id_or_member_epoch, c.commits[0].member_id) == (4, m.heartbeat.member_id)
            with pytest.raises(CommitFailedError):
                await m.commit({TopicPartition("t", 0): 2})
        finally:
            await m.close()
            await cluster.close()
            await c.broker.close()

    run(main())


def test_the_commit_before_a_revocation_retries_a_stale_member_epoch():
    async def main():
        c = await Coordinator848({"t": [1, 1]}, [lambda r: hb(1, {"t": [0, 1]}), lambda r: hb(1),
                                                 lambda r: hb(2, {"t": [0]})],
                                 commit_codes=[ErrorCode.STALE_MEMBER_EPOCH]).start()
        cluster, m = await member(c, TopicList(["t"]))
        try:
            await poll_until(m, lambda: m.assigned == frozenset(tps(("t", 0))))
            assert [e for e in c.events if e[0] in ("commit", "revoked")] == [
                ("commit", 2, ErrorCode.STALE_MEMBER_EPOCH), ("commit", 2, 0), ("revoked", tps(("t", 1)))]
        finally:
            await m.close()
            await cluster.close()
            await c.broker.close()

    run(main())


def test_coordinator_moves_are_followed_and_the_next_heartbeat_is_full():
    async def main():
        c = await Coordinator848({"t": [1]}, [
            lambda r: hb(1, {"t": [0]}), lambda r: hb(1),
            lambda r: hb(0, code=ErrorCode.NOT_COORDINATOR),
            lambda r: hb(0, code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        ]).start()
        cluster, m = await member(c, TopicList(["t"]))
        try:
            await poll_until(m, lambda: len(c.heartbeats) >= 6)
            finds = [b for h, b in c.broker.requests if h.request_api_key == ApiKey.FIND_COORDINATOR]
            assert len(finds) >= 2  # found again after NOT_COORDINATOR
            after = c.heartbeats[4]
            assert after.subscribed_topic_names == ["t"] and after.rebalance_timeout_ms == 300_000
            assert [(tp.topic_id, tp.partitions) for tp in after.topic_partitions] == [(TOPIC_IDS["t"], [0])]
            assert m.assigned == frozenset(tps(("t", 0))) and not c.events.count(("lost", tps(("t", 0))))
        finally:
            await m.close()
            await cluster.close()
            await c.broker.close()

    run(main())


def test_a_regex_subscription_resolves_assigned_topic_ids_through_the_metadata():
    async def main():
        c = await Coordinator848({"t": [1]}, []).start()
        c.answers = [lambda r: hb(1, {"later": [0]})]
        cluster, m = await member(c, Whitelist("la.*"))
        try:
            c.topics["later"] = [1]  # created after the member's first metadata
            await poll_until(m, lambda: m.assigned)
            assert m.assigned == frozenset(tps(("later", 0))) and m.topics == {"later"}
            assert (c.heartbeats[0].subscribed_topic_regex, c.heartbeats[0].subscribed_topic_names) == ("la.*", None)
        finally:
            await m.close()
            await cluster.close()
            await c.broker.close()

    run(main())


@pytest.mark.parametrize("code", [ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.UNSUPPORTED_ASSIGNOR])
def test_a_fatal_error_is_raised_by_poll(code):
    async def main():
        c = await Coordinator848({"t": [1]}, [lambda r: hb(0, code=code)]).start()
        cluster, m = await member(c, TopicList(["t"]))
        try:
            with pytest.raises(BrokerError) as raised:
                await poll_until(m, lambda: False)
            assert raised.value.code == code
        finally:
            await m.close()
            await cluster.close()
            await c.broker.close()

    run(main())


def test_a_broker_without_the_protocol_says_to_use_classic():
    async def main():
        classic_only = {k: v for k, v in SUPPORTED.items()
                        if k not in (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)}
        broker = await FakeBroker(1, Coordinator848({"t": [1]}, []).handle, classic_only).start()
        consumer = AsyncConsumer(broker.bootstrap, group_id="g", group_protocol="CONSUMER")
        await consumer.start()
        try:
            consumer.subscribe(["t"])
            with pytest.raises(UnsupportedVersionError, match="group_protocol='classic'"):
                for _ in range(200):
                    await consumer.poll(50)
        finally:
            await consumer.close()
            await broker.close()

    run(main())


def test_group_protocol_names():
    with pytest.raises(ValueError, match="group_protocol"):
        AsyncConsumer("127.0.0.1:1", group_id="g", group_protocol="eager")
    with pytest.raises(ValueError, match="group_remote_assignor"):
        AsyncConsumer("127.0.0.1:1", group_id="g", group_remote_assignor="uniform")
