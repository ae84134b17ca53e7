"""The console and KIP-932 share groups, against a real broker: a share group with one
confluent-kafka ``ShareConsumer`` (implicit acknowledgement) on a two-partition topic, which
reads and acknowledges 4 records per partition (so the share coordinator has a start offset
for each share-partition: before a share-partition's first state write DescribeShareGroupOffsets
answers -1) and then holds the next 6 per partition unacknowledged (they would be acknowledged
by its next poll, which it does not make); beside it a classic group with committed offsets.

The list shows the share group with type ``share``, its state and its in-flight count; its
page (JSON and headless Chromium) shows the member with its epoch and assignment, and per
partition the start offset the share coordinator holds (``read_summary``, what
DescribeShareGroupOffsets answers), the end offset 10 and in flight end - start (the broker
answers lag -1), which counts the 6 held records; the classic group's page keeps its fields."""

from __future__ import annotations

import pytest
from confluent_kafka import ShareConsumer

from odradek.client import AdminClient, NewTopic, Producer, TopicPartition
from odradek.console.app import ConsoleConfig
from odradek.console.console_server import ConsoleServer
from odradek.console.share_group_view import FROM_OFFSETS
from odradek.testing.broker import InProcessBroker
from tests.console.test_api import call
from tests.console.test_app import driver, screenshots, text  # noqa: F401 - fixtures
from tests.console.test_consumer_groups_view import CLASSIC_MEMBER_KEYS, CLASSIC_PAGE_KEYS, no_browser_errors, open_page
from tests.server.group_clients import wait_for

TOPIC = "share-orders"
PARTITIONS = 2
ACKNOWLEDGED, HELD = 4, 6  # records per partition
END = ACKNOWLEDGED + HELD
SHARE_GROUP, CLASSIC_GROUP = "share-readers", "classic-billing"
CLASSIC_COMMITTED = 3


def produce(bootstrap: str, n: int, first: int) -> None:
    with Producer(bootstrap) as producer:
        for p in range(PARTITIONS):
            for i in range(first, first + n):
                producer.send(TOPIC, value=b"r%d" % i, partition=p)
        producer.flush()


def share_partitions_ready(b, consumer) -> None:
    """Poll until the group's share-partitions exist on the broker (share.auto.offset.reset
    is latest: records produced before would never be delivered)."""
    topic_id = b.broker.metadata_image().topic(TOPIC).topic_id
    keys = [(SHARE_GROUP, topic_id, p) for p in range(PARTITIONS)]
    manager = b.broker.share_partition_manager
    wait_for(lambda: all(manager.get(k) is not None for k in keys), step=lambda: consumer.poll(0.1))


def persisted_starts(b) -> list[int]:
    """Each share-partition's start offset at the share coordinator (-1: none yet)."""
    topic_id = b.broker.metadata_image().topic(TOPIC).topic_id
    persister = b.broker.share_persister
    answers = [b.call(persister.read_summary, SHARE_GROUP, topic_id, p, -1) for p in range(PARTITIONS)]
    return [a.start_offset if hasattr(a, "start_offset") else a[2] for a in answers]


def expected_in_flight(b) -> dict[int, tuple[int, str]]:
    """Per partition what the page must show: the broker's lag when DescribeShareGroupOffsets
    gives one (v1), else end offset - start offset."""
    with AdminClient(b.bootstrap) as admin:
        offsets = admin.list_share_group_offsets(SHARE_GROUP)
    starts = persisted_starts(b)
    return {p: (o.lag, "lag") if o.lag >= 0 else (END - starts[p], FROM_OFFSETS)
            for p, o in ((tp.partition, o) for tp, o in offsets.items())}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("console-kip932") / "data") as b:
        with AdminClient(b.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        consumer = ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": SHARE_GROUP,
                                  "client.id": "share-0", "share.acknowledgement.mode": "implicit", "log_level": 0})
        try:
            consumer.subscribe([TOPIC])
            share_partitions_ready(b, consumer)
            produce(b.bootstrap, ACKNOWLEDGED, 0)
            seen: list = []
            wait_for(lambda: len(seen) >= PARTITIONS * ACKNOWLEDGED, step=lambda: seen.extend(consumer.poll(0.2)))
            # the next polls acknowledge them: the share coordinator then holds a start offset
            wait_for(lambda: all(s >= 0 for s in persisted_starts(b)), step=lambda: consumer.poll(0.1))
            produce(b.bootstrap, HELD, ACKNOWLEDGED)
            held: list = []
            wait_for(lambda: held, step=lambda: held.extend(consumer.poll(0.2)))  # no more polls: no acknowledgement
            assert all(m.error() is None for m in held)
            yield b
        finally:
            consumer.close()


