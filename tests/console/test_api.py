"""The console's JSON API as a script would use it: a page by time in the message browser,
and refusals with Kafka's error codes (unknown topic or group, bad input, a topic that
exists, a change from another site's page)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from odradek.client import AdminClient, Consumer, TopicPartition
from tests.console.conftest import GROUP, LAG, PARTITIONS, RECORDS_PER_PARTITION, TOPIC, record_key


def call(console, path: str, method: str = "GET", body=None, headers=None) -> tuple[int, dict]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(console.url.rstrip("/") + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_page_of_records_from_a_time(console):
    status, first = call(console, f"/api/topics/{TOPIC}/messages?partition=0&offset=5&limit=1")
    assert status == 200 and first["records"][0]["key"]["text"] == record_key(0, 5).decode()
    timestamp = first["records"][0]["timestamp"]
    status, page = call(console, f"/api/topics/{TOPIC}/messages?partition=0&timestamp={timestamp}&limit=50")
    assert status == 200
    assert page["records"][0]["timestamp"] >= timestamp  # the first record at or after the time
    assert page["records"][-1]["offset"] == RECORDS_PER_PARTITION - 1 and page["next"] == page["end"]
    status, latest = call(console, f"/api/topics/{TOPIC}/messages?partition=0&limit=2")
    assert [r["offset"] for r in latest["records"]] == [RECORDS_PER_PARTITION - 2, RECORDS_PER_PARTITION - 1]


def test_groups_answer_with_their_lag(console, broker):
    status, group = call(console, f"/api/groups/{GROUP}")
    assert status == 200 and group["lag"] == sum(LAG.values())
    with AdminClient(broker.bootstrap) as admin:  # any characters: the pages quote ids in their links
        admin.alter_group_offsets("team/a b", {TopicPartition(TOPIC, 0): 1})
    status, group = call(console, "/api/groups/" + urllib.parse.quote("team/a b", safe=""))
    assert (status, group["id"], group["lag"]) == (200, "team/a b", RECORDS_PER_PARTITION - 1)


def test_a_member_and_its_assignment(console, broker):
    with Consumer(broker.bootstrap, group_id="live-readers", client_id="reader-1",
                  auto_offset_reset="earliest") as consumer:
        consumer.subscribe([TOPIC])
        while not consumer.assignment():
            consumer.poll(timeout_ms=200)
        status, group = call(console, "/api/groups/live-readers")
    assert (status, group["state"], group["protocol_type"]) == (200, "Stable", "consumer")
    [member] = group["members"]
    assert member["client_id"] == "reader-1"
    assert sorted(member["assignment"]) == [f"{TOPIC}-{p}" for p in range(PARTITIONS)]
    owners = {(p["topic"], p["partition"]): p["member"] for p in group["partitions"]}
    assert owners == {(TOPIC, p): member["id"] for p in range(PARTITIONS)}


@pytest.mark.parametrize(("path", "status", "error"), [
    ("/api/topics/no-such-topic", 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("/api/groups/no-such-group", 404, "GROUP_ID_NOT_FOUND"),
    ("/api/topics/no-such-topic/messages?partition=0", 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    (f"/api/topics/{TOPIC}/messages?partition=9", 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    (f"/api/topics/{TOPIC}/messages", 400, "INVALID_REQUEST"),
    (f"/api/topics/{TOPIC}/messages?partition=x", 400, "INVALID_REQUEST"),
    (f"/api/topics/{TOPIC}/messages?partition=0&offset=1&timestamp=1", 400, "INVALID_REQUEST"),
])
def test_lookups_refused_with_kafka_errors(console, path, status, error):
    answer_status, answer = call(console, path)
    assert (answer_status, answer["error"]) == (status, error)


@pytest.mark.parametrize(("body", "status", "error"), [
    (b"{not json", 400, "INVALID_REQUEST"),
    ({"partitions": 1}, 400, "INVALID_REQUEST"),
    ({"name": "t-bad", "partitions": "many"}, 400, "INVALID_REQUEST"),
    ({"name": "t-bad", "configs": {"retention.ms": None}}, 400, "INVALID_CONFIG"),
    ({"name": TOPIC, "partitions": 1}, 409, "TOPIC_ALREADY_EXISTS"),
])
def test_topic_creation_refused_with_kafka_errors(console, body, status, error):
    answer_status, answer = call(console, "/api/topics", "POST", body)
    assert (answer_status, answer["error"]) == (status, error)


def test_changes_only_from_the_consoles_own_pages(console):
    status, answer = call(console, f"/api/topics/{TOPIC}", "DELETE", headers={"Origin": "http://elsewhere.example"})
    assert (status, answer["error"]) == (403, "INVALID_REQUEST")
    status, answer = call(console, "/api/topics", "POST", b"name=x", headers={"Content-Type": "text/plain"})
    assert (status, answer["error"]) == (400, "INVALID_REQUEST")


def test_delete_a_topic_and_reset_a_config(console, broker):
    assert call(console, "/api/topics", "POST", {"name": "short-lived", "partitions": 1,
                                                 "configs": {"retention.ms": 1000}})[0] == 200
    status, _ = call(console, "/api/topics/short-lived/configs", "POST", {"delete": ["retention.ms"]})
    assert status == 200
    configs = {c["name"]: c for c in call(console, "/api/topics/short-lived")[1]["configs"]}
    assert configs["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG"
    assert call(console, "/api/topics/short-lived", "DELETE")[0] == 200
    with AdminClient(broker.bootstrap) as admin:
        assert "short-lived" not in admin.list_topics()
