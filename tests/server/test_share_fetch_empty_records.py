"""ShareFetch v1 never answers a partition with null Records (Kafka 4.2's
ShareFetchResponse.toMessage turns a null into MemoryRecords.EMPTY "to protect the clients").
librdkafka's share consumer (rdkafka_fetcher.c, rd_kafka_share_fetch_reply_handle_partition)
drops the whole response as malformed when a partition's Records are null, so a partition with
nothing acquired, or with an error, is answered with an empty record set."""

from __future__ import annotations

import uuid

import pytest

from odradek.protocol import api_keys
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from tests.server.group_clients import create_topic
from tests.server.group_wire import WireClient
from tests.server.test_share_fetch_wire import share_fetch
from tests.server.test_share_group_heartbeat import join, settled


@pytest.fixture(autouse=True)
def advertised(monkeypatch):
    for key in (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH,
                ApiKey.SHARE_ACKNOWLEDGE):
        monkeypatch.setitem(api_keys.SUPPORTED, key, (1, 1))


def partitions(response):
    return [p for t in response.responses for p in t.partitions]


def test_partitions_without_records_carry_an_empty_record_set(broker):
    create_topic(broker.bootstrap, "q", 1)
    topic_id = broker.broker.metadata_image().topic("q").topic_id
    member = str(uuid.uuid4())
    with WireClient(broker.port) as c:
        settled(c, "sg", member, join(c, "sg", member), 1)
        r = share_fetch(c, "sg", member, 0, topic_id)  # latest: nothing to acquire
        assert r.error_code == E.NONE
        (pd,) = partitions(r)
        assert pd.error_code == E.NONE and not pd.acquired_records
        assert pd.records is not None and len(pd.records) == 0
        r = share_fetch(c, "sg", member, 1, uuid.uuid4())  # a partition answered with an error
        (pd,) = partitions(r)
        assert pd.error_code == E.UNKNOWN_TOPIC_ID
        assert pd.records is not None and len(pd.records) == 0
