"""KIP-932 share groups end to end with confluent-kafka's ``ShareConsumer`` (librdkafka's share
consumer: ShareGroupHeartbeat, ShareFetch and ShareAcknowledge v1) against a real broker.

- five share consumers on a one-partition topic together see every record exactly once;
- records held by a consumer that goes away without acknowledging them (closed, or its
  process killed with SIGKILL) are delivered to another one, with delivery count 2, once
  released (close) or once their lock expires (group.share.record.lock.duration.ms 2000);
- a rejected record is never delivered again;
- a record released group.share.delivery.count.limit times is archived.

share.auto.offset.reset is latest: records are produced once the share-partition exists.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from odradek.testing import broker as testing_broker
from odradek.testing.broker import InProcessBroker
from tests.server.group_clients import create_topic, produce, wait_for


@pytest.fixture(scope="module")
def short_lock_broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("share") / "data"
    props = {**testing_broker.test_config(data), "group.share.record.lock.duration.ms": "2000",
             "group.share.delivery.count.limit": "2"}
    with InProcessBroker(data, props) as b:
        yield b


def consumer(broker, group: str, mode: str = "implicit") -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                       "share.acknowledgement.mode": mode})
    c.subscribe(["q" if group.startswith("five") else group])
    return c


def ready(broker, consumers, group: str, topic: str) -> None:
    """Poll until the group's share-partition of ``topic``-0 exists on the broker."""
    b = broker.broker
    topic_id = b.metadata_image().topic(topic).topic_id
    key = (group, topic_id, 0)
    wait_for(lambda: b.share_partition_manager.get(key) is not None,
             step=lambda: [c.poll(0.1) for c in consumers])


def values(messages) -> list[bytes]:
    out = []
    for m in messages:
        assert m.error() is None, m.error()
        out.append(m.value())
    return out


def test_five_share_consumers_see_every_record_once(broker):
    create_topic(broker.bootstrap, "q", 1)
    consumers = [consumer(broker, "five") for _ in range(5)]
    try:
        ready(broker, consumers, "five", "q")
        sent = [b"r%d" % i for i in range(60)]
        produce(broker.bootstrap, "q", sent)
        seen: list[bytes] = []
        wait_for(lambda: len(seen) >= len(sent),
                 step=lambda: [seen.extend(values(c.poll(0.2))) for c in consumers])
        for c in consumers:  # the last polls' implicit acknowledgements, and nothing more comes
            seen.extend(values(c.poll(0.2)))
        assert sorted(seen) == sorted(sent)
    finally:
        for c in consumers:
            c.close()


def test_unacknowledged_records_go_to_another_consumer(short_lock_broker):
    """The other consumer joins only once the first has closed: a member present all along
    would prefetch the records itself (librdkafka fetches in the background), hold them past
    their 2 s lock unread, and hand them to the test later with their first delivery count."""
    b = short_lock_broker
    create_topic(b.bootstrap, "g-close", 1)
    a = consumer(b, "g-close", "explicit")
    other = None
    try:
        ready(b, [a], "g-close", "g-close")
        produce(b.bootstrap, "g-close", [b"x%d" % i for i in range(5)])
        held: list = []
        wait_for(lambda: held, step=lambda: held.extend(a.poll(0.2)))
        a.close()  # without acknowledging: released at once (or when their lock expires)
        other = consumer(b, "g-close", "explicit")
        got: list = []
        wait_for(lambda: len(got) >= len(held), step=lambda: got.extend(_accepted(other, other.poll(0.2))))
        assert {m.value() for m in got} >= {m.value() for m in held}
        assert {m.delivery_count() for m in got if m.value() in {h.value() for h in held}} == {2}
    finally:
        if other is not None:
            other.close()


def test_records_of_a_killed_consumer_are_redelivered_after_their_lock(short_lock_broker, tmp_path):
    b = short_lock_broker
    create_topic(b.bootstrap, "g-kill", 1)
    other = consumer(b, "g-kill", "explicit")
    child = _child_consumer(b, "g-kill", tmp_path / "held")
    try:
        ready(b, [other], "g-kill", "g-kill")
        produce(b.bootstrap, "g-kill", [b"k%d" % i for i in range(5)])
        wait_for(lambda: (tmp_path / "held").exists() or child.poll() is not None,
                 step=lambda: _accepted(other, other.poll(0.2)) and None)
        held = set((tmp_path / "held").read_text().split())
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        got: list = []
        wait_for(lambda: {m.value().decode() for m in got} >= held,
                 step=lambda: got.extend(_accepted(other, other.poll(0.2))))
        assert {m.delivery_count() for m in got if m.value().decode() in held} == {2}
    finally:
        child.kill()
        other.close()


def test_rejected_never_redelivered_and_delivery_count_limit_archives(short_lock_broker):
    b = short_lock_broker
    create_topic(b.bootstrap, "g-rej", 1)
    c = consumer(b, "g-rej", "explicit")
    try:
        ready(b, [c], "g-rej", "g-rej")
        produce(b.bootstrap, "g-rej", [b"reject", b"release", b"accept"])
        deliveries: list[tuple[bytes, int]] = []

        def step():
            for m in c.poll(0.2):
                deliveries.append((m.value(), m.delivery_count()))
                kind = {b"reject": AcknowledgeType.REJECT, b"release": AcknowledgeType.RELEASE}
                c.acknowledge(m, kind.get(m.value(), AcknowledgeType.ACCEPT))
            c.commit_sync()
        # "release" comes twice (delivery count 1, 2), then group.share.delivery.count.limit (2) archives it
        wait_for(lambda: (b"release", 2) in deliveries, step=step)
        for _ in range(4):  # a few more polls: nothing else comes
            step()
        assert sorted(deliveries) == [(b"accept", 1), (b"reject", 1), (b"release", 1), (b"release", 2)]
    finally:
        c.close()


def _accepted(c: ShareConsumer, messages) -> list:
    out = list(messages)
    for m in out:
        assert m.error() is None, m.error()
        c.acknowledge(m, AcknowledgeType.ACCEPT)
    if out:
        c.commit_sync()
    return out


def _child_consumer(broker, group: str, held_file) -> subprocess.Popen:
    """A share consumer in a child process that writes the values it holds to ``held_file``,
    never acknowledges them, and waits to be killed."""
    code = textwrap.dedent(f"""
        import time
        from confluent_kafka import ShareConsumer
        c = ShareConsumer({{"bootstrap.servers": {broker.bootstrap!r}, "group.id": {group!r},
                            "share.acknowledgement.mode": "explicit"}})
        c.subscribe([{group!r}])
        while True:
            ms = [m for m in c.poll(0.2) if m.error() is None]
            if ms:
                tmp = {str(held_file)!r} + ".tmp"
                open(tmp, "w").write(" ".join(m.value().decode() for m in ms))
                __import__("os").rename(tmp, {str(held_file)!r})
                while True:
                    time.sleep(1)
    """)
    return subprocess.Popen([sys.executable, "-c", code])
