"""The group consumer: assignors, topic filters, and members of a group on a real broker
(rebalances on join, leave and session expiry, pattern subscriptions, commits, callbacks,
static membership, a kafka-python member in the same group)."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolSubscription as KpSubscription,
)

from odradek.client import (
    AsyncAdminClient,
    AsyncConsumer,
    AsyncProducer,
    Blacklist,
    BrokerError,
    CommitFailedError,
    Consumer,
    ConsumerRebalanceListener,
    KafkaError,
    TopicPartition,
    Whitelist,
)
from odradek.client.assignors import (
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    assignor_for,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from odradek.client.metadata import ClusterMetadata, TopicInfo
from odradek.client.topic_filter import topic_filter
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import InProcessBroker

from .helpers import create_topic, run


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # Short sessions allowed, so a killed member is noticed within a test.
    with InProcessBroker(tmp_path_factory.mktemp("groups") / "data", group_initial_rebalance_delay_ms=0,
                         group_min_session_timeout_ms=100) as b:
        yield b


def tps(topic, *partitions):
    return {TopicPartition(topic, p) for p in partitions}


# --- assignors --------------------------------------------------------------------------------
def sub(member_id, *topics, instance=None):
    return MemberSubscription(member_id, instance, tuple(topics))


def test_range_gives_each_member_a_contiguous_run_per_topic():
    got = RangeAssignor().assign({"t0": 3, "t1": 3}, {"C1": sub("C1", "t0", "t1"), "C0": sub("C0", "t0", "t1")})
    assert got == {"C0": [TopicPartition("t0", 0), TopicPartition("t0", 1), TopicPartition("t1", 0), TopicPartition("t1", 1)],
                   "C1": [TopicPartition("t0", 2), TopicPartition("t1", 2)]}


def test_roundrobin_deals_partitions_skipping_members_not_subscribed():
    members = {"C0": sub("C0", "t0"), "C1": sub("C1", "t0", "t1"), "C2": sub("C2", "t0", "t1", "t2")}
    got = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, members)
    assert {m: set(ps) for m, ps in got.items()} == {
        "C0": tps("t0", 0), "C1": tps("t1", 0), "C2": tps("t1", 1) | tps("t2", 0, 1, 2)}


def test_static_members_come_first_and_topics_without_metadata_are_skipped():
    members = {"a": sub("a", "t", "gone"), "z": sub("z", "t", instance="i-2"), "b": sub("b", "t", instance="i-1")}
    got = RangeAssignor().assign({"t": 3}, members)
    assert got == {"b": [TopicPartition("t", 0)], "z": [TopicPartition("t", 1)], "a": [TopicPartition("t", 2)]}
    assert RoundRobinAssignor().assign({}, members) == {"a": [], "z": [], "b": []}


class _KpMember:
    def __init__(self, member_id, topics):
        self.member_id, self.group_instance_id = member_id, None
        self.metadata = KpSubscription(version=0, topics=list(topics), user_data=b"")


class _KpCluster:
    def __init__(self, counts):
        self.counts = counts

    def partitions_for_topic(self, topic):
        n = self.counts.get(topic)
        return None if n is None else set(range(n))


@settings(max_examples=60, deadline=None)
@given(counts=st.dictionaries(st.sampled_from("abcde"), st.integers(1, 9), min_size=1),
       members=st.lists(st.sets(st.sampled_from("abcdef"), min_size=1), min_size=1, max_size=6))
def test_assignors_agree_with_kafka_python(counts, members):
    """kafka-python's assignors implement the same Java algorithms: same answers. (Its
    roundrobin fails when it has to skip a member, so it is compared on equal subscriptions.)"""
    ours = {f"m{i}": sub(f"m{i}", *sorted(topics)) for i, topics in enumerate(members)}
    same = {m: sub(m, *sorted(counts)) for m in ours}
    for mine, other, subs in ((RangeAssignor(), RangePartitionAssignor, ours),
                              (RoundRobinAssignor(), RoundRobinPartitionAssignor, same)):
        theirs = [_KpMember(m.member_id, m.topics) for m in subs.values()]
        expected = {m: {TopicPartition(t, p) for t, ps in a.assigned_partitions for p in ps}
                    for m, a in other.assign(_KpCluster(counts), theirs).items()}
        got = mine.assign(counts, subs)
        assert {m: set(ps) for m, ps in got.items()} == expected


def test_assignor_for_names_classes_and_objects():
    assert assignor_for("range").name == "range"
    assert assignor_for(RoundRobinAssignor).name == "roundrobin"
    with pytest.raises(ValueError, match="unknown partition assignor"):
        assignor_for("sticky")
    with pytest.raises(TypeError):
        assignor_for(object())


# --- consumer protocol bytes --------------------------------------------------------------------
def test_subscription_and_assignment_round_trip_with_a_leading_version():
    data = encode_subscription(["b", "a"], user_data=b"u", owned_partitions=[("a", 1)], generation_id=4, rack_id="r")
    assert data[:2] == b"\x00\x03"  # the newest version, as Kafka's Java client writes
    s = decode_subscription("m", "i", data)
    assert (s.topics, s.user_data, s.owned_partitions, s.generation_id, s.rack_id) == (("a", "b"), b"u", (TopicPartition("a", 1),), 4, "r")
    v0 = encode_subscription(["t"], version=0)
    assert v0 == b"\x00\x00" + b"\x00\x00\x00\x01\x00\x01t" + b"\xff\xff\xff\xff"
    assert decode_subscription("m", None, v0).topics == ("t",)
    assignment = encode_assignment([TopicPartition("t", 2), ("t", 1), ("s", 0)])
    assert decode_assignment(assignment) == [TopicPartition("s", 0), TopicPartition("t", 1), TopicPartition("t", 2)]
    assert decode_assignment(b"") == []


def test_newer_versions_decode_and_garbage_is_a_clear_error():
    future = b"\x00\x09" + encode_subscription(["t"])[2:] + b"more fields"
    assert decode_subscription("m", None, future).topics == ("t",)
    for garbage in (b"\x00", b"\xff\xff\x00\x00\x00\x01", b"\x00\x00\x7f\xff\xff\xff"):
        with pytest.raises(KafkaError):
            decode_subscription("m", None, garbage)
        with pytest.raises(KafkaError):
            decode_assignment(garbage)


# --- topic filters ------------------------------------------------------------------------------
def test_whitelist_and_blacklist_like_kafka_topic_filters():
    meta = ClusterMetadata(topics={n: TopicInfo(n, is_internal=n.startswith("__"))
                                   for n in ("orders", "orders-eu", "audit", "__consumer_offsets")})
    assert Whitelist("orders.*").matching(meta) == {"orders", "orders-eu"}
    assert Whitelist(" 'orders, audit' ").matching(meta) == {"orders", "audit"}  # commas: alternatives
    assert Whitelist("o.{5}").matching(meta) == {"orders"}  # whole-name match
    assert Blacklist("orders.*").matching(meta) == {"audit"}  # internal topics left out
    assert Blacklist("orders.*", exclude_internal_topics=False).matching(meta) == {"audit", "__consumer_offsets"}
    assert Whitelist("x{1,2}").is_topic_allowed("xx")  # a quantifier keeps its comma
    with pytest.raises(ValueError, match="invalid topic pattern"):
        Whitelist("(")
    for args in ({}, {"topics": ["a"], "pattern": "b"}, {"topics": []}, {"topics": [""]}):
        with pytest.raises(ValueError):
            topic_filter(**args)
    assert topic_filter(topics="one").topics == {"one"}


# --- on a broker --------------------------------------------------------------------------------
def member(bootstrap, group, **config):
    config = {"auto_offset_reset": "earliest", "heartbeat_interval_ms": 100, "session_timeout_ms": 10_000,
              "metadata_max_age_ms": 1_000, **config}
    return AsyncConsumer(bootstrap, group_id=group, **config)


async def produce(bootstrap, topic, count, partition=None):
    async with AsyncProducer(bootstrap, linger_ms=1) as producer:
        for i in range(count):
            producer.send(topic, f"v{i}".encode(), key=f"k{i}".encode(), partition=partition)
        await producer.flush()


async def poll_rounds(consumers, seen, rounds):
    """Poll every consumer concurrently ``rounds`` times, collecting ``(consumer index,
    TopicPartition, record)`` into ``seen``."""
    for _ in range(rounds):
        if not consumers:
            await asyncio.sleep(0.05)
        polled = await asyncio.gather(*(c.poll(50) for c in consumers))
        for i, batch in enumerate(polled):
            for tp, records in batch.items():
                seen.extend((i, tp, r) for r in records)
    return seen


async def poll_until(consumers, done, seen=None, rounds=400):
    """``poll_rounds`` until ``done()`` (an AssertionError after ``rounds`` rounds)."""
    seen = [] if seen is None else seen
    for _ in range(rounds):
        if done():
            return seen
        await poll_rounds(consumers, seen, 1)
    raise AssertionError("condition not reached")


def partitioned(consumers, everything):
    assignments = [c.assignment() for c in consumers]
    return (all(assignments) and set().union(*assignments) == everything
            and sum(map(len, assignments)) == len(everything))


class Recorder(ConsumerRebalanceListener):
    def __init__(self):
        self.events = []

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", revoked))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", assigned))

    def check(self):
        """Assigned first; then each revoke gives back exactly what was last assigned."""
        owned = None
        for event, partitions in self.events:
            if event == "revoked":
                assert partitions == owned
                owned = None
            else:
                assert owned is None
                owned = partitions


def test_three_members_split_six_partitions_and_read_each_record_once(broker, topic_name):
    group, everything = "three-" + topic_name, tps(topic_name, *range(6))

    async def main():
        await create_topic(broker.bootstrap, topic_name, 6)
        consumers = [await member(broker.bootstrap, group).start() for _ in range(3)]
        try:
            for c in consumers:
                c.subscribe([topic_name])
            await poll_until(consumers, lambda: partitioned(consumers, everything))
            assert [len(c.assignment()) for c in consumers] == [2, 2, 2]
            await produce(broker.bootstrap, topic_name, 300)
            seen = await poll_until(consumers, lambda: len(seen) >= 300, seen := [])
            await poll_rounds(consumers, seen, 3)  # nothing more comes
            assert len(seen) == 300
            assert len({(tp, r.offset) for _, tp, r in seen}) == 300
            assert all(tp in consumers[i].assignment() for i, tp, _ in seen)
            assert {c.subscription().pop() for c in consumers} == {topic_name}
        finally:
            for c in consumers:
                await c.close()

    run(main(), 60)


def test_a_member_that_leaves_is_replaced_at_once_and_callbacks_name_the_partitions(broker, topic_name):
    group, everything = "leave-" + topic_name, tps(topic_name, *range(6))

    async def main():
        await create_topic(broker.bootstrap, topic_name, 6)
        listeners = [Recorder() for _ in range(3)]
        consumers = [await member(broker.bootstrap, group, session_timeout_ms=60_000).start() for _ in range(3)]
        for c, listener in zip(consumers, listeners):
            c.subscribe([topic_name], listener=listener)
        await poll_until(consumers, lambda: partitioned(consumers, everything))
        before = [c.assignment() for c in consumers]
        for listener, mine in zip(listeners, before):
            assert listener.events[0][0] == "assigned" and listener.events[-1] == ("assigned", mine)
            listener.check()
        leaving = consumers.pop()
        await leaving.close()
        assert listeners[2].events[-1] == ("revoked", before[2])
        async with AsyncAdminClient(broker.bootstrap) as admin:
            # LeaveGroup took it out at once: no waiting for its 60 s session to end.
            assert len((await admin.describe_groups([group]))[group].members) == 2
        await poll_until(consumers, lambda: partitioned(consumers, everything))
        for listener, old, c in zip(listeners, before, consumers):
            assert ("revoked", old) in listener.events
            assert listener.events[-1] == ("assigned", c.assignment())
            listener.check()
        for c in consumers:
            await c.close()

    run(main(), 60)


_VICTIM = """
import asyncio, sys
from odradek.client import AsyncConsumer
async def main():
    async with AsyncConsumer(sys.argv[1], group_id=sys.argv[2], session_timeout_ms=1000,
                             heartbeat_interval_ms=100) as c:
        c.subscribe([sys.argv[3]])
        while not c.assignment():
            await c.poll(100)
        print("joined", flush=True)
        while True:
            await c.poll(100)