@pytest.fixture(scope="module")
def site(cluster):
    with AdminClient(cluster.bootstrap) as admin:
        admin.alter_group_offsets(CLASSIC_GROUP, {TopicPartition(TOPIC, p): CLASSIC_COMMITTED
                                                  for p in range(PARTITIONS)})
    with ConsoleServer(ConsoleConfig(cluster.bootstrap, sample_interval=0.5, refresh_ms=500)) as server:
        yield server


def test_the_list_shows_the_share_group_with_its_type_and_in_flight_count(site, cluster):
    status, answer = call(site, "/api/groups")
    assert status == 200
    rows = {g["id"]: g for g in answer["groups"]}
    shared, classic = rows[SHARE_GROUP], rows[CLASSIC_GROUP]
    assert (shared["type"], shared["state"], shared["members"], shared["protocol_type"]) == ("share", "Stable", 1, "share")
    expected = expected_in_flight(cluster)
    assert (shared["in_flight"], shared["lag"]) == (sum(n for n, _ in expected.values()), None)
    assert shared["in_flight"] >= PARTITIONS * HELD
    assert classic["type"] == "classic" and "in_flight" not in classic
    assert classic["lag"] == PARTITIONS * (END - CLASSIC_COMMITTED)


def test_the_share_groups_page_shows_members_and_in_flight_counts(site, cluster):
    status, page = call(site, f"/api/groups/{SHARE_GROUP}")
    assert status == 200
    assert (page["type"], page["state"], page["assignor"]) == ("share", "Stable", "simple")
    [member] = page["members"]
    assert member["client_id"] == "share-0" and member["subscribed_topics"] == [TOPIC]
    assert member["assignment"] == [f"{TOPIC}-{p}" for p in range(PARTITIONS)]
    assert member["member_epoch"] == page["assignment_epoch"] == page["group_epoch"] >= 1
    starts, expected = persisted_starts(cluster), expected_in_flight(cluster)
    for p in page["partitions"]:
        assert (p["start_offset"], p["end"]) == (starts[p["partition"]], END)
        assert (p["in_flight"], p["in_flight_basis"]) == expected[p["partition"]]
        assert p["in_flight"] >= HELD and p["members"] == [member["id"]]  # the held records are counted
    assert page["in_flight"] == sum(n for n, _ in expected.values())


def test_the_classic_groups_page_keeps_its_fields(site):
    status, page = call(site, f"/api/groups/{CLASSIC_GROUP}")
    assert status == 200
    assert set(page) == CLASSIC_PAGE_KEYS | {"type"} and page["type"] == "classic"
    assert page["members"] == [] and [p["committed"] for p in page["partitions"]] == [CLASSIC_COMMITTED] * 2
    assert all(set(m) == CLASSIC_MEMBER_KEYS for m in page["members"])


def test_the_groups_page_shows_the_share_group(driver, site, screenshots):  # noqa: F811
    open_page(driver, site, "/groups")
    row = f'#groups-table tr[data-group="{SHARE_GROUP}"]'
    assert text(driver, f"{row} td.type", "share")
    assert text(driver, f"{row} td.state", "Stable")
    _, page = call(site, f"/api/groups/{SHARE_GROUP}")
    assert text(driver, f"{row} td.in-flight", str(page["in_flight"]))
    no_browser_errors(driver, screenshots, "groups_with_a_share_group")


def test_the_share_groups_page_in_a_browser(driver, site, screenshots):  # noqa: F811
    _, page = call(site, f"/api/groups/{SHARE_GROUP}")
    open_page(driver, site, f"/groups/{SHARE_GROUP}")
    assert text(driver, "#group-type .value", "share")
    assert text(driver, "#group-in-flight .value", str(page["in_flight"]))
    assert text(driver, "#group-epoch .value", str(page["group_epoch"]))
    [member] = page["members"]
    row = f'#members-table tr[data-member="{member["id"]}"]'
    assert text(driver, f"{row} td.member-epoch", str(member["member_epoch"]))
    assert text(driver, f"{row} td.assignment", ", ".join(member["assignment"]))
    for p in page["partitions"]:
        partition = f'#group-partitions-table tr[data-partition="{TOPIC}-{p["partition"]}"]'
        assert text(driver, f"{partition} td.start-offset", str(p["start_offset"]))
        assert text(driver, f"{partition} td.end", str(END))
        assert text(driver, f"{partition} td.in-flight", str(p["in_flight"]))
    assert "not yet delivered" in text(driver, "#in-flight-note")
    assert text(driver, "#chart-title", "In flight over time")
    no_browser_errors(driver, screenshots, "share_group")
