"""``odradek configs --entity-type users|clients``: quotas set, described and deleted with the
CLI as kafka-configs.sh does, stored where Kafka stores them, and Kafka's refusals."""

from __future__ import annotations

import json


def _store_config(broker, path):
    return json.loads(broker.call(broker.broker.metadata.store.get, path)[0])["config"]


def test_client_quota_round_trip(cli, broker):
    base = ("configs", "--entity-type", "clients", "--entity-name", "cli-greedy")
    added = cli(*base, "--alter", "--add-config", "producer_byte_rate=204800,consumer_byte_rate=409600")
    assert added.code == 0 and added.lines() == ["Completed updating config for client cli-greedy."], added.err
    assert _store_config(broker, "/config/clients/cli-greedy") == {
        "producer_byte_rate": "204800", "consumer_byte_rate": "409600"}
    assert cli(*base, "--describe").lines() == [
        "Quota configs for client-id 'cli-greedy' are consumer_byte_rate=409600.0, producer_byte_rate=204800.0"]
    assert cli(*base, "--alter", "--delete-config", "consumer_byte_rate").code == 0
    assert cli(*base, "--describe").lines() == [
        "Quota configs for client-id 'cli-greedy' are producer_byte_rate=204800.0"]
    refused = cli(*base, "--alter", "--delete-config", "consumer_byte_rate")
    assert refused.code != 0 and "Invalid config(s): consumer_byte_rate" in refused.err
    refused = cli(*base, "--alter", "--add-config", "SCRAM-SHA-512=[password=x]")
    assert refused.code != 0 and "Only quota configs can be added for 'clients'" in refused.err
    refused = cli(*base, "--alter", "--add-config", "producer_byte_rate=1.5")
    assert refused.code != 0 and "must be a LONG value" in refused.err
    refused = cli(*base, "--alter", "--add-config", "producer_byte_rate=lots")
    assert refused.code != 0 and "Cannot parse quota configuration value" in refused.err
    assert cli(*base, "--alter", "--delete-config", "producer_byte_rate").code == 0
    assert cli(*base, "--describe").lines() == []


def test_user_default_and_user_client_quotas(cli, broker):
    default = ("configs", "--entity-type", "users", "--entity-default")
    assert cli(*default, "--alter", "--add-config", "consumer_byte_rate=1000").code == 0
    assert _store_config(broker, "/config/users/<default>") == {"consumer_byte_rate": "1000"}
    assert cli(*default, "--describe").lines() == ["Quota configs for the default user-principal are "
                                                   "consumer_byte_rate=1000.0"]
    pair = ("configs", "--user", "cli-alice", "--client", "c1")
    assert cli(*pair, "--alter", "--add-config", "request_percentage=50").code == 0
    assert _store_config(broker, "/config/users/cli-alice/clients/c1") == {"request_percentage": "50.0"}
    assert cli(*pair, "--describe").lines() == [
        "Quota configs for user-principal 'cli-alice', client-id 'c1' are request_percentage=50.0"]
    # the user alone has no quota of its own (and no SCRAM credential)
    described = cli("configs", "--entity-type", "users", "--entity-name", "cli-alice", "--describe")
    assert not any(line.startswith("Quota configs") for line in described.lines())
    assert cli(*default, "--alter", "--delete-config", "consumer_byte_rate").code == 0
    assert cli(*pair, "--alter", "--delete-config", "request_percentage").code == 0
