"""The console and KIP-848 consumer groups, against a real broker: a ``consumer`` group of two
librdkafka members (confluent-kafka, ``group.protocol=consumer``) and a ``classic`` group of
one librdkafka member, both with committed offsets. The list shows each group's type; the
consumer group's page (its JSON and the page in headless Chromium, as test_app.py drives it)
shows its type, group epoch, target assignment epoch, assignor, and per member its epoch,
current and target assignment, with the offsets and lag as for a classic group; the classic
group's page is what it was."""

from __future__ import annotations

import threading
import urllib.parse

import confluent_kafka
import pytest

from odradek.client import AdminClient, NewTopic, Producer
from odradek.console.app import ConsoleConfig
from odradek.console.console_server import ConsoleServer
from odradek.testing.broker import InProcessBroker
from tests.console.test_api import call
from tests.console.test_app import driver, screenshots, text  # noqa: F401 - fixtures
from tests.server.group_clients import QUIET, wait_for

TOPIC = "kip848-orders"
PARTITIONS = 4
RECORDS = 10  # per partition
MODERN, CLASSIC = "modern-readers", "classic-readers"
MODERN_COMMITTED, CLASSIC_COMMITTED = 4, 7
FAST = {"group.consumer.heartbeat.interval.ms": 500, "group.consumer.session.timeout.ms": 6000}
# The page of a classic group before consumer groups were shown: its fields stay as they were.
CLASSIC_PAGE_KEYS = {"id", "state", "protocol_type", "protocol", "members", "partitions", "lag", "lag_history"}
CLASSIC_MEMBER_KEYS = {"id", "instance_id", "client_id", "host", "assignment"}


