"""``max.connections.per.ip`` (with its overrides) and ``max.connections``, set at run time as
dynamic broker configs: connections over the limit are closed as soon as they are accepted,
and the connections already open keep being served."""

from __future__ import annotations

import pytest
from kafka.admin import ConfigResource, KafkaAdminClient

from odradek.server.connection_quotas import parse_overrides
from tests.server.clients import wait_until
from tests.server.wire import WireClient, message


def answers(client: WireClient) -> bool:
    _, response = client.request("ApiVersions", 0, message("ApiVersionsRequest"))
    return response.error_code == 0


def set_configs(admin, configs: dict) -> None:
    result = admin.alter_configs([ConfigResource("BROKER", "1", configs)], incremental=True, raise_on_unknown=False)
    assert result["broker"]["1"] == "OK"


def open_connections(broker) -> int:
    return len(broker.broker.connections)


@pytest.mark.parametrize("configs", [
    {"max.connections.per.ip": "2"},
    {"max.connections.per.ip.overrides": "127.0.0.1:2"},
    {"max.connections": "2"},
])
def test_connections_over_the_limit_are_closed_and_the_others_served(broker, configs):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    set_configs(admin, configs)
    admin.close()
    wait_until(lambda: open_connections(broker) == 0, what="the admin client's connections closed")
    clients = [WireClient(broker.bootstrap) for _ in range(3)]
    try:
        assert answers(clients[0]) and answers(clients[1])
        assert clients[2].is_closed()
        assert answers(clients[0])
        clients[0].close()
        wait_until(lambda: open_connections(broker) == 1, what="a slot freed")
        clients.append(WireClient(broker.bootstrap))
        assert answers(clients[-1])
    finally:
        for client in clients:
            client.close()


def test_bad_overrides_are_refused(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = admin.alter_configs([ConfigResource("BROKER", "1", {"max.connections.per.ip.overrides": "127.0.0.1"})],
                                     incremental=True, raise_on_unknown=False)
        assert result["broker"]["1"].startswith("[Error 42] InvalidRequestError: max.connections.per.ip.overrides")
    finally:
        admin.close()


def test_overrides_parse_as_kafka_writes_them():
    assert parse_overrides("127.0.0.1:5, localhost:7") == {"127.0.0.1": 7}  # localhost resolves to the same
    assert parse_overrides("") == {}
