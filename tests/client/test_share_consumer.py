"""odradek's share consumer (client/share_consumer.py, KIP-932) against a real odradek broker:
two members of a share group on a one-partition topic, explicit and implicit acknowledgement,
release (redelivered, delivery count 2), reject (never again), close releasing what a member
held, the commit callback, and a mixed pair with confluent-kafka's ShareConsumer."""

from __future__ import annotations

import pytest

from odradek.client.share_acknowledgements import AcknowledgeType
from odradek.client.share_consumer import ShareStateError
from odradek.client.sync_share_consumer import ShareConsumer
from odradek.testing.broker import InProcessBroker
from odradek.testing.broker import test_config as broker_config
from tests.server.group_clients import create_topic, produce, wait_for

ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT
# Heartbeats every 100 ms so that an assignment given once the share-group state is
# initialized arrives at once; the state topic small.
_PROPS = {"group.share.heartbeat.interval.ms": "100", "group.share.min.heartbeat.interval.ms": "100",
          "share.coordinator.state.topic.num.partitions": "1"}


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("share") / "data"
    props = broker_config(data)
    props.update(_PROPS)
    with InProcessBroker(data, props) as b:
        yield b


def member(broker, group, **config) -> ShareConsumer:
    config.setdefault("fetch_max_wait_ms", 100)
    return ShareConsumer(broker.bootstrap, group_id=group, **config)


def ready(*consumers, topic: str) -> None:
    """Poll until every consumer's share session holds the partition: the share partition is
    initialized (share.auto.offset.reset latest: records produced from now on are read)."""
    def done():
        return all(any(s.open and s.partitions for s in c._client._fetcher.sessions.values()) for c in consumers)

    wait_for(done, step=lambda: [c.poll(0.05) for c in consumers])


def drain(consumers, want: int, on_record=None) -> list:
    """Poll ``consumers`` in turn until ``want`` records came; each record acknowledged by
    ``on_record(consumer, record)`` (explicit mode)."""
    got = []

    def step():
        for c in consumers:
            for r in c.poll(0.1):
                got.append((c, r))
                if on_record is not None:
                    on_record(c, r)
    wait_for(lambda: len(got) >= want, step=step)
    return got


def test_two_members_see_every_record_exactly_once(share_broker, topic_name):
    create_topic(share_broker.bootstrap, topic_name, 1)
    a = member(share_broker, "g-once", share_acknowledgement_mode="explicit", max_poll_records=3)
    b = member(share_broker, "g-once", share_acknowledgement_mode="explicit", max_poll_records=3)
    try:
        a.subscribe([topic_name])
        b.subscribe([topic_name])
        ready(a, b, topic=topic_name)
        produce(share_broker.bootstrap, topic_name, [b"v%d" % i for i in range(20)], partitions=1)
        got = drain([a, b], 20, lambda c, r: c.acknowledge(r, ACCEPT))
        assert sorted(r.offset for _, r in got) == list(range(20))
        assert {r.delivery_count for _, r in got} == {1}
        assert sorted(r.value for _, r in got) == sorted(b"v%d" % i for i in range(20))
        for c in (a, b):
            assert all(e is None for e in c.commit_sync().values())
        assert a.poll(0.2) == [] and b.poll(0.2) == []
    finally:
        a.close()
        b.close()


def test_release_redelivers_with_delivery_count_two_and_reject_never(share_broker, topic_name):
    create_topic(share_broker.bootstrap, topic_name, 1)
    outcomes = []
    c = member(share_broker, "g-release", share_acknowledgement_mode="explicit",
               acknowledgement_commit_callback=lambda offsets, error: outcomes.append((offsets, error)))
    try:
        c.subscribe([topic_name])
        ready(c, topic=topic_name)
        produce(share_broker.bootstrap, topic_name, [b"a", b"b", b"c", b"d"], partitions=1)
        first = drain([c], 4, lambda _, r: c.acknowledge(r, RELEASE if r.offset < 2 else REJECT))
        assert [(r.offset, r.delivery_count) for _, r in first] == [(0, 1), (1, 1), (2, 1), (3, 1)]
        again = drain([c], 2, lambda _, r: c.acknowledge(r, ACCEPT))
        assert [(r.offset, r.delivery_count) for _, r in again] == [(0, 2), (1, 2)]
        c.commit_sync()
        produce(share_broker.bootstrap, topic_name, [b"e"], partitions=1)
        (last,) = [r for _, r in drain([c], 1, lambda _, r: c.acknowledge(r))]
        assert (last.offset, last.delivery_count) == (4, 1)  # 2 and 3 were rejected: never again
        c.commit_sync()
        acknowledged = sorted(o for offsets, error in outcomes if error is None for os in offsets.values() for o in os)
        assert acknowledged == [0, 0, 1, 1, 2, 3, 4]
    finally:
        c.close()