class Members:
    """Live librdkafka consumers: once each owns partitions and has committed, a thread keeps
    polling them (records are read, never committed again) until ``close``."""

    def __init__(self, bootstrap: str) -> None:
        base = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", "enable.auto.commit": False, **QUIET}
        self.modern = [confluent_kafka.Consumer({**base, "group.id": MODERN, "group.protocol": "consumer",
                                                 "client.id": f"modern-{i}"}) for i in range(2)]
        self.classic = confluent_kafka.Consumer({**base, "group.id": CLASSIC, "client.id": "classic-0"})
        self.all = [*self.modern, self.classic]
        self.stopping = threading.Event()
        self.poller = threading.Thread(target=self._poll, name="console-group-members", daemon=True)

    def join_and_commit(self) -> None:
        for c in self.all:
            c.subscribe([TOPIC])

        def settled():
            for c in self.all:
                c.poll(0.05)
            owned = [len(c.assignment()) for c in self.modern]
            return owned == [2, 2] and len(self.classic.assignment()) == PARTITIONS

        wait_for(settled)
        for c, offset in [*((m, MODERN_COMMITTED) for m in self.modern), (self.classic, CLASSIC_COMMITTED)]:
            c.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, tp.partition, offset) for tp in c.assignment()],
                     asynchronous=False)
        self.poller.start()

    def _poll(self) -> None:
        while not self.stopping.is_set():
            for c in self.all:
                c.poll(0.05)

    def close(self) -> None:
        self.stopping.set()
        if self.poller.is_alive():
            self.poller.join(30)
        for c in self.all:
            c.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("console-kip848") / "data", **FAST) as b:
        with AdminClient(b.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        with Producer(b.bootstrap) as producer:
            for p in range(PARTITIONS):
                for i in range(RECORDS):
                    producer.send(TOPIC, value=b"r%d" % i, partition=p)
            producer.flush()
        members = Members(b.bootstrap)
        try:
            members.join_and_commit()
            yield b
        finally:
            members.close()


@pytest.fixture(scope="module")
def site(cluster):
    with ConsoleServer(ConsoleConfig(cluster.bootstrap, sample_interval=0.5, refresh_ms=500)) as server:
        yield server


def reconciled(site) -> dict:
    """The consumer group's page once both members hold their target (the group is at rest)."""
    def look():
        status, page = call(site, f"/api/groups/{MODERN}")
        members = page.get("members", []) if status == 200 else []
        done = len(members) == 2 and all(not m["reconciling"] and m["assignment"] for m in members)
        return page if done and page["state"] == "Stable" else None

    return wait_for(look, interval=0.2)


def test_the_list_shows_each_groups_type_and_state(site):
    status, answer = call(site, "/api/groups")
    assert status == 200
    rows = {g["id"]: g for g in answer["groups"]}
    modern, classic = rows[MODERN], rows[CLASSIC]
    assert (modern["type"], modern["state"], modern["members"], modern["protocol_type"]) == \
        ("consumer", "Stable", 2, "consumer")
    assert modern["protocol"] == "uniform"  # the assignor (group.consumer.assignors' first)
    assert (classic["type"], classic["state"], classic["members"], classic["protocol_type"]) == \
        ("classic", "Stable", 1, "consumer")
    assert modern["lag"] == PARTITIONS * (RECORDS - MODERN_COMMITTED)
    assert classic["lag"] == PARTITIONS * (RECORDS - CLASSIC_COMMITTED)


def test_a_consumer_groups_page_shows_its_epochs_and_assignments(site, cluster):
    page = reconciled(site)
    with AdminClient(cluster.bootstrap) as admin:
        described = admin.describe_consumer_groups([MODERN])[MODERN]
    assert (page["type"], page["assignor"], page["protocol"]) == ("consumer", "uniform", "uniform")
    assert (page["group_epoch"], page["assignment_epoch"]) == (described.group_epoch, described.assignment_epoch)
    assert page["group_epoch"] >= 2 and page["assignment_epoch"] == page["group_epoch"]  # two joins, at rest
    by_id = {m.member_id: m for m in described.members}
    assert {m["client_id"] for m in page["members"]} == {"modern-0", "modern-1"}
    for m in page["members"]:
        assert m["member_epoch"] == by_id[m["id"]].member_epoch == page["assignment_epoch"]
        assert m["assignment"] == m["target_assignment"] and len(m["assignment"]) == 2
        assert m["subscribed_topics"] == [TOPIC]
    owned = sorted(tp for m in page["members"] for tp in m["assignment"])
    assert owned == [f"{TOPIC}-{p}" for p in range(PARTITIONS)]  # each partition once
    owner = {tp: m["id"] for m in page["members"] for tp in m["assignment"]}
    for p in page["partitions"]:
        assert (p["committed"], p["end"], p["lag"]) == (MODERN_COMMITTED, RECORDS, RECORDS - MODERN_COMMITTED)
        assert p["member"] == owner[f"{p['topic']}-{p['partition']}"]
    assert page["lag"] == PARTITIONS * (RECORDS - MODERN_COMMITTED)


def test_a_classic_groups_page_is_as_before(site):
    status, page = call(site, f"/api/groups/{CLASSIC}")
    assert status == 200
    assert set(page) == CLASSIC_PAGE_KEYS | {"type"} and page["type"] == "classic"
    assert (page["state"], page["protocol_type"]) == ("Stable", "consumer")
    [member] = page["members"]
    assert set(member) == CLASSIC_MEMBER_KEYS and member["client_id"] == "classic-0"
    assert sorted(member["assignment"]) == [f"{TOPIC}-{p}" for p in range(PARTITIONS)]
    assert [p["committed"] for p in page["partitions"]] == [CLASSIC_COMMITTED] * PARTITIONS
    assert page["lag"] == PARTITIONS * (RECORDS - CLASSIC_COMMITTED)


def test_an_unknown_group_is_still_not_found(site):
    status, answer = call(site, "/api/groups/" + urllib.parse.quote("no such group", safe=""))
    assert (status, answer["error"]) == (404, "GROUP_ID_NOT_FOUND")


# --- the pages in a browser ----------------------------------------------------------------
def open_page(driver, site, path: str):  # noqa: F811 - driver is the fixture
    driver.get(site.url.rstrip("/") + path)
    return driver


def no_browser_errors(driver, screenshots, name: str) -> None:  # noqa: F811
    """The page's picture for a person to look at (test_app.py's folder), and no error logged."""
    driver.save_screenshot(str(screenshots / f"{name}.png"))
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []


def test_the_groups_page_shows_the_types(driver, site, screenshots):  # noqa: F811
    open_page(driver, site, "/groups")
    assert text(driver, f'#groups-table tr[data-group="{MODERN}"] td.type', "consumer")
    assert text(driver, f'#groups-table tr[data-group="{CLASSIC}"] td.type', "classic")
    assert text(driver, f'#groups-table tr[data-group="{MODERN}"] td.state', "Stable")
    no_browser_errors(driver, screenshots, "groups_with_types")


def test_the_consumer_groups_page_shows_epochs_and_assignments(driver, site, screenshots):  # noqa: F811
    page = reconciled(site)
    open_page(driver, site, f"/groups/{MODERN}")
    assert text(driver, "#group-type .value", "consumer")
    assert text(driver, "#group-assignor .value", "uniform")
    assert text(driver, "#group-epoch .value", str(page["group_epoch"]))
    assert text(driver, "#group-assignment-epoch .value", str(page["assignment_epoch"]))
    for m in page["members"]:
        row = f'#members-table tr[data-member="{m["id"]}"]'
        assert text(driver, f"{row} td.member-epoch", str(m["member_epoch"]))
        assert text(driver, f"{row} td.assignment", ", ".join(m["assignment"]))
        assert text(driver, f"{row} td.target-assignment", ", ".join(m["target_assignment"]))
    assert text(driver, "#group-lag .value", str(PARTITIONS * (RECORDS - MODERN_COMMITTED)))
    assert text(driver, f'#group-partitions-table tr[data-partition="{TOPIC}-0"] td.committed', str(MODERN_COMMITTED))
    no_browser_errors(driver, screenshots, "consumer_group")


def test_the_classic_groups_page_has_no_epochs(driver, site, screenshots):  # noqa: F811
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    open_page(driver, site, f"/groups/{CLASSIC}")
    assert text(driver, "#group-lag .value", str(PARTITIONS * (RECORDS - CLASSIC_COMMITTED)))
    assert "classic-0" in text(driver, "#members-table tbody tr")
    # the table is rebuilt on every refresh: its headers are read in one go, again if it changed meanwhile
    headers = WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: [th.text for th in d.find_elements(By.CSS_SELECTOR, "#members-table th")] or False)
    assert headers == ["Member", "Client", "Host", "Instance", "Assigned partitions"]
    assert driver.find_elements(By.CSS_SELECTOR, "#group-epoch, #group-type, #group-assignment-epoch") == []
    no_browser_errors(driver, screenshots, "classic_group_beside_consumer_groups")
