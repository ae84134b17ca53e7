"""The console in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
driven by Selenium) against a broker with a topic and a lagging group (conftest.py): every
page shows what it should, the message browser finds a record by offset, a topic is created
and a config changed through the page's confirmation, the pages follow the cluster live, and
the browser logs no error. A screenshot of each page goes to ``$ODRADEK_SCREENSHOTS`` (default
build/console-screenshots/) for a person to look at.

Waits are WebDriverWait on the page's elements (tables are rebuilt on every refresh, so a
found element may go stale: such waits look again)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from odradek.client import AdminClient, ConfigResource, NewTopic, Producer, ResourceType
from tests.conftest import ROOT
from tests.console.conftest import COMMITTED, GROUP, LAG, PARTITIONS, RECORDS_PER_PARTITION, TOPIC, record_key

WAIT_SECONDS = 20  # a page answers in well under a second; this bounds a loaded CI machine
WIDTH, HEIGHT = 1400, 1000


@pytest.fixture(scope="module")
def screenshots() -> Path:
    folder = Path(os.environ.get("ODRADEK_SCREENSHOTS") or ROOT / "build" / "console-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def driver():
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={WIDTH},{HEIGHT}",
                "--disable-gpu", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture
def page(driver, console, screenshots, request):
    """``page(path)`` opens a console page; at the end of the test, the page's screenshot is
    saved (named after the test) and the browser's log must hold no error."""
    def open_page(path: str):
        driver.get(console.url.rstrip("/") + path)
        return driver

    yield open_page
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(WIDTH, max(HEIGHT, height))  # the whole page in one picture
    driver.save_screenshot(str(screenshots / f"{request.node.name.removeprefix('test_')}.png"))
    driver.set_window_size(WIDTH, HEIGHT)
    severe = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert severe == []


def text(driver, css: str, expected: str | None = None) -> str:
    """The text of the element at ``css`` once it exists (and equals ``expected``, if given)."""
    def look(d):
        found = d.find_element(By.CSS_SELECTOR, css).text.strip()
        return (found,) if expected is None or found == expected else False

    wait = WebDriverWait(driver, WAIT_SECONDS, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
    return wait.until(look, message=f"{css} never showed {expected!r}")[0]


def click(driver, css: str) -> None:
    wait = WebDriverWait(driver, WAIT_SECONDS, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, css).click() or True, message=f"cannot click {css}")


def confirm(driver) -> None:
    text(driver, "#confirm[open] #confirm-ok")
    click(driver, "#confirm-ok")


def test_overview(page):
    driver = page("/")
    assert text(driver, "#card-brokers .value", "1")
    assert text(driver, "#card-partitions .value") != ""
    assert text(driver, "#card-offline .value", "0")
    assert text(driver, "#card-under-replicated .value", "0")
    text(driver, "#throughput-chart .uplot")  # drawn once two samples are in
    assert driver.title == "odradek console"


def test_brokers(page, broker):
    driver = page("/brokers")
    row = 'tr[data-broker="1"]'
    assert broker.bootstrap in text(driver, row)


def test_topics_list_the_topic_and_its_partitions(page):
    driver = page("/topics")
    row = f'#topics-table tr[data-topic="{TOPIC}"]'
    assert text(driver, f"{row} td.partitions", str(PARTITIONS))
    text(driver, f"{row} .spark .uplot")  # the messages/s sparkline


def test_topic_page_shows_partitions_and_configs(page):
    driver = page(f"/topics/{TOPIC}")
    for p in range(PARTITIONS):
        row = f'#partitions-table tr[data-partition="{p}"]'
        assert text(driver, f"{row} td.end", str(RECORDS_PER_PARTITION))
        assert text(driver, f"{row} td.leader", "1")
        assert text(driver, f"{row} td.isr", "1")
    assert text(driver, '#configs-table tr[data-config="cleanup.policy"] td.value', "delete")


def test_message_browser_finds_a_record_by_offset(page):
    driver = page(f"/topics/{TOPIC}")
    text(driver, '#browse-partition option[value="1"]')
    Select(driver.find_element(By.ID, "browse-partition")).select_by_value("1")
    Select(driver.find_element(By.ID, "browse-mode")).select_by_value("offset")
    offset = driver.find_element(By.ID, "browse-offset")
    offset.clear()
    offset.send_keys("7")
    click(driver, "#browse-go")
    row = '#messages-table tr[data-offset="7"]'
    assert text(driver, f"{row} td.key", record_key(1, 7).decode())
    assert text(driver, f"{row} td.value", '{"partition": 1, "n": 7}')
    assert text(driver, f"{row} td.headers", "source: tests")
    assert [r.get_attribute("data-offset") for r in driver.find_elements(By.CSS_SELECTOR, "#messages-table tbody tr")] \
        == ["7", "8", "9"]  # the page runs to the partition's end
    Select(driver.find_element(By.ID, "browse-format")).select_by_value("hex")
    assert text(driver, f"{row} td.key", record_key(1, 7).hex(" "))
    Select(driver.find_element(By.ID, "browse-format")).select_by_value("json")
    assert text(driver, f"{row} td.value", '{\n  "partition": 1,\n  "n": 7\n}')


def test_groups_list_the_group_and_its_lag(page):
    driver = page("/groups")
    row = f'#groups-table tr[data-group="{GROUP}"]'
    assert text(driver, f"{row} td.lag", str(sum(LAG.values())))
    assert text(driver, f"{row} td.state", "Empty")