asyncio.run(main())
"""


def test_nothing_is_read_between_revoking_and_the_next_assignment(broker, topic_name):
    group, everything = "between-" + topic_name, tps(topic_name, *range(4))

    async def main():
        await create_topic(broker.bootstrap, topic_name, 4)
        await produce(broker.bootstrap, topic_name, 40)
        listener = Recorder()
        first, second = [await member(broker.bootstrap, group, max_poll_records=1).start() for _ in range(2)]
        first.subscribe([topic_name], listener=listener)
        await poll_until([first], lambda: first.assignment() == everything)
        second.subscribe([topic_name])
        between = []
        for _ in range(400):
            if partitioned([first, second], everything):
                break
            polled = await first.poll(0)  # never waits for the join to end
            if listener.events[-1][0] == "revoked":
                between.append((first.assignment(), polled))
            await second.poll(20)
        assert partitioned([first, second], everything)
        assert between and all(b == (set(), {}) for b in between)
        listener.check()
        await first.close()
        await second.close()

    run(main(), 60)


def test_a_killed_member_is_replaced_when_its_session_times_out(broker, topic_name):
    group, everything = "kill-" + topic_name, tps(topic_name, *range(4))

    async def main():
        await create_topic(broker.bootstrap, topic_name, 4)
        survivor = await member(broker.bootstrap, group).start()
        survivor.subscribe([topic_name])
        await poll_until([survivor], lambda: survivor.assignment() == everything)
        victim = await asyncio.create_subprocess_exec(sys.executable, "-c", _VICTIM, broker.bootstrap, group,
                                                      topic_name, stdout=asyncio.subprocess.PIPE)
        try:
            line = asyncio.ensure_future(victim.stdout.readline())
            await poll_until([survivor], line.done)
            assert line.result() == b"joined\n"
            await poll_until([survivor], lambda: len(survivor.assignment()) == 2)
            victim.send_signal(signal.SIGKILL)  # no LeaveGroup: only its session can end it
            await victim.wait()
            await poll_until([survivor], lambda: survivor.assignment() == everything)
        finally:
            if victim.returncode is None:
                victim.kill()
                await victim.wait()
            await survivor.close()

    run(main(), 60)


def test_a_pattern_subscription_picks_up_new_matching_topics(broker, topic_name):
    group, first, second = "re-" + topic_name, topic_name + "-a", topic_name + "-b"

    async def main():
        await create_topic(broker.bootstrap, first, 2)
        await create_topic(broker.bootstrap, "other-" + topic_name, 1)
        await produce(broker.bootstrap, first, 5)
        consumer = await member(broker.bootstrap, group, metadata_max_age_ms=200).start()
        consumer.subscribe(pattern=topic_name.replace("-", r"\-") + "-.*")
        seen = await poll_until([consumer], lambda: len(seen) >= 5, seen := [])
        assert consumer.subscription() == {first}
        await create_topic(broker.bootstrap, second, 3)
        await produce(broker.bootstrap, second, 7)
        await poll_until([consumer], lambda: sum(tp.topic == second for _, tp, _ in seen) >= 7, seen)
        assert consumer.subscription() == {first, second}
        assert consumer.assignment() == tps(first, 0, 1) | tps(second, 0, 1, 2)
        assert {tp.topic for _, tp, _ in seen} == {first, second}
        await consumer.close()

    run(main(), 60)


def test_auto_commit_resumes_after_a_restart(broker, topic_name):
    group = "auto-" + topic_name

    async def main():
        await create_topic(broker.bootstrap, topic_name, 3)
        await produce(broker.bootstrap, topic_name, 30)

    run(main())
    # The synchronous consumer, iterating: what it did not hand out is not committed.
    with Consumer(broker.bootstrap, group_id=group, auto_offset_reset="earliest", heartbeat_interval_ms=100,
                  max_poll_records=20) as consumer:
        consumer.subscribe([topic_name])
        first = [next(consumer) for _ in range(12)]
    with Consumer(broker.bootstrap, group_id=group, auto_offset_reset="earliest", heartbeat_interval_ms=100) as consumer:
        consumer.subscribe(topic_name)
        rest = []
        for _ in range(100):
            rest.extend(r for batch in consumer.poll(100).values() for r in batch)
            if len(rest) >= 18:
                break
        assert consumer.poll(300) == {}
    keys = [r.key for r in first + rest]
    assert sorted(keys) == sorted(f"k{i}".encode() for i in range(30))


def test_manual_commit_resumes_where_committed(broker, topic_name):
    group, tp = "manual-" + topic_name, TopicPartition(topic_name, 0)

    async def main():
        await create_topic(broker.bootstrap, topic_name, 1)
        await produce(broker.bootstrap, topic_name, 10)
        async with member(broker.bootstrap, group, enable_auto_commit=False, max_poll_records=4) as consumer:
            consumer.subscribe([topic_name])
            seen = await poll_until([consumer], lambda: seen, seen := [])
            await consumer.commit()  # what was handed out
            assert (await consumer.committed(tp)).offset == seen[-1][2].offset + 1 == 4
            await consumer.commit({tp: 7})
            await consumer.poll(100)  # closing does not commit without enable_auto_commit
        async with member(broker.bootstrap, group, enable_auto_commit=False) as consumer:
            consumer.subscribe([topic_name])
            seen = await poll_until([consumer], lambda: len(seen) >= 3, seen := [])
            assert [r.offset for _, _, r in seen] == [7, 8, 9]

    run(main(), 60)


def test_sync_listener_runs_in_the_polling_thread_and_may_call_the_consumer(broker, topic_name):
    group = "sync-" + topic_name
    run(create_topic(broker.bootstrap, topic_name, 2))
    run(produce(broker.bootstrap, topic_name, 4, partition=0))
    run(produce(broker.bootstrap, topic_name, 6, partition=1))
    calls = []

    class SkipSome(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned):
            calls.append((threading.current_thread() is threading.main_thread(), assigned))
            consumer.seek(TopicPartition(topic_name, 1), 3)  # a call back into the consumer

    with Consumer(broker.bootstrap, group_id=group, auto_offset_reset="earliest", heartbeat_interval_ms=100) as consumer:
        consumer.subscribe([topic_name], listener=SkipSome())
        got = []
        while len(got) < 7:
            got.extend((tp.partition, r.offset) for tp, batch in consumer.poll(200).items() for r in batch)
        assert calls == [(True, tps(topic_name, 0, 1))]
        assert sorted(got) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 3), (1, 4), (1, 5)]
        assert consumer.poll(200) == {}


def test_sync_members_polled_in_turn_by_one_thread_still_meet(broker, topic_name):
    group, everything = "turns-" + topic_name, tps(topic_name, *range(4))
    run(create_topic(broker.bootstrap, topic_name, 4))
    config = {"group_id": group, "heartbeat_interval_ms": 100}
    with Consumer(broker.bootstrap, **config) as one, Consumer(broker.bootstrap, **config) as two:
        one.subscribe([topic_name])
        two.subscribe([topic_name])
        for _ in range(200):  # a poll never blocks on the other member's rejoin
            one.poll(20)
            two.poll(20)
            if partitioned([one, two], everything):
                break
        assert partitioned([one, two], everything)


def test_async_for_and_pause_resume_in_a_group(broker, topic_name):
    group, paused = "iter-" + topic_name, TopicPartition(topic_name, 1)

    async def main():
        await create_topic(broker.bootstrap, topic_name, 2)
        await produce(broker.bootstrap, topic_name, 5, partition=0)
        await produce(broker.bootstrap, topic_name, 3, partition=1)
        async with member(broker.bootstrap, group) as consumer:
            class PauseOne:
                async def on_partitions_assigned(self, assigned):  # a coroutine is awaited
                    consumer.pause(paused)

            consumer.subscribe([topic_name], listener=PauseOne())
            got = []
            async for record in consumer:
                got.append((record.partition, record.offset))
                if len(got) == 5:
                    break
            assert consumer.paused() == {paused}
            assert await consumer.poll(300) == {}  # the paused partition gives nothing
            consumer.resume(paused)
            async for record in consumer:
                got.append((record.partition, record.offset))
                if len(got) == 8:
                    break
            assert got == [(0, o) for o in range(5)] + [(1, o) for o in range(3)]

    run(main(), 60)


def test_static_member_restarting_within_its_session_keeps_the_group_stable(broker, topic_name):
    group, everything = "static-" + topic_name, tps(topic_name, *range(4))

    async def main():
        await create_topic(broker.bootstrap, topic_name, 4)
        listeners = [Recorder(), Recorder()]
        a, b = [await member(broker.bootstrap, group, group_instance_id=f"i-{n}", session_timeout_ms=30_000).start()
                for n in "ab"]
        a.subscribe([topic_name], listener=listeners[0])
        b.subscribe([topic_name], listener=listeners[1])
        await poll_until([a, b], lambda: partitioned([a, b], everything))
        mine, events_of_b = a.assignment(), list(listeners[1].events)
        await a.close()  # a static member does not leave
        async with AsyncAdminClient(broker.bootstrap) as admin:
            assert len((await admin.describe_groups([group]))[group].members) == 2
        again = await member(broker.bootstrap, group, group_instance_id="i-a", session_timeout_ms=30_000).start()
        again.subscribe([topic_name])
        await poll_until([again, b], lambda: again.assignment())
        assert again.assignment() == mine  # its old partitions, and no rebalance for b:
        await poll_rounds([again, b], [], 10)
        assert listeners[1].events == events_of_b
        await again.close()
        await b.close()

    run(main(), 60)


def test_a_static_member_replaced_by_another_process_is_fenced(broker, topic_name):
    group = "fenced-" + topic_name

    async def main():
        await create_topic(broker.bootstrap, topic_name, 2)
        old, new = [await member(broker.bootstrap, group, group_instance_id="same").start() for _ in range(2)]
        old.subscribe([topic_name])
        await poll_until([old], lambda: old.assignment())
        new.subscribe([topic_name])
        await poll_until([new], lambda: new.assignment() == old.assignment())
        with pytest.raises(BrokerError) as fenced:
            for _ in range(400):
                await old.poll(50)
        assert fenced.value.code == ErrorCode.FENCED_INSTANCE_ID
        with pytest.raises(BrokerError):  # and it stays fenced
            await old.poll(0)
        await old.close()
        await poll_rounds([new], [], 3)
        assert new.assignment() == tps(topic_name, 0, 1)
        await new.close()

    run(main())


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_an_odradek_and_a_kafka_python_member_share_a_group(broker, topic_name, strategy):
    """With "range" kafka-python joins first (and stays leader), with "roundrobin" odradek."""
    group, everything = f"kp-{strategy}-" + topic_name, tps(topic_name, *range(6))
    run(create_topic(broker.bootstrap, topic_name, 6))
    kp_assignment, kp_seen, stop = [set()], [], threading.Event()
    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[strategy]

    def kafka_python_member():
        kp = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                           auto_offset_reset="earliest", partition_assignment_strategy=[assignor],
                           heartbeat_interval_ms=100, session_timeout_ms=10_000)
        try:
            while not stop.is_set():
                # Long polls: kafka-python 3.0.12 can lose a join whose poll times out meanwhile.
                for tp, records in kp.poll(1000).items():
                    kp_seen.extend((tp.partition, r.offset) for r in records)
                kp_assignment[0] = {TopicPartition(t, p) for t, p in kp.assignment()}
        finally:
            kp.close()

    thread = threading.Thread(target=kafka_python_member)

    async def main():
        async with member(broker.bootstrap, group, partition_assignment_strategy=[strategy]) as consumer:
            if strategy == "range":
                thread.start()
                await poll_until([], lambda: kp_assignment[0] == everything)
            consumer.subscribe([topic_name])
            if strategy == "roundrobin":
                await poll_until([consumer], lambda: consumer.assignment() == everything)
                thread.start()

            def shared():
                ours, theirs = consumer.assignment(), kp_assignment[0]
                return len(ours) == 3 and not ours & theirs and ours | theirs == everything

            await poll_until([consumer], shared)
            await produce(broker.bootstrap, topic_name, 60)
            seen = await poll_until([consumer], lambda: len(seen) + len(kp_seen) >= 60, seen := [])
            await poll_rounds([consumer], seen, 4)
            ours = {(tp.partition, r.offset) for _, tp, r in seen}
            assert {tp for _, tp, _ in seen} == consumer.assignment()  # both read their share
            assert {p for p, _ in kp_seen} == {tp.partition for tp in kp_assignment[0]}
            assert len(seen) + len(kp_seen) == 60 and not ours & set(kp_seen)

    try:
        run(main(), 60)
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(30)


def test_unsubscribe_hands_the_partitions_to_the_others(broker, topic_name):
    group, everything = "unsub-" + topic_name, tps(topic_name, *range(4))

    async def main():
        await create_topic(broker.bootstrap, topic_name, 4)
        listener = Recorder()
        stays, goes = [await member(broker.bootstrap, group).start() for _ in range(2)]
        stays.subscribe([topic_name])
        goes.subscribe([topic_name], listener=listener)
        await poll_until([stays, goes], lambda: partitioned([stays, goes], everything))
        mine = goes.assignment()
        await goes.unsubscribe()
        assert (goes.assignment(), goes.subscription()) == (set(), set())
        assert listener.events[-1] == ("revoked", mine)
        await poll_until([stays, goes], lambda: stays.assignment() == everything)
        assert goes.assignment() == set()
        goes.assign([TopicPartition(topic_name, 0)])  # no longer subscribed: assign is allowed
        await goes.close()
        await stays.close()

    run(main())


def test_misuse_is_refused(broker, topic_name):
    async def main():
        async with AsyncConsumer(broker.bootstrap) as consumer:
            with pytest.raises(ValueError, match="group_id"):
                consumer.subscribe([topic_name])
        async with member(broker.bootstrap, "misuse-" + topic_name) as consumer:
            consumer.assign([TopicPartition(topic_name, 0)])
            with pytest.raises(ValueError, match="unsubscribe"):
                consumer.subscribe([topic_name])
            await consumer.unsubscribe()
            consumer.subscribe([topic_name])
            with pytest.raises(ValueError, match="unsubscribe"):
                consumer.assign([TopicPartition(topic_name, 0)])
            with pytest.raises(CommitFailedError):  # not yet a member of a generation
                await consumer.commit({TopicPartition(topic_name, 0): 1})
        with pytest.raises(ValueError):
            AsyncConsumer(broker.bootstrap, group_id="g", heartbeat_interval_ms=5000, session_timeout_ms=5000)

    run(main())