def test_explicit_mode_refuses_a_poll_before_every_record_is_acknowledged(share_broker, topic_name):
    create_topic(share_broker.bootstrap, topic_name, 1)
    c = member(share_broker, "g-strict", share_acknowledgement_mode="explicit")
    try:
        c.subscribe([topic_name])
        ready(c, topic=topic_name)
        produce(share_broker.bootstrap, topic_name, [b"a", b"b"], partitions=1)
        got = drain([c], 2, lambda _, r: None)
        c.acknowledge(got[0][1])
        with pytest.raises(ShareStateError):
            c.poll(0)
        c.acknowledge(got[1][1], ACCEPT)
        c.poll(0)
        with pytest.raises(ShareStateError):
            c.acknowledge(got[1][1], ACCEPT)  # no longer a record of the last poll
    finally:
        c.close()


def test_close_releases_unacknowledged_records_to_the_other_member(share_broker, topic_name):
    create_topic(share_broker.bootstrap, topic_name, 1)
    a = member(share_broker, "g-close", share_acknowledgement_mode="explicit")
    b = member(share_broker, "g-close", share_acknowledgement_mode="explicit")
    try:
        a.subscribe([topic_name])
        b.subscribe([topic_name])
        ready(a, b, topic=topic_name)
        produce(share_broker.bootstrap, topic_name, [b"x%d" % i for i in range(3)], partitions=1)
        held = drain([a], 3)
        assert [r.offset for _, r in held] == [0, 1, 2]
        a.close()  # nothing acknowledged: the closing session releases 0-2
        got = drain([b], 3, lambda c, r: c.acknowledge(r))
        assert [(r.offset, r.delivery_count) for _, r in got] == [(0, 2), (1, 2), (2, 2)]
    finally:
        a.close()
        b.close()


def test_implicit_mode_accepts_the_previous_poll(share_broker, topic_name):
    create_topic(share_broker.bootstrap, topic_name, 1)
    outcomes = []
    c = member(share_broker, "g-implicit", acknowledgement_commit_callback=lambda o, e: outcomes.append((o, e)))
    try:
        c.subscribe([topic_name])
        ready(c, topic=topic_name)
        produce(share_broker.bootstrap, topic_name, [b"a", b"b", b"c"], partitions=1)
        got = drain([c], 3)
        with pytest.raises(ShareStateError):
            c.acknowledge(got[0][1])
        result = c.commit_sync()
        assert list(result.values()) == [None]
        assert sorted(o for offsets, e in outcomes if e is None for os in offsets.values() for o in os) == [0, 1, 2]
    finally:
        c.close()
    other = member(share_broker, "g-implicit")
    try:
        other.subscribe([topic_name])
        ready(other, topic=topic_name)
        assert other.poll(0.3) == []  # accepted: nothing to redeliver
    finally:
        other.close()


def test_mixed_pair_with_confluent_kafka_share_consumer(share_broker, topic_name):
    from confluent_kafka import AcknowledgeType as CkAck
    from confluent_kafka import ShareConsumer as CkShareConsumer

    create_topic(share_broker.bootstrap, topic_name, 1)
    ours = member(share_broker, "g-mixed", share_acknowledgement_mode="explicit", max_poll_records=2)
    theirs = CkShareConsumer({"bootstrap.servers": share_broker.bootstrap, "group.id": "g-mixed",
                              "share.acknowledgement.mode": "explicit", "log_level": 0})
    seen: list[tuple[str, int, int]] = []
    try:
        ours.subscribe([topic_name])
        theirs.subscribe([topic_name])
        ready(ours, topic=topic_name)
        produce(share_broker.bootstrap, topic_name, [b"m0"], partitions=1)
        held = [r for _, r in drain([ours], 1)]  # held, unacknowledged: the next ones go to confluent-kafka
        produce(share_broker.bootstrap, topic_name, [b"m%d" % i for i in range(1, 20)], partitions=1)

        def theirs_only():
            for m in theirs.poll(0.1) or []:
                if m.error() is None:
                    theirs.acknowledge(m, CkAck.ACCEPT)
                    seen.append(("confluent", m.offset(), 1))
        wait_for(lambda: seen, step=theirs_only)
        for r in held:
            ours.acknowledge(r, ACCEPT)
            seen.append(("odradek", r.offset, r.delivery_count))

        def step():
            for r in ours.poll(0.1):
                ours.acknowledge(r, ACCEPT)
                seen.append(("odradek", r.offset, r.delivery_count))
            for m in theirs.poll(0.1) or []:
                if m.error() is None:
                    theirs.acknowledge(m, CkAck.ACCEPT)
                    seen.append(("confluent", m.offset(), 1))
        wait_for(lambda: len(seen) >= 20, step=step)
        assert sorted(o for _, o, _ in seen) == list(range(20))  # every record once, by one of them
        assert {who for who, _, _ in seen} == {"odradek", "confluent"}
        ours.commit_sync()
        theirs.commit_sync()
    finally:
        ours.close()
        theirs.close()