def test_group_page_shows_offsets_and_lag(page):
    driver = page(f"/groups/{GROUP}")
    assert text(driver, "#group-lag .value", str(sum(LAG.values())))
    for p, committed in COMMITTED.items():
        row = f'#group-partitions-table tr[data-partition="{TOPIC}-{p}"]'
        assert text(driver, f"{row} td.committed", str(committed))
        assert text(driver, f"{row} td.end", str(RECORDS_PER_PARTITION))
        assert text(driver, f"{row} td.lag", str(LAG[p]))
    text(driver, "#lag-chart .uplot")  # lag over time


def test_pages_follow_the_cluster_live(page, broker):
    driver = page(f"/groups/{GROUP}")
    text(driver, "#group-lag .value", str(sum(LAG.values())))
    with Producer(broker.bootstrap) as producer:
        for i in range(5):
            producer.send(TOPIC, value=b"more", partition=2)
        producer.flush()
    # no reload: the page asks again and shows the new end and lag
    assert text(driver, f'#group-partitions-table tr[data-partition="{TOPIC}-2"] td.end', str(RECORDS_PER_PARTITION + 5))
    assert text(driver, "#group-lag .value", str(sum(LAG.values()) + 5))


def test_create_a_topic_after_confirming(page, broker, screenshots):
    driver = page("/topics")
    text(driver, f'#topics-table tr[data-topic="{TOPIC}"]')
    driver.find_element(By.ID, "new-topic-name").send_keys("made-in-the-console")
    driver.find_element(By.ID, "new-topic-partitions").send_keys("2")
    click(driver, "#create-topic")
    assert "made-in-the-console" in text(driver, "#confirm[open] #confirm-title")
    assert driver.switch_to.active_element.get_attribute("id") == "confirm-cancel"  # a stray key changes nothing
    driver.save_screenshot(str(screenshots / "create_a_topic_confirmation.png"))
    confirm(driver)
    assert text(driver, '#topics-table tr[data-topic="made-in-the-console"] td.partitions', "2")
    with AdminClient(broker.bootstrap) as admin:
        assert len(admin.describe_topics(["made-in-the-console"])["made-in-the-console"].partitions) == 2


def test_cancelled_delete_keeps_the_topic_and_a_config_is_edited(page, broker):
    driver = page(f"/topics/{TOPIC}")
    click(driver, "#delete-topic")
    text(driver, "#confirm[open]")
    click(driver, "#confirm-cancel")
    click(driver, '#configs-table tr[data-config="retention.ms"] button.edit-config')
    field = driver.find_element(By.ID, "config-value")
    assert driver.switch_to.active_element == field  # the dialog opens ready to type
    field.clear()
    field.send_keys("3600000", Keys.ENTER)  # Enter confirms
    assert text(driver, '#configs-table tr[data-config="retention.ms"] td.value', "3600000")
    with AdminClient(broker.bootstrap) as admin:
        resource = ConfigResource(ResourceType.TOPIC, TOPIC)
        assert admin.describe_configs([resource])[resource]["retention.ms"].value == "3600000"
        assert TOPIC in admin.list_topics()


def test_delete_a_topic_after_confirming(page, broker):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("to-be-deleted", 1, 1)])
    driver = page("/topics/to-be-deleted")
    text(driver, '#partitions-table tr[data-partition="0"]')
    click(driver, "#delete-topic")
    assert "to-be-deleted" in text(driver, "#confirm[open] #confirm-title")
    confirm(driver)
    WebDriverWait(driver, WAIT_SECONDS).until(lambda d: d.current_url == d.current_url.split("/topics")[0] + "/topics")
    text(driver, f'#topics-table tr[data-topic="{TOPIC}"]')
    assert driver.find_elements(By.CSS_SELECTOR, '#topics-table tr[data-topic="to-be-deleted"]') == []
    with AdminClient(broker.bootstrap) as admin:
        assert "to-be-deleted" not in admin.list_topics()


def _only_the_404_logged(driver, api_path: str) -> None:
    """Chromium logs the API's 404 answer as an error; nothing else may be there."""
    severe = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert all(api_path in m and "404" in m for m in severe), severe


def test_an_unknown_topic_shows_not_found_and_no_delete_button(page):
    driver = page("/topics/no-such-topic")
    assert text(driver, "#not-found h1", "Topic not found")
    assert "no-such-topic" in text(driver, "#not-found")
    assert driver.find_elements(By.ID, "delete-topic") == []
    _only_the_404_logged(driver, "/api/topics/no-such-topic")


def test_an_unknown_group_shows_not_found(page):
    driver = page("/groups/no-such-group")
    assert text(driver, "#not-found h1", "Consumer group not found")
    assert "no-such-group" in text(driver, "#not-found")
    _only_the_404_logged(driver, "/api/groups/no-such-group")


def test_overview_counts_topics_as_the_topics_page_lists_them(page):
    driver = page("/")
    topics = int(text(driver, "#card-topics .value"))
    assert "partitions" in text(driver, "#card-internal-topics .value")
    assert text(driver, "#card-offline-brokers .value", "0")
    driver = page("/topics")
    text(driver, f'#topics-table tr[data-topic="{TOPIC}"]')
    rows = driver.find_elements(By.CSS_SELECTOR, "#topics-table tbody tr")
    assert len(rows) == topics  # internal topics hidden by default, and not counted in the card
    assert text(driver, "#topics-summary").startswith(f"{topics} topic(s)")
