"""A console with a password in a real headless Chromium (as test_app.py drives it): without
the login the browser gets the 401 and none of the cluster; with it (the user name and password
in the address, as a browser's login prompt would send them) the pages fill from the API and a
topic is created through the page: the page's own API calls carry the login and its Origin."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from odradek.client import AdminClient
from odradek.console.app import ConsoleConfig
from odradek.console.console_auth import ConsoleAuth
from odradek.console.console_server import ConsoleServer
from tests.console.test_app import click, confirm, driver, text  # noqa: F401 - driver is a fixture
from tests.console.conftest import TOPIC


@pytest.fixture(scope="module")
def guarded(broker):
    config = ConsoleConfig(broker.bootstrap, auth=ConsoleAuth("ada", "correct horse"), refresh_ms=500)
    with ConsoleServer(config) as server:
        yield server


def test_the_pages_ask_for_the_login_and_work_with_it(driver, guarded, broker):  # noqa: F811
    driver.get(guarded.url + "topics")
    assert driver.title != "odradek console" and TOPIC not in driver.page_source
    assert driver.find_elements(By.ID, "topics-table") == []  # headless: the prompt dismissed, nothing shown
    driver.get(guarded.url.replace("http://", "http://ada:correct%20horse@") + "topics")
    text(driver, f'#topics-table tr[data-topic="{TOPIC}"]')
    driver.find_element(By.ID, "new-topic-name").send_keys("made-behind-a-login")
    click(driver, "#create-topic")
    confirm(driver)
    assert text(driver, '#topics-table tr[data-topic="made-behind-a-login"] td.partitions', "1")
    with AdminClient(broker.bootstrap) as admin:
        assert "made-behind-a-login" in admin.list_topics()
    severe = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert all("401" in m for m in severe), severe  # only the first, refused, visit
