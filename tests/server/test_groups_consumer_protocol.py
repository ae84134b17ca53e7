"""KIP-848 consumer groups (``group.protocol=consumer``) driven by librdkafka (confluent-kafka):
members joining and leaving under load with manual commits, and a broker restart keeping the
group (its members' epochs and committed offsets)."""

from __future__ import annotations

import threading
import time

import confluent_kafka
import pytest

from odradek.testing.broker import InProcessBroker, free_port
from tests.server.group_clients import QUIET, create_topic, produce, wait_for

FAST = {"group.consumer.heartbeat.interval.ms": 500, "group.consumer.session.timeout.ms": 6000}


class Ownership:
    """Who owns which partition, from every consumer's callbacks; an assignment of a partition
    another consumer still owns is a violation."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.violations: list = []

    def assign(self, who: str, partitions) -> None:
        with self.lock:
            for p in partitions:
                if self.owner.get(p.partition, who) != who:
                    self.violations.append((p.partition, self.owner[p.partition], who))
                self.owner[p.partition] = who

    def revoke(self, who: str, partitions) -> None:
        with self.lock:
            for p in partitions:
                if self.owner.get(p.partition) == who:
                    del self.owner[p.partition]


class Member(threading.Thread):
    """A consumer that commits each record's offset (synchronously) once it has it.

    A commit may race a heartbeat that moves the member to a new epoch: Kafka 4's coordinator
    (``ConsumerGroup.validateOffsetCommit``) then refuses it with STALE_MEMBER_EPOCH, and
    librdkafka hands that error of a manual commit to the application (it retries only its
    own automatic commits) after asking for an early heartbeat. The member commits the same
    offset again until its new epoch is accepted (``commit``); any other error ends it."""

    STALE_COMMIT_PATIENCE_S = 20.0  # many heartbeat intervals (FAST: 500 ms); below stop()'s join

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, ownership: Ownership, seen: list) -> None:
        super().__init__(name=name, daemon=True)
        self.config = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False, **QUIET}
        self.topic, self.ownership, self.seen = topic, ownership, seen
        self.stopping = threading.Event()
        self.assignment: list[int] = []
        self.error = None
        self.stale_commits = 0

    def run(self) -> None:
        try:
            c = confluent_kafka.Consumer(self.config)
            who = self.name
            c.subscribe([self.topic], on_assign=lambda _, ps: self.ownership.assign(who, ps),
                        on_revoke=lambda _, ps: self.ownership.revoke(who, ps),
                        on_lost=lambda _, ps: self.ownership.revoke(who, ps))
            while not self.stopping.is_set():
                m = c.poll(0.1)
                if m is not None and m.error() is None:
                    self.seen.append(m.value())
                    self.commit(c, m)
                self.assignment = sorted(tp.partition for tp in c.assignment())
            c.close()
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def commit(self, c, m) -> None:
        """Commit the offset after ``m``; again while the answer is STALE_MEMBER_EPOCH (the
        partition stays this member's until it polls and acknowledges a revocation, so the
        retry lands in its next epoch). Other errors, and a stale epoch past the patience,
        raise."""
        deadline = time.monotonic() + self.STALE_COMMIT_PATIENCE_S
        while True:
            try:
                c.commit(message=m, asynchronous=False)
                return
            except confluent_kafka.KafkaException as e:
                stale = e.args[0].code() == confluent_kafka.KafkaError.STALE_MEMBER_EPOCH
                if not stale or time.monotonic() > deadline:
                    raise
                self.stale_commits += 1
            time.sleep(0.05)  # let the early heartbeat bring the new epoch

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert self.error is None, self.error


def balanced(members, partitions: int) -> bool:
    sizes = [len(m.assignment) for m in members]
    owned = [p for m in members for p in m.assignment]
    return sorted(owned) == list(range(partitions)) and max(sizes) - min(sizes) <= 1


@pytest.fixture
def broker(tmp_path):
    with InProcessBroker(tmp_path / "data", **FAST) as b:
        yield b


def test_members_join_and_leave_under_load_each_record_once(broker):
    create_topic(broker.bootstrap, "kip848", 12)
    values = [b"v%04d" % i for i in range(600)]
    produce(broker.bootstrap, "kip848", values[:200], partitions=12)
    ownership, seen = Ownership(), []
    members = [Member(broker.bootstrap, "g848", "kip848", f"m{i}", ownership, seen) for i in range(3)]
    try:
        for m in members:
            m.start()
        wait_for(lambda: balanced(members, 12))
        joined = [Member(broker.bootstrap, "g848", "kip848", f"m{i}", ownership, seen) for i in range(3, 10)]
        for m in joined:
            m.start()
        produce(broker.bootstrap, "kip848", values[200:400], partitions=12)
        members += joined
        wait_for(lambda: balanced(members, 12))
        for m in members[:5]:
            m.stop()
        members = members[5:]
        produce(broker.bootstrap, "kip848", values[400:], partitions=12)
        wait_for(lambda: balanced(members, 12) and len(seen) >= len(values))
    finally:
        for m in members:
            m.stop()
    assert ownership.violations == []
    assert sorted(seen) == values  # nothing skipped, nothing read twice


def coordinator_view(b, group: str):
    def read():
        shard = b.broker.group_coordinator._slot_for(group).shard
        g = shard.consumer.group(group)
        return ({m.member_id: (m.member_epoch, dict(m.assigned_partitions)) for m in g.members.values()},
                shard.offsets.committed(group))

    return b.call(read)


def test_broker_restart_keeps_members_epochs_and_offsets(tmp_path):
    port = free_port()
    props = {**FAST, "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    ownership, seen = Ownership(), []
    values = [b"r%03d" % i for i in range(100)]
    first = InProcessBroker(tmp_path / "data", **props).start()
    try:
        create_topic(first.bootstrap, "restart", 4)
        produce(first.bootstrap, "restart", values[:50], partitions=4)
        member = Member(first.bootstrap, "gr", "restart", "m0", ownership, seen)
        member.start()
        wait_for(lambda: len(seen) == 50 and member.assignment == [0, 1, 2, 3])
        before = coordinator_view(first, "gr")
    finally:
        first.stop()
    second = InProcessBroker(tmp_path / "data", **props).start()
    try:
        wait_for(lambda: coordinator_view(second, "gr") is not None)
        assert coordinator_view(second, "gr") == before  # same member, epoch, assignment, offsets
        produce(second.bootstrap, "restart", values[50:], partitions=4)
        wait_for(lambda: len(seen) >= 100)
        member.stop()
        assert sorted(seen) == values
        assert ownership.violations == []
    finally:
        second.stop()


def test_admin_lists_describes_and_deletes_a_consumer_group(broker):
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, "adm", 2)
    ownership, seen = Ownership(), []
    member = Member(broker.bootstrap, "gadm", "adm", "m0", ownership, seen)
    member.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    try:
        wait_for(lambda: member.assignment == [0, 1])
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(10).valid
        assert [(g.group_id, g.type) for g in listed] == [("gadm", ConsumerGroupType.CONSUMER)]
        assert admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(10).valid == []
        d = admin.describe_consumer_groups(["gadm"])["gadm"].result(10)
        assert d.type == ConsumerGroupType.CONSUMER and str(d.state.name) == "STABLE"
        assert [sorted(tp.partition for tp in m.assignment.topic_partitions) for m in d.members] == [[0, 1]]
        with pytest.raises(confluent_kafka.KafkaException, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups(["gadm"])["gadm"].result(10)
    finally:
        member.stop()
    wait_for(lambda: admin.describe_consumer_groups(["gadm"])["gadm"].result(10).members == [])
    admin.delete_consumer_groups(["gadm"])["gadm"].result(10)
    assert admin.list_consumer_groups().result(10).valid == []
