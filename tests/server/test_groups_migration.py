"""KIP-848 online upgrade and downgrade driven by librdkafka (confluent-kafka): a stable classic
group whose consumers restart one by one with ``group.protocol=consumer`` becomes a consumer
group, the not-yet-restarted classic members being served by it meanwhile (mixed membership);
a consumer group whose consumers restart one by one as classic consumers becomes a classic
group again when the last consumer-protocol member leaves (consumer/group_downgrade.py).
Committed offsets survive, every record is read at least once and none is skipped (manual
commits), and no partition is ever assigned while another consumer still owns it."""

from __future__ import annotations

import confluent_kafka
import pytest

from odradek.testing.broker import InProcessBroker
from tests.server.group_clients import create_topic, produce, wait_for
from tests.server.test_groups_consumer_protocol import FAST, Member, Ownership, balanced


class RollingMember(Member):
    """A consumer committing each record synchronously; a commit refused during a rebalance
    (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, STALE_MEMBER_EPOCH...) is given up, as the
    record's next owner reads it again (at least once)."""

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
                    try:
                        c.commit(message=m, asynchronous=False)
                    except confluent_kafka.KafkaException:
                        pass
                self.assignment = sorted(tp.partition for tp in c.assignment())
            c.close()
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e


def member(bootstrap, name, ownership, seen, protocol: str, strategy: str) -> Member:
    m = RollingMember(bootstrap, "groll", "roll", name, ownership, seen)
    m.config["group.protocol"] = protocol
    if protocol == "classic":
        m.config.update({"partition.assignment.strategy": strategy, "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 500})
    return m


def group_type(b, group: str) -> str | None:
    def read():
        shard = b.broker.group_coordinator._slot_for(group).shard
        if shard.consumer.group(group) is not None:
            return "consumer"
        return "classic" if shard.groups.group(group) is not None else None

    return b.call(read)


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_rolling_upgrade_from_classic_to_consumer_group(tmp_path, strategy):
    values = [b"u%04d" % i for i in range(240)]
    with InProcessBroker(tmp_path / "data", **FAST) as b:
        create_topic(b.bootstrap, "roll", 6)
        produce(b.bootstrap, "roll", values[:60], partitions=6)
        ownership, seen = Ownership(), []
        members = [member(b.bootstrap, f"m{i}", ownership, seen, "classic", strategy) for i in range(3)]
        try:
            for m in members:
                m.start()
            wait_for(lambda: balanced(members, 6) and len(set(seen)) >= 60)
            assert group_type(b, "groll") == "classic"
            for i in range(3):
                members[i].stop()
                members[i] = member(b.bootstrap, f"m{i}", ownership, seen, "consumer", strategy)
                members[i].start()
                produce(b.bootstrap, "roll", values[60 * (i + 1):60 * (i + 2)], partitions=6)
                wait_for(lambda: balanced(members, 6) and len(set(seen)) >= 60 * (i + 2), timeout=45)
                assert group_type(b, "groll") == "consumer"
        finally:
            for m in members:
                m.stop()
    assert ownership.violations == []
    assert set(seen) == set(values)  # at least once, none skipped


def committed(b, group: str) -> dict:
    def read():
        shard = b.broker.group_coordinator._slot_for(group).shard
        return {tp: v.offset for tp, v in shard.offsets.committed(group).items()}

    return b.call(read)


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_rolling_downgrade_from_consumer_to_classic_group(tmp_path, strategy):
    values = [b"d%04d" % i for i in range(240)]
    with InProcessBroker(tmp_path / "data", **FAST) as b:
        create_topic(b.bootstrap, "roll", 6)
        produce(b.bootstrap, "roll", values[:60], partitions=6)
        ownership, seen = Ownership(), []
        members = [member(b.bootstrap, f"m{i}", ownership, seen, "consumer", strategy) for i in range(3)]
        try:
            for m in members:
                m.start()
            wait_for(lambda: balanced(members, 6) and len(set(seen)) >= 60)
            assert group_type(b, "groll") == "consumer"
            for i in range(3):
                before = committed(b, "groll")
                members[i].stop()
                members[i] = member(b.bootstrap, f"m{i}", ownership, seen, "classic", strategy)
                members[i].start()
                produce(b.bootstrap, "roll", values[60 * (i + 1):60 * (i + 2)], partitions=6)
                wait_for(lambda: balanced(members, 6) and len(set(seen)) >= 60 * (i + 2), timeout=45)
                after = committed(b, "groll")
                assert all(after.get(tp, -1) >= offset for tp, offset in before.items()), (before, after)
                assert group_type(b, "groll") == ("consumer" if i < 2 else "classic")
        finally:
            for m in members:
                m.stop()
    assert ownership.violations == []
    assert set(seen) == set(values)  # at least once, none skipped
