"""Client quota configs in the metadata store as Kafka keeps them in ZooKeeper mode:
/config/users/<user>[/clients/<client-id>], /config/clients/<client-id>, <default> entities,
values written as ZkAdminManager writes them, a user's SCRAM credentials kept."""

import json

import pytest

from odradek.metadata.embedded_store import EmbeddedStore
from odradek.server import client_quota_configs as qc


@pytest.fixture
def store(tmp_path):
    with EmbeddedStore(tmp_path / "meta") as s:
        yield s


def _stored(store, path):
    return json.loads(store.get(path)[0])


def test_entities_map_to_kafkas_paths_and_back():
    cases = {
        qc.make_entity(user="alice"): "users/alice",
        qc.make_entity(user=None): "users/<default>",
        qc.make_entity(client_id="c 1"): "clients/c%201",
        qc.make_entity(client_id=None): "clients/<default>",
        qc.make_entity(user="alice", client_id="c1"): "users/alice/clients/c1",
        qc.make_entity(user=None, client_id=None): "users/<default>/clients/<default>",
    }
    for entity, path in cases.items():
        assert qc.entity_path(entity) == path
        assert qc.entity_of_path(path) == entity
    assert qc.entity_of_path("users/a/groups/b") is None
    for bad in [(), (("ip", "1.2.3.4"),), (("user", ""),), (("user", "a"), ("user", "b"))]:
        with pytest.raises(qc.QuotaConfigError):
            qc.entity_path(bad)


def test_alter_writes_kafkas_layout_and_keeps_scram_credentials(store):
    store.create("/config/users/alice", json.dumps(
        {"version": 1, "config": {"SCRAM-SHA-512": "salt=x,stored_key=y,server_key=z,iterations=4096"}}).encode(),
        make_parents=True)
    alice = qc.make_entity(user="alice")
    qc.alter(store, alice, [("producer_byte_rate", 1024.0), ("request_percentage", 12.5)])
    assert _stored(store, "/config/users/alice") == {"version": 1, "config": {
        "SCRAM-SHA-512": "salt=x,stored_key=y,server_key=z,iterations=4096",
        "producer_byte_rate": "1024", "request_percentage": "12.5"}}
    qc.alter(store, alice, [("producer_byte_rate", None), ("request_percentage", None)])
    assert _stored(store, "/config/users/alice")["config"] == {
        "SCRAM-SHA-512": "salt=x,stored_key=y,server_key=z,iterations=4096"}
    qc.alter(store, qc.make_entity(user="alice", client_id=None), [("consumer_byte_rate", 5.0)])
    assert _stored(store, "/config/users/alice/clients/<default>")["config"] == {"consumer_byte_rate": "5"}
    # a user's client quota made first leaves the user's znode a config SCRAM can read
    qc.alter(store, qc.make_entity(user="carol", client_id="c"), [("producer_byte_rate", 1.0)])
    assert _stored(store, "/config/users/carol") == {"version": 1, "config": {}}


def test_bad_values_are_refused_and_validate_only_writes_nothing(store):
    entity = qc.make_entity(client_id="c")
    with pytest.raises(qc.QuotaConfigError, match="must be a LONG value"):
        qc.alter(store, entity, [("producer_byte_rate", 1.5)])
    with pytest.raises(qc.QuotaConfigError, match="Invalid configuration key"):
        qc.alter(store, entity, [("bogus", 1.0)])
    qc.alter(store, entity, [("producer_byte_rate", 10.0)], validate_only=True)
    assert store.exists("/config/clients/c") is None


def test_all_quotas_lists_every_entity_with_a_quota(store):
    qc.alter(store, qc.make_entity(user="alice", client_id="c1"), [("producer_byte_rate", 1.0)])
    qc.alter(store, qc.make_entity(user=None), [("consumer_byte_rate", 2.0)])
    qc.alter(store, qc.make_entity(client_id=None), [("request_percentage", 3.0)])
    # a user with credentials only is no quota entity; a client written by Kafka's tools is read
    store.create("/config/users/bob", b'{"version":1,"config":{"SCRAM-SHA-256":"x"}}', make_parents=True)
    store.create("/config/clients/k", b'{"version":1,"config":{"producer_byte_rate":"9"}}', make_parents=True)
    assert qc.all_quotas(store) == {
        qc.make_entity(user="alice", client_id="c1"): {"producer_byte_rate": 1.0},
        qc.make_entity(user=None): {"consumer_byte_rate": 2.0},
        qc.make_entity(client_id=None): {"request_percentage": 3.0},
        qc.make_entity(client_id="k"): {"producer_byte_rate": 9.0},
    }
